"""Host folders shown read-only to a command: reached and read without following symlinks.

A mount's host folder may sit in the workspace, which sandboxed code can change: a folder
swapped for a link to ``/root`` between the caller's check and the mount must not show
``/root`` to the command. So the folder is reached from ``/`` one component at a time, each
opened with ``O_NOFOLLOW`` (a real path has no link on its way: a link found there was swapped
in), and what a sandbox mounts or copies is that descriptor, never the path again.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tarfile
from collections.abc import Mapping

from jianmu.errors import SandboxError

__all__ = ("MAX_COPY_BYTES", "open_mount_source", "open_real_dir", "tar_folders")

MAX_COPY_BYTES = 32 * 1024 * 1024
"""The largest folder (file bytes) a sandbox copies in for a read-only mount."""
_MAX_ENTRIES = 10_000
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_real_dir(path: str) -> int:
    """A descriptor of the folder ``path``, reached from ``/`` without following a symlink.

    Raises:
        SandboxError: a component is a symbolic link, missing, or not a folder.
    """
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    name = "/"
    try:
        for name in (part for part in path.split("/") if part and part != "."):
            child = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError as exc:
        os.close(fd)
        raise SandboxError(
            f"cannot mount {path!r}: {name!r} on the way is {_why(exc)}; give the real path "
            "of an existing folder (a symbolic link on the way is refused)"
        ) from None
    return fd


def open_mount_source(source: str | int) -> int:
    """A new descriptor of a mount's host folder: a duplicate of a given descriptor (a folder
    pinned earlier), or the path reached with `open_real_dir`.

    Raises:
        SandboxError: see `open_real_dir`.
    """
    return os.dup(source) if isinstance(source, int) else open_real_dir(source)


def _why(exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW | O_DIRECTORY on a link
        return "a symbolic link or not a folder"
    return exc.strerror or str(exc)


def tar_folders(folders: Mapping[str, str | int], *, limit: int = MAX_COPY_BYTES) -> bytes:
    """An uncompressed tar holding each host folder of ``folders`` under its name: their
    sub-folders and regular files, read-only.

    Each folder is reached with `open_mount_source` (by path, or by a pinned descriptor).
    Symbolic links, devices, sockets and pipes are left out, so unpacking the archive can
    never write through a link. Folders and executable files get mode 0555, other files 0444.

    Raises:
        SandboxError: a folder cannot be reached without a symlink, or together they hold more
            than ``limit`` bytes or too many entries.
    """
    buf = io.BytesIO()
    budget = _Budget(limit)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, host in folders.items():
            fd = open_mount_source(host)
            try:
                tar.addfile(_info(name, tarfile.DIRTYPE, 0o555, os.fstat(fd)))
                _add_folder(tar, fd, f"{name}/", budget)
            finally:
                os.close(fd)
    return buf.getvalue()


class _Budget:
    """What is left to copy: bytes and entries."""

    def __init__(self, limit: int) -> None:
        self.limit, self.bytes, self.entries = limit, limit, _MAX_ENTRIES

    def entry(self) -> None:
        self.entries -= 1
        if self.entries < 0:
            raise SandboxError(f"the folder has more than {_MAX_ENTRIES:,} entries to copy")

    def take(self, size: int) -> None:
        self.bytes -= size
        if self.bytes < 0:
            raise SandboxError(f"the folder holds more than {self.limit:,} bytes to copy")


def _add_folder(tar: tarfile.TarFile, dir_fd: int, prefix: str, budget: _Budget) -> None:
    for name in sorted(os.listdir(dir_fd)):
        budget.entry()
        member = f"{prefix}{name}"
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                child = os.open(name, _DIR, dir_fd=dir_fd)
                try:
                    tar.addfile(_info(member, tarfile.DIRTYPE, 0o555, os.fstat(child)))
                    _add_folder(tar, child, member + "/", budget)
                finally:
                    os.close(child)
            elif stat.S_ISREG(st.st_mode):
                _add_file(tar, dir_fd, name, member, budget)
        except OSError:
            continue  # swapped for a link or removed meanwhile: left out, never followed


def _add_file(tar: tarfile.TarFile, dir_fd: int, name: str, member: str, budget: _Budget) -> None:
    fd = os.open(name, _FILE, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        budget.take(st.st_size)
        data = fh.read(st.st_size)
    mode = 0o555 if st.st_mode & 0o111 else 0o444
    info = _info(member, tarfile.REGTYPE, mode, st)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _info(name: str, kind: bytes, mode: int, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = kind, mode, int(st.st_mtime)
    return info
