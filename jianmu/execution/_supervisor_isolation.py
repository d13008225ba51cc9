"""The warm supervisor's third part: what keeps one command's kernel state from the next.

Standard library only, like `jianmu.execution._supervisor_main`, on whose names it runs (the
host passes this source as the supervisor's third argument). Files a command leaves are for
the next one (the workspace, ``/tmp``); what it leaves in the kernel is not:

- with ``seccomp`` (a BPF program, hex: `jianmu.execution._harden`) every child loads the
  filter before exec, after ``no_new_privs``: the keyring calls fail (`harden`);
- with ``own_ipc`` (root, no bubblewrap) every child takes an IPC namespace of its own,
  ahead of its call when forked ahead;
- with ``clear_ipc`` (the host runs one command at a time: bubblewrap's namespace, a
  container's) every System V object and POSIX message queue of the supervisor's IPC
  namespace is removed once no command runs (`clear_ipc`), before the next request is read;
  if one stays, the supervisor exits and a fresh one (a fresh namespace, locally) serves on.
"""

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time the supervisor runs this file on its own names
    from jianmu.execution._supervisor_main import CONFIG, LIBC, ctypes, prctl


def _fprog(hexed):
    """The ``struct sock_fprog`` of the config's seccomp program, built once, before forks."""
    if not hexed or LIBC is None:
        return None

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = bytes.fromhex(hexed)
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = Fprog(len(program) // 8, ctypes.addressof(buffer))
    return ctypes.byref(prog), prog, buffer  # the last two kept alive with it


FPROG = _fprog(CONFIG.get("seccomp"))


def harden():
    """In a child before exec: its own IPC namespace and the seccomp filter, as configured.

    Raises OSError when either cannot be had: the command must not run without them.
    """
    if CONFIG.get("own_ipc") and (LIBC is None or LIBC.unshare(0x08000000) != 0):
        raise OSError("could not give the command its own IPC namespace")  # CLONE_NEWIPC
    if CONFIG.get("seccomp"):
        if FPROG is None or prctl(38, 1) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError("could not set no_new_privs for the seccomp filter")
        if LIBC.prctl(22, 2, FPROG[0], 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
            raise OSError("could not load the seccomp filter")


def ipc_ids(kind):
    """The ids of the System V objects of ``kind`` (shm, msg, sem) in our IPC namespace."""
    try:
        with open(f"/proc/sysvipc/{kind}") as fh:
            lines = fh.read().splitlines()[1:]
    except OSError:
        return []
    return [int(line.split()[1]) for line in lines if line.split()[1:2]]


def remove_ipc(kind, ident):
    """``IPC_RMID`` (0) on one System V object; 0 when removed."""
    if kind == "sem":
        return LIBC.semctl(ident, 0, 0)
    return (LIBC.shmctl if kind == "shm" else LIBC.msgctl)(ident, 0, None)


IPC_INFO = None if LIBC is None else (ctypes.c_int * 64)()


def ipc_in_use():
    """Whether our IPC namespace may hold an object: three ``*_INFO`` counts and one folder,
    a few system calls (the full lists in ``/proc/sysvipc`` cost far more)."""
    if IPC_INFO is None:
        return True
    # each count read before the next call reuses the buffer: SHM_INFO's used_ids, MSG_INFO's
    # msgpool (queues), SEM_INFO's semusz (sets)
    if LIBC.shmctl(0, 14, IPC_INFO) < 0 or IPC_INFO[0]:
        return True
    if LIBC.msgctl(0, 12, IPC_INFO) < 0 or IPC_INFO[0]:
        return True
    if LIBC.semctl(0, 0, 19, IPC_INFO) < 0 or IPC_INFO[7]:
        return True
    try:
        return bool(queues())
    except OSError:
        return True  # not known to be empty


def queues():
    """The paths of the POSIX message queues in our IPC namespace (``mqueue``: where its file
    system is mounted, ``None`` where the kernel has none).

    Raises OSError where they cannot be listed: then none can be removed either.
    """
    folder = CONFIG.get("mqueue")
    return [] if folder is None else [f"{folder}/{name}" for name in os.listdir(folder)]


def clear_ipc():
    """Remove every System V object and POSIX message queue of our IPC namespace; return
    whether none is left.

    Only their owner (or CAP_SYS_ADMIN, which a root supervisor does not keep) may remove
    them, so a root supervisor takes the commands' uid as its effective one meanwhile: its
    real and saved uid stay root, so no process of that uid may signal it even then.
    """
    if not ipc_in_use():
        return True
    uid = (CONFIG.get("user") or [None])[0]
    switched = uid is not None and os.geteuid() == 0
    if switched:
        os.setresuid(-1, uid, -1)
    left = 0
    try:
        for kind in ("shm", "msg", "sem"):
            for ident in ipc_ids(kind):
                if LIBC is None or remove_ipc(kind, ident) != 0:
                    left += 1
        try:
            paths = queues()
        except OSError:
            paths, left = [], left + 1  # not mounted: queues we cannot see may be there
        for path in paths:
            try:
                os.unlink(path)
            except OSError:
                left += 1
    finally:
        if switched:
            os.setresuid(-1, 0, -1)
    return left == 0
