"""Grant the sandbox's unprivileged user the workspace through POSIX ACLs (no chmod 0777).

When Jianmu runs as root, sandboxed code runs as an unprivileged uid (see `sandbox_user`), so
that it cannot read what only root may read. That uid gets ``rwX`` on the workspace tree
through a named-user ACL entry, and every folder gets the same entry as its default ACL, so
files and folders made later inherit it. Ownership and the mode bits for everyone else stay as
they were. ACLs are set through the ``system.posix_acl_*`` extended attributes (the kernel's
binary format), so no ``setfacl`` binary is needed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
from pathlib import Path

from jianmu.errors import SandboxUnavailableError

__all__ = ("grant_tree", "sandbox_user")

_ACCESS = "system.posix_acl_access"
_DEFAULT = "system.posix_acl_default"
_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_NO_ID = 0xFFFFFFFF
_NOBODY = 65534
_Entry = tuple[int, int, int]  # (tag, perm, id)


def sandbox_user(workspace: Path) -> tuple[int, int] | None:
    """The ``(uid, gid)`` sandboxed code runs as, or ``None`` to keep ours (not root).

    As root: the workspace's owner when that is not root (files stay theirs), else nobody.
    """
    if os.geteuid() != 0:
        return None
    try:
        st = workspace.stat()
    except OSError:
        return _NOBODY, _NOBODY
    if st.st_uid != 0:
        return st.st_uid, st.st_gid
    return _NOBODY, _NOBODY


def _parse(blob: bytes) -> list[_Entry]:
    (version,) = struct.unpack_from("<I", blob)
    if version != _VERSION:
        raise OSError(errno.EINVAL, f"unknown ACL version {version}")
    return [struct.unpack_from("<HHI", blob, off) for off in range(4, len(blob), 8)]


def _pack(entries: list[_Entry]) -> bytes:
    ordered = sorted(entries, key=lambda e: (e[0], e[2]))
    return struct.pack("<I", _VERSION) + b"".join(struct.pack("<HHI", *e) for e in ordered)


def _from_mode(mode: int) -> list[_Entry]:
    return [(_USER_OBJ, (mode >> 6) & 7, _NO_ID), (_GROUP_OBJ, (mode >> 3) & 7, _NO_ID),
            (_OTHER, mode & 7, _NO_ID)]


def _with_user(entries: list[_Entry], uid: int, perm: int) -> list[_Entry]:
    """``entries`` with a named-user entry for ``uid`` and a mask that lets it through."""
    kept = [e for e in entries if e[0] != _MASK and not (e[0] == _USER and e[2] == uid)]
    kept.append((_USER, perm, uid))
    mask = 0
    for tag, p, _ in kept:
        if tag in (_GROUP_OBJ, _USER, _GROUP):
            mask |= p
    return [*kept, (_MASK, mask, _NO_ID)]


def _read(path: str, name: str, fallback: list[_Entry]) -> list[_Entry]:
    try:
        return _parse(os.getxattr(path, name, follow_symlinks=False))
    except OSError as exc:
        if exc.errno in (errno.ENODATA, getattr(errno, "ENOATTR", errno.ENODATA)):
            return fallback
        raise


def _grant_one(path: str, st: os.stat_result, uid: int) -> None:
    is_dir = stat.S_ISDIR(st.st_mode)
    perm = 7 if is_dir or st.st_mode & 0o111 else 6
    access = _read(path, _ACCESS, _from_mode(st.st_mode))
    os.setxattr(path, _ACCESS, _pack(_with_user(access, uid, perm)), follow_symlinks=False)
    if is_dir:
        default = _read(path, _DEFAULT, _from_mode(st.st_mode))
        os.setxattr(path, _DEFAULT, _pack(_with_user(default, uid, 7)), follow_symlinks=False)


def grant_tree(root: Path, uid: int) -> None:
    """Give ``uid`` read-write access to ``root`` and everything under it (links untouched).

    Raises:
        SandboxUnavailableError: the file system refuses ACLs on ``root``.
    """
    try:
        _grant_one(str(root), root.stat(), uid)
    except OSError as exc:
        raise SandboxUnavailableError(
            f"cannot grant the sandbox user (uid {uid}) the workspace {str(root)!r} with an "
            f"ACL ({exc}); use a file system with ACLs, chown the folder to a non-root user "
            "(the sandbox then runs as that user), or run Jianmu as a non-root user"
        ) from exc
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):  # vanished, or a special file: skip it
                st = os.lstat(path)
                if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                    _grant_one(path, st, uid)
