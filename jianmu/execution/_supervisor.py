"""The warm supervisor: one long-lived process inside a sandbox that starts each command.

Standalone, standard library only: the host (`jianmu.execution._warm`) runs this file's source as
``python3 -I -S -c <source> <config JSON>`` inside the sandbox's isolation (a bubblewrap
namespace, a container); it is never imported. Frames go both ways on stdin/stdout: ``>II``
(header length, payload length), a JSON header, the payload.

Host to supervisor: ``{"op": "run", "id", "argv", "env", "cwd", "timeout", "limit", "rlimits",
"procs", "oom", "next"}`` with stdin as payload; ``{"op": "kill", "id"}``. Supervisor to host:
``{"ready": pid, "guarded"}`` once, then per command ``{"id", "exit", "timed_out", "duration",
"out", "err", "out_dropped", "err_dropped", "oom", "left", "error", "prefork", "empty"}`` with
stdout then stderr as payload (``empty``: its group was seen empty).

**A command** (`Command`) is a fresh child in its own session, with its rlimits, its control
group (``procs``: files it writes ``0`` to before exec) and the user dropped; at its exit or
timeout its process group and control group are killed, and in ``sweep`` mode (one command at a
time, inside a container only) every process the supervisor may signal (``kill(-1)``, repeated
until none is left). The supervisor is not dumpable, so a command of the same uid can neither
trace it nor open its pipes through ``/proc``; ``guarded`` in the ready frame says so. In
``shield`` mode it ignores every signal it may (a command of its own uid can still SIGKILL or
stop it: the host then sees its stream end, or no reply, and sweeps from outside). SIGPIPE is
ignored: a command that closes its stdin only ends what it is fed.

**Starting a child.** A command with nothing to do between fork and exec is `Spawned`
(``posix_spawn``, far cheaper than forking Python). `preexec` is what a child forked for a
command does before ``exec``: as root, enter the cwd, join the command's control group, empty
the bounding set, take its own IPC namespace and load the seccomp filter (as configured); then
the rlimits; then drop to the user. A `Spare` (``prefork`` on) is that child forked for the next
command as soon as the host named its control group, the root-side part done, in its own
session, with its own pipes on 0, 1 and 2, every other descriptor closed and every signal at
its default. It waits on a socket for its command (``argv``, ``env``, whether stdin is fed, the
rlimits), sets the rlimits, drops to the user and execs: per call only a socket round trip and
the ``exec`` are left. It waits as root when the supervisor is root (so no process of the
commands' user may signal it) and is undumpable until its ``exec`` (none may trace it or read
its descriptors); it holds no other command's descriptors and serves one command. A set-up that
fails ends it, and the command forks the usual way.

**Kernel state.** Files a command leaves are for the next one (the workspace, ``/tmp``); what it
leaves in the kernel is not:

- with ``seccomp`` (a BPF program, hex: `jianmu.execution._process`) every child loads the
  filter before exec, after ``no_new_privs``: the keyring calls fail (`harden`);
- with ``own_ipc`` (root, no bubblewrap) every child takes an IPC namespace of its own,
  ahead of its call when forked ahead;
- with ``clear_ipc`` (the host runs one command at a time: bubblewrap's namespace, a
  container's) every System V object and POSIX message queue of the supervisor's IPC
  namespace is removed once no command runs (`clear_ipc`), before the next request is read;
  if one stays, the supervisor exits and a fresh one (a fresh namespace, locally) serves on.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import resource
import select
import selectors
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from typing import IO

HEAD = struct.Struct(">II")
DRAIN = 1.0  # after a kill, how long to read what is left in the pipes
CONFIG = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}


try:
    import ctypes
except ImportError:  # an image's python3 without it: no guard, and the host says so
    ctypes = None  # type: ignore[assignment]


def _libc():
    try:
        return None if ctypes is None else ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


LIBC = _libc()  # loaded once: a child between fork and exec must not load libraries


def prctl(option, arg):
    """``prctl(option, arg)``, or -1 where ctypes is missing."""
    return -1 if LIBC is None else LIBC.prctl(option, arg, 0, 0, 0)


def last_cap():
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63


LAST_CAP = last_cap()
# what a command of our uid could send us; ignored in shield mode, reset in each child
SHIELDED = [s for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                        signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE,
                        signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGVTALRM,
                        signal.SIGPROF, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGIO)]
SIGDEF = SHIELDED  # what a spawned command starts with at its default (Python ignores some)


def write_frame(header, payload=b""):
    data = json.dumps(header).encode()
    view = memoryview(HEAD.pack(len(data), len(payload)) + data + payload)
    while view:
        view = view[os.write(1, view):]


def read_count(path):
    """The ``oom_kill`` count in a memory control file, or 0."""
    try:
        with open(path) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def read_small(path):
    """A small kernel file's bytes (a control group's process list), in few system calls."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = b""
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return data
            data += chunk
    finally:
        os.close(fd)


def oom_total(paths):
    return sum(read_count(p) for p in paths)


def ours_left():
    """Live processes of our uid but us (zombies wait for pid 1 to reap them)."""
    me, uid, found = os.getpid(), str(os.getuid()), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except (OSError, ValueError):
            continue
        uids = fields.get("Uid", "").split()
        if fields.get("State", "").strip().startswith("Z") or uid not in uids[:1] + uids[2:3]:
            continue  # kill() reaches a process whose real or saved uid is ours
        found.append(int(name))
    return found


def sweep(wait):
    """``kill(-1)`` until nothing of our uid is left; return whether something still is.

    kill(-1) succeeds as long as any other process exists (it counts refusals too), so the
    process table says when we are done.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # every process of our uid but us and pid 1
        except OSError:
            pass
        if not ours_left():
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.001)


def start_failure(msg, exc):
    """A command that could not start, reported as a shell would (127: not found)."""
    code = 126 if isinstance(exc, PermissionError) else 127
    text = f"{msg['argv'][0]}: {exc.strerror or exc}\n".encode(errors="replace")[:msg["limit"]]
    write_frame({"id": msg["id"], "exit": code, "timed_out": False, "duration": 0.0,
                 "out": 0, "err": len(text), "out_dropped": 0, "err_dropped": 0, "oom": 0,
                 "left": 0, "error": None}, text)


class Child:
    """Popen's ``poll`` and ``wait`` for a child whose ``pid`` is known (`Spawned`,
    `Launched`)."""

    pid = 0
    returncode = None
    stdin: IO[bytes] | None = None
    stdout: IO[bytes]
    stderr: IO[bytes]

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self):
        if self.returncode is None:
            _pid, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def empty_bounding_set():
    """Drop every capability from the bounding set; whether it is empty now.

    The supervisor does it once at start (it never execs, and its own capabilities stay), so
    that the children it forks inherit an empty set and need not drop it each time.
    """
    for cap in range(LAST_CAP + 1):
        if prctl(23, cap) == 1 and prctl(24, cap) != 0:  # PR_CAPBSET_READ, PR_CAPBSET_DROP
            return False
    return True


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


def child_setup(cwd, procs):
    """What a child does before it runs a command: as root, then as the user.

    Returns ``(enter, drop)``: ``enter`` resets the signals, enters ``cwd`` as root (like
    bubblewrap's --chdir and a cold start), joins the control group, empties the bounding
    set and hardens the child (`harden`: IPC namespace, seccomp filter); ``drop`` drops to
    the user (every capability goes) and enters ``cwd`` if root could not. The rlimits go
    between the two.
    """
    user, capbset = CONFIG.get("user"), CONFIG.get("capbset")
    shielded = SHIELDED if CONFIG.get("shield") else []
    moved = [True]

    def enter():
        for sig in shielded:  # an ignored signal would stay ignored across exec
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.chdir(cwd)
        except PermissionError:
            moved[0] = False  # a private /tmp on the way that only the user may pass
        for name in procs:
            fd = os.open(name, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        if capbset and not empty_bounding_set():
            raise OSError("could not empty the capability bounding set")
        harden()  # its own IPC namespace, the seccomp filter: as root, ahead of the call

    def drop():
        if user is not None:
            # root's pipes are 0600: the user could not reopen them (/dev/stdout); opened
            # to all (no chown: that capability is gone), as only the command and this
            # undumpable supervisor hold them
            for fd in (0, 1, 2):
                with contextlib.suppress(OSError):
                    if stat.S_ISFIFO(os.fstat(fd).st_mode):  # never /dev/null
                        os.fchmod(fd, 0o666)
            os.setgroups([])
            os.setresgid(user[1], user[1], user[1])
            os.setresuid(user[0], user[0], user[0])  # from root: every capability goes
        if not moved[0]:
            os.chdir(cwd)

    return enter, drop


def preexec(cwd, procs, limits):
    """The whole set-up of a child forked for one command (subprocess's preexec_fn)."""
    enter, drop = child_setup(cwd, procs)

    def run():  # in the child between fork and exec
        enter()
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        drop()

    return run


def which(name, path):
    """``name`` searched for in ``path`` (the command's PATH, as subprocess does)."""
    if "/" in name:
        return name
    denied = None
    for folder in path.split(os.pathsep):
        full = os.path.join(folder or ".", name)
        if os.path.isfile(full):
            if os.access(full, os.X_OK):
                return full
            denied = full
    if denied is not None:
        raise PermissionError(13, "Permission denied", denied)
    raise FileNotFoundError(2, "No such file or directory", name)


class Spawned(Child):
    """A command started with ``posix_spawn`` in its own session, Popen's few methods."""

    def __init__(self, argv, env, cwd, with_stdin):
        path = which(argv[0], env.get("PATH", os.defpath))
        if with_stdin:
            child_in, parent_in = os.pipe()
        else:
            child_in, parent_in = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            try:
                os.chdir(cwd)
            except OSError as exc:
                raise ValueError(f"cannot enter {cwd!r}: {exc.strerror}") from None
            self.pid = os.posix_spawn(
                path, argv, env, setsid=True, setsigdef=SIGDEF,
                file_actions=[(os.POSIX_SPAWN_DUP2, child_in, 0),
                              (os.POSIX_SPAWN_DUP2, out_w, 1),
                              (os.POSIX_SPAWN_DUP2, err_w, 2)],
            )
        except BaseException:
            for fd in (parent_in, out_r, err_r):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            os.chdir("/")
            for fd in (child_in, out_w, err_w):
                os.close(fd)
        self.stdin = None if parent_in is None else os.fdopen(parent_in, "wb", buffering=0)
        self.stdout = os.fdopen(out_r, "rb", buffering=0)
        self.stderr = os.fdopen(err_r, "rb", buffering=0)
        self.returncode = None


READY = b"R"  # the child wrote this once set up: it waits for its command
FAILED = b"E"  # then a JSON {"errno", "text"}: the command could not start


def read_all(fd):
    """Everything from ``fd`` until its end."""
    parts: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


def child(sock, stdin, stdout, stderr, enter, drop, shielded):  # pragma: no cover
    """In the forked child: set up, wait for the command, ``exec`` it; never returns."""
    code = 1
    try:
        gc.disable()  # no finaliser may close a descriptor number we reuse
        for sig in shielded:  # a handled or ignored signal would not be the default after exec
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        if sock != 3:
            os.dup2(sock, 3, inheritable=False)
        os.closerange(4, 1 << 20)  # the supervisor's pipes, other commands' pipes
        enter()  # as root: enter cwd, join the control group, empty the bounding set
        os.write(3, READY)
        msg = json.loads(read_all(3))  # the supervisor ends its side once it is sent
        code = 127
        if not msg["stdin"]:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        for which, value in msg["rlimits"]:
            resource.setrlimit(which, (value, value))
        drop()  # to the user, only now: till here no process of the user could reach us
        execute(msg["argv"], msg["env"])
    except BaseException as exc:  # reported, then the child ends
        if code == 127:
            err = exc.errno if isinstance(exc, OSError) and exc.errno else 0
            with contextlib.suppress(OSError):
                os.write(3, FAILED + json.dumps({"errno": err, "text": str(exc)}).encode())
    finally:
        os._exit(code)


def execute(argv, env):  # pragma: no cover - in the child
    """``execve`` ``argv[0]`` searched for in the command's ``PATH``, as subprocess does."""
    name = argv[0]
    if "/" in name:
        os.execve(name, argv, env)
    folders = os.get_exec_path(env)
    # A failed execve costs far more than access() in a forked Python (a PATH of the host's
    # may list several folders before the right one): exec the first entry the user may run
    # at once; if that fails, the full search below decides, as before.
    for folder in folders:
        full = os.path.join(folder, name)
        if os.access(full, os.X_OK):
            with contextlib.suppress(OSError):
                os.execve(full, argv, env)
            break
    first = last = None
    for folder in folders:
        try:
            os.execve(os.path.join(folder, name), argv, env)
        except (FileNotFoundError, NotADirectoryError) as exc:
            last = exc
        except OSError as exc:
            first = first or exc
    raise first or last or FileNotFoundError(2, "No such file or directory", name)


class Launched(Child):
    """A command running in what was a `Spare`: Popen's few methods."""

    def __init__(self, spare, stdin):
        self.pid, self.sock = spare.pid, spare.sock
        self.stdin = stdin
        self.stdout = os.fdopen(spare.out_r, "rb", buffering=0)
        self.stderr = os.fdopen(spare.err_r, "rb", buffering=0)
        self.returncode = None

    def failure(self, argv0):
        """Why the command did not start (an OSError), or ``None`` if it did; after `wait`."""
        data = b""
        with contextlib.suppress(OSError):
            self.sock.setblocking(False)
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
        self.sock.close()
        if not data.startswith(FAILED):
            return None
        try:
            info = json.loads(data[len(FAILED):])
        except ValueError:
            return OSError("the command's process failed before exec")
        if info.get("errno"):
            return OSError(info["errno"], os.strerror(info["errno"]), argv0)
        return OSError(info.get("text") or "the command's process failed before exec")


class Spare:
    """One pre-forked child waiting for its command, in control group ``procs`` and ``cwd``."""

    def __init__(self, procs, cwd, enter, drop, shielded):
        self.procs, self.cwd = list(procs), cwd
        self.replaced = 0
        self.reaped = False
        ours, theirs = socket.socketpair()
        pipes = [os.pipe() for _ in range(3)]
        self.pid = os.fork()
        if self.pid == 0:
            child(theirs.fileno(), pipes[0][0], pipes[1][1], pipes[2][1], enter, drop, shielded)
        theirs.close()
        for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
            os.close(fd)
        self.sock = ours
        self.in_w, self.out_r, self.err_r = pipes[0][1], pipes[1][0], pipes[2][0]
        self.open = True
        self.pidfd: int | None = None
        with contextlib.suppress(OSError, AttributeError):
            self.pidfd = os.pidfd_open(self.pid)

    def fits(self, procs, cwd):
        """Whether a command in control group ``procs`` and ``cwd`` may run here."""
        return self.open and self.procs == list(procs) and self.cwd == cwd

    def launch(self, argv, env, data, rlimits, wait=1.0):
        """Hand the command over and return it as `Launched`; ``None`` if this child is not
        usable (died or stuck while idle): it is then discarded."""
        try:
            ready, _, _ = select.select([self.sock], [], [], wait)
            if not ready or self.sock.recv(1) != READY or self.exited():
                raise OSError("the pre-forked child is not ready")
            self.sock.settimeout(wait)
            payload = {"argv": argv, "env": env, "stdin": bool(data), "rlimits": rlimits}
            self.sock.sendall(json.dumps(payload).encode(), socket.MSG_NOSIGNAL)
            self.sock.shutdown(socket.SHUT_WR)  # the child starts at the end of this stream
        except OSError:
            self.discard()
            return None
        self.open = False
        if self.pidfd is not None:
            os.close(self.pidfd)
        if data:
            stdin = os.fdopen(self.in_w, "wb", buffering=0)
        else:
            os.close(self.in_w)
            stdin = None
        return Launched(self, stdin)

    def exited(self):
        """Whether the child ended (it is reaped then)."""
        return self.reap() is not None

    def reap(self):
        """The child's wait status once it ended (reaped then, once), else ``None``."""
        if self.reaped:
            return 0
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, 0
        if not pid:
            return None
        self.reaped = True
        return status

    def discard(self):
        """Kill and reap the child and close our ends; idempotent."""
        if not self.open:
            return
        self.open = False
        if not self.reaped:  # a reaped pid may be another process's by now
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.reaped = True
        for fd in (self.in_w, self.out_r, self.err_r, self.pidfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.sock.close()


class Prefork:
    """The supervisor's one pre-forked child, made for the command the host named as next.

    Forked at once when it waits as root (``root``: the commands' user can neither signal
    nor trace it, so it may exist while a command runs), else only while nothing runs.
    """

    def __init__(self, sel):
        self.sel, self.root = sel, CONFIG.get("user") is not None
        self.spare, self.next, self.replaced = None, None, 0

    def take(self, msg):
        """The spare if the command fits it (its control group and cwd), else ``None``."""
        spare, self.spare = self.spare, None
        self.next, self.replaced = msg.get("next"), 0  # where the host puts the one after
        if spare is None:
            return None
        self._forget(spare)
        if spare.fits(msg.get("procs") or [], msg["cwd"]):
            return spare
        spare.discard()  # its limits or its cwd changed: a fresh child the usual way
        return None

    def refill(self, busy):
        """Fork the next command's child if the host named its control group."""
        if self.spare is not None or not self.next or (busy and not self.root):
            return
        nxt, self.next = self.next, None
        try:
            enter, drop = child_setup(nxt["cwd"], nxt["procs"])
            spare = Spare(nxt["procs"], nxt["cwd"], enter, drop, SHIELDED)
        except OSError:
            return  # no fork now: the command forks the usual way
        self.spare = spare
        if spare.pidfd is not None:
            self.sel.register(spare.pidfd, selectors.EVENT_READ, (self, "spare"))

    def on_event(self, _what):
        """The spare ended while idle: replaced if a signal ended it (a few times)."""
        spare = self.spare
        status = None if spare is None else spare.reap()
        if spare is None or status is None:
            return
        self.spare = None
        self._forget(spare)
        spare.discard()
        if os.WIFSIGNALED(status) and self.replaced < 3:  # a failed set-up exits, no signal
            self.replaced += 1
            self.next = {"procs": spare.procs, "cwd": spare.cwd}

    def _forget(self, spare):
        if spare.pidfd is not None:
            self.sel.unregister(spare.pidfd)

    def close(self):
        spare, self.spare = self.spare, None
        if spare is not None:
            spare.discard()


class Command:
    """One running command: its process, capped output, deadline and clean-up."""

    def __init__(self, sel, msg, data, spare=None):
        self.id, self.sel = msg["id"], sel
        self.argv0 = msg["argv"][0]
        self.limit = msg["limit"]
        self.procs = msg.get("procs") or []
        self.oom_files = msg.get("oom") or CONFIG.get("oom") or []
        self.oom_before = oom_total(self.oom_files)
        self.kept = [bytearray(), bytearray()]
        self.dropped = [0, 0]
        self.start = time.monotonic()
        self.deadline = self.start + msg["timeout"]
        self.drain_until = None
        self.left = 0
        self.emptied = False
        self.exited = self.timed_out = False
        self.pending = memoryview(data)
        self.pidfd = None
        env = {**os.environ, **msg["env"]} if CONFIG.get("inherit_env") else msg["env"]
        launched = None if spare is None else spare.launch(
            msg["argv"], env, data, msg.get("rlimits") or [])
        self.preforked = launched is not None
        self.proc: subprocess.Popen[bytes] | Child
        if launched is not None:  # the pre-forked child: set up already, it only execs
            self.proc = launched
        elif self.procs or msg.get("rlimits") or CONFIG.get("user") is not None \
                or CONFIG.get("capbset") or CONFIG.get("seccomp") or CONFIG.get("own_ipc"):
            self.proc = subprocess.Popen(
                msg["argv"], stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                start_new_session=True, preexec_fn=preexec(
                    msg["cwd"], self.procs, [tuple(x) for x in msg.get("rlimits", [])]),
            )
        else:  # nothing to do between fork and exec: spawn, far cheaper than forking Python
            self.proc = Spawned(msg["argv"], env, msg["cwd"], bool(data))
        sel.register(self.proc.stdout, selectors.EVENT_READ, (self, 0))
        sel.register(self.proc.stderr, selectors.EVENT_READ, (self, 1))
        if self.proc.stdin is not None:
            os.set_blocking(self.proc.stdin.fileno(), False)
            sel.register(self.proc.stdin, selectors.EVENT_WRITE, (self, "in"))
        try:
            self.pidfd = os.pidfd_open(self.proc.pid)
            sel.register(self.pidfd, selectors.EVENT_READ, (self, "exit"))
        except (OSError, AttributeError):
            self.pidfd = None

    def watched(self):
        return any(k.data[0] is self and k.data[1] in (0, 1)
                   for k in self.sel.get_map().values())

    def on_event(self, what):
        if what == "exit":
            self.exited = True
            self.sel.unregister(self.pidfd)
        elif what == "in":
            stdin = self.proc.stdin
            assert stdin is not None
            try:
                written = os.write(stdin.fileno(), self.pending[:65536])
            except BlockingIOError:
                written = 0
            except OSError:
                written = len(self.pending)  # the command stopped reading: drop the rest
            self.pending = self.pending[written:]
            if not self.pending:
                self.sel.unregister(stdin)
                stdin.close()
        else:
            stream = self.proc.stdout if what == 0 else self.proc.stderr
            assert stream is not None
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                self.sel.unregister(stream)
                return
            room = self.limit - len(self.kept[what])
            if room > 0:
                self.kept[what] += chunk[:room]
            self.dropped[what] += max(0, len(chunk) - max(room, 0))

    def kill(self, wait):
        """Kill the process group, the control group and, in sweep mode, all we may."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if CONFIG.get("sweep"):
            try:
                os.kill(-1, signal.SIGKILL)  # once: our own child may be a zombie still
            except OSError:
                pass
        deadline = time.monotonic() + wait
        self.left = 0
        while self.procs:
            pids: set[int] = set()
            for name in self.procs:
                try:
                    pids.update(int(x) for x in read_small(name).split())
                except (OSError, ValueError):
                    pids.add(-1)  # unreadable: not known to be empty
            # nothing alive in the group: nothing can enter it again (only we and the host
            # move processes in), so later kills of this command may be skipped
            self.emptied = self.emptied or not pids
            pids.discard(0)  # outside our pid namespace: the host kills those
            pids.discard(-1)
            self.left = len(pids)
            if not pids or time.monotonic() > deadline:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.002)

    def step(self, now):
        """Move on at exit or deadline; return whether the command is finished."""
        if self.pidfd is None and not self.exited and self.proc.poll() is not None:
            self.exited = True
        open_pipes = self.watched()
        if self.drain_until is None and (self.exited or now >= self.deadline):
            self.timed_out = not self.exited
            self.kill(1.0)
            self.drain_until = time.monotonic() + DRAIN
        if not open_pipes and self.drain_until is None:
            return False  # pipes closed, process alive: wait for its exit or the deadline
        return not open_pipes or (self.drain_until is not None and now >= self.drain_until)

    def wake_at(self):
        return self.drain_until if self.drain_until is not None else self.deadline

    def finish(self):
        for key in list(self.sel.get_map().values()):
            if key.data[0] is self:
                self.sel.unregister(key.fileobj)
        if not self.emptied:
            self.kill(1.0)
        code = self.proc.wait()
        if not self.emptied:
            self.kill(1.0)  # its zombie is reaped: the group can empty now
        if CONFIG.get("sweep") and sweep(1.0):
            self.left = max(self.left, 1)  # the host sweeps from outside
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self.pidfd is not None:
            os.close(self.pidfd)
        failed = self.proc.failure(self.argv0) if self.preforked else None  # type: ignore
        if failed is not None:  # as subprocess raises it: the command never ran
            write_frame({"id": self.id, "error": f"could not start {self.argv0!r}: {failed}"})
            return
        out, err = bytes(self.kept[0]), bytes(self.kept[1])
        write_frame({
            "id": self.id, "exit": code, "timed_out": self.timed_out,
            "duration": time.monotonic() - self.start, "out": len(out), "err": len(err),
            "out_dropped": self.dropped[0], "err_dropped": self.dropped[1],
            "oom": oom_total(self.oom_files) - self.oom_before, "left": self.left,
            "error": None, "prefork": self.preforked, "empty": self.emptied,
        }, out + err)


class NoPrefork:
    """Where nothing is forked ahead (``prefork`` off): every command forks when it comes."""

    def take(self, _msg):
        return None

    def refill(self, _busy):
        pass

    def close(self):
        pass


def main():
    guarded = prctl(4, 0) == 0  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/fd, same uid
    if CONFIG.get("sweep") and (os.getuid() == 0 or not os.path.exists("/.dockerenv")):
        guarded = False  # kill(-1) belongs in a container, as an unprivileged user
        CONFIG["sweep"] = False
    # a command that closes its stdin must not end us: a write there fails with EPIPE instead
    # (every child starts with SIGPIPE at its default again)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if CONFIG.get("capbset") and empty_bounding_set():
        CONFIG["capbset"] = False  # inherited empty by every child
    if CONFIG.get("shield"):
        for sig in SHIELDED:
            signal.signal(sig, signal.SIG_IGN)
    if CONFIG.get("clear_ipc") and not clear_ipc():
        return  # what an earlier supervisor's command left stays: refuse to serve beside it
    sel = selectors.DefaultSelector()
    os.set_blocking(0, False)
    sel.register(0, selectors.EVENT_READ, (None, "host"))
    commands: dict[int, Command] = {}
    prefork = Prefork(sel) if CONFIG.get("prefork") else NoPrefork()
    write_frame({"ready": os.getpid(), "guarded": guarded})
    if not guarded and CONFIG.get("require_guard"):
        return
    try:
        serve(sel, commands, prefork)
    except BrokenPipeError:
        pass  # the host stopped reading: it is gone
    finally:  # nothing of ours may outlive the host
        prefork.close()
        for cmd in commands.values():
            cmd.kill(0.5)


def serve(sel, commands, prefork):
    """Run the host's commands until its stream ends (or a command leaves IPC objects that
    cannot be removed: a fresh supervisor then serves the next call)."""
    buf = bytearray()
    while True:
        now = time.monotonic()
        wait = min((c.wake_at() for c in commands.values()), default=now + 3600) - now
        for key, _mask in sel.select(max(wait, 0)):
            owner, what = key.data
            if owner is not None:
                owner.on_event(what)
                continue
            try:
                chunk = os.read(0, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:  # the host is gone
                return
            buf += chunk
            while len(buf) >= HEAD.size:
                hlen, plen = HEAD.unpack_from(buf)
                if len(buf) < HEAD.size + hlen + plen:
                    break
                msg = json.loads(bytes(buf[HEAD.size:HEAD.size + hlen]))
                data = bytes(buf[HEAD.size + hlen:HEAD.size + hlen + plen])
                del buf[:HEAD.size + hlen + plen]
                if msg.get("op") == "kill":
                    found = commands.get(msg["id"])
                    if found is not None and found.drain_until is None:
                        found.kill(0.2)
                    continue
                try:
                    commands[msg["id"]] = Command(sel, msg, data, prefork.take(msg))
                    prefork.refill(True)  # as root, it prepares while this command runs
                except OSError as exc:
                    if not CONFIG.get("shell_codes"):
                        write_frame({"id": msg["id"], "error": f"could not start "
                                     f"{msg['argv'][0]!r}: {exc}"})
                    else:
                        start_failure(msg, exc)
                except (subprocess.SubprocessError, ValueError) as exc:
                    write_frame({"id": msg["id"], "error": f"could not start "
                                 f"{msg['argv'][0]!r}: {exc}"})
        now = time.monotonic()
        finished = [k for k, c in commands.items() if c.step(now)]
        for done in finished:
            commands.pop(done).finish()
        # after the reply, before the next request is read: the next command sees none of it
        if finished and not commands and CONFIG.get("clear_ipc") and not clear_ipc():
            return
        prefork.refill(bool(commands))

if __name__ == "__main__":
    main()
