"""What a local command's process gets beyond its limits: its own IPC namespace, no keyring.

The keyring is not namespaced for a root-run sandbox (no user namespace): every process of
the commands' uid shares one user keyring, across sandboxes and runs. So ``add_key``,
``request_key`` and ``keyctl`` fail with ``EPERM`` in every command, as Docker's default
profile has them, on each system-call ABI the machine runs (x86-64, x32 and i386 on x86-64;
arm64 and arm on arm64; riscv64). The filter is a classic BPF program: bubblewrap loads it
(``--seccomp FD``), the warm supervisor gets it in its config (and loads it the same way,
standard library only), and a cold child without bubblewrap loads it itself
(`SeccompFilter`), always after ``no_new_privs``.

System V objects and POSIX message queues live in an IPC namespace: a cold child without
bubblewrap, as root, takes one of its own (`unshare_ipc`), so nothing it leaves there reaches
another command (bubblewrap gives each cold command one already).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from functools import cache

__all__ = ("SeccompFilter", "keyring_filter", "seccomp_fd", "unshare_ipc")

_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS: load a 32-bit word of struct seccomp_data
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO: what Docker's profile answers
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data
_X32 = 0x40000000  # the x32 ABI's bit in the system-call number
# (audit arch, [add_key, request_key, keyctl] under that ABI), per machine
_ABIS: dict[str, list[tuple[int, list[int]]]] = {
    "x86_64": [(0xC000003E, [248, 249, 250, _X32 | 248, _X32 | 249, _X32 | 250]),
               (0x40000003, [286, 287, 288])],
    "aarch64": [(0xC00000B7, [217, 218, 219]), (0x40000028, [309, 310, 311])],
    "riscv64": [(0xC00000F3, [217, 218, 219])],
}
_LIBC = ctypes.CDLL(None, use_errno=True)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)  # struct sock_filter, native order


@cache
def keyring_filter(machine: str | None = None) -> bytes | None:
    """The filter for this machine (``uname -m``), or ``None`` where its numbers are unknown."""
    abis = _ABIS.get(machine or platform.machine())
    if abis is None:
        return None
    size = sum(4 + len(nrs) for _arch, nrs in abis) + 2  # per ABI: ld, jeq, ld, jeqs, ret
    deny = size - 1
    ops: list[bytes] = []
    for arch, nrs in abis:
        ops.append(_op(_LD_ABS_W, _ARCH))
        ops.append(_op(_JEQ_K, arch, 0, len(nrs) + 2))  # another ABI: on to the next block
        ops.append(_op(_LD_ABS_W, _NR))
        for nr in nrs:
            ops.append(_op(_JEQ_K, nr, deny - len(ops) - 1, 0))
        ops.append(_op(_RET_K, _ALLOW))
    ops += [_op(_RET_K, _ALLOW), _op(_RET_K, _DENY)]
    assert len(ops) == size
    return b"".join(ops)


def seccomp_fd(program: bytes) -> int:
    """A descriptor holding ``program`` from its start, for bubblewrap's ``--seccomp``."""
    fd = os.memfd_create("jianmu-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class SeccompFilter:
    """A filter made ready before ``fork``, installed in the child by `install` (system calls
    only: nothing to allocate or load between fork and exec)."""

    def __init__(self, program: bytes) -> None:
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._prog = _Fprog(len(program) // 8, ctypes.addressof(self._buffer))
        self._ref = ctypes.byref(self._prog)

    def install(self) -> None:
        """Set ``no_new_privs`` and load the filter in this process.

        Raises:
            OSError: the kernel refused (the command must not start without it).
        """
        if _LIBC.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "could not set no_new_privs")
        if _LIBC.prctl(22, 2, self._ref, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
            raise OSError(ctypes.get_errno(), "could not load the seccomp filter")


def unshare_ipc() -> None:
    """Move this process into a new IPC namespace (needs CAP_SYS_ADMIN; between fork and exec).

    Raises:
        OSError: the kernel refused.
    """
    if _LIBC.unshare(0x08000000) != 0:  # CLONE_NEWIPC
        raise OSError(ctypes.get_errno(), "could not make the command an IPC namespace")
