"""A `LocalSandbox`'s private temporary folder (its commands' ``/tmp`` and ``HOME``), bounded.

The folder is made on the host (``jianmu-sandbox-<pid>-<random>`` in the host's temporary
folder) and bound into every command, so that what a command leaves there is there for the next
one, warm or cold. On the host's disk it would have no bound: ``fallocate -l 1G`` in a loop
fills the disk the engine saves its runs on within a second, and each file's ``RLIMIT_FSIZE``
does not limit how many there are. So where we may mount (root), the folder is a tmpfs of
``size_mb`` (and an inode per 8 KiB, ext4's usual ratio: an empty file's inode is kernel
memory no limit may count), as Docker's ``/tmp`` is: a full one answers ``ENOSPC``
to the command alone, and its pages count against the sandbox's memory control group, like any
tmpfs. Elsewhere it stays a plain folder, and `Scratch.bounded` says so.

A crash skips the clean-up: `sweep_stale_scratch` unmounts and removes the folders whose owning
process is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from jianmu.execution._process import pid_alive

__all__ = (
    "INODES_PER_MB",
    "PREFIX",
    "Scratch",
    "make_scratch",
    "remove_scratch",
    "sweep_stale_scratch",
)

PREFIX = "jianmu-sandbox-"
INODES_PER_MB = 128
"""Files (and folders) the tmpfs holds per MiB of its size."""
_NAME = re.compile(rf"^{PREFIX}(\d+)-")
_MS_NOSUID, _MS_NODEV = 0x2, 0x4
_MNT_DETACH, _UMOUNT_NOFOLLOW = 0x2, 0x8
_LIBC = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Scratch:
    """The private temporary folder and whether a tmpfs bounds it."""

    path: Path
    bounded: bool
    """Whether it is a tmpfs of a fixed size (else a folder on the host's disk)."""


def make_scratch(size_mb: int, owner: tuple[int, int] | None) -> Scratch:
    """A new private temporary folder owned by ``owner`` (``None``: us), a tmpfs of
    ``size_mb`` MiB where this process may mount one."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    bounded = os.geteuid() == 0 and _mount_tmpfs(path, size_mb, owner)
    if owner is not None:
        os.chown(path, *owner)
    return Scratch(path, bounded)


def _mount_tmpfs(path: Path, size_mb: int, owner: tuple[int, int] | None) -> bool:
    """Mount a tmpfs of ``size_mb`` MiB on ``path``; whether it could be (a container without
    ``CAP_SYS_ADMIN`` cannot)."""
    uid, gid = owner if owner is not None else (os.getuid(), os.getgid())
    inodes = size_mb * INODES_PER_MB
    options = f"size={size_mb}m,nr_inodes={inodes},mode=0700,uid={uid},gid={gid}"
    done = _LIBC.mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                       options.encode())
    return done == 0


def remove_scratch(path: Path) -> None:
    """Unmount the folder if it is a mount, and remove it with what it holds."""
    # detached: a lazy unmount never fails on a busy mount, and its memory goes once unused
    _LIBC.umount2(os.fsencode(path), _MNT_DETACH | _UMOUNT_NOFOLLOW)
    shutil.rmtree(path, ignore_errors=True)


def sweep_stale_scratch() -> None:
    """Unmount and remove the private folders of sandboxes whose process died (a crash)."""
    root = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            match = _NAME.match(entry.name)
            if match is None or int(match.group(1)) == os.getpid():
                continue
            if not pid_alive(int(match.group(1))):
                remove_scratch(root / entry.name)
