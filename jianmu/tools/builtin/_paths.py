"""Workspace confinement for the file tools: resolve a path, then reach it by descriptors.

A path is resolved once by `jianmu.execution.workspace.resolve_tool_path` (symlinks followed,
refused unless the real location is inside the root). The file is then reached from a
descriptor of the real root, one component at a time, each folder opened with
``O_DIRECTORY | O_NOFOLLOW`` relative to its parent (``openat`` semantics) and the last
component with ``O_NOFOLLOW``. A folder swapped for a symlink after the check makes the open
fail instead of leaving the workspace, whatever another process does meanwhile.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator

from jianmu.errors import PathEscapeError, ToolExecutionError
from jianmu.execution.workspace import current_workspace, is_inside, resolve_tool_path

__all__ = (
    "PathEscapeError",
    "closing_fd",
    "dir_fd_at",
    "display_path",
    "is_inside",
    "open_beneath",
    "open_dir_at",
    "open_dir_beneath",
    "real_root",
    "resolve_path",
)

_CLOEXEC = os.O_CLOEXEC
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
"""How every folder on the way is opened: a folder, never through a symlink."""


def real_root() -> str:
    """The real (symlink-free) path of the current workspace root.

    Raises:
        ToolExecutionError: the root is not an existing folder.
    """
    root = current_workspace()
    real = os.path.realpath(root)
    if not os.path.isdir(real):
        raise ToolExecutionError(f"workspace root {str(root)!r} is not an existing folder")
    return real


def display_path(real: str, root: str) -> str:
    """The path relative to the root, as shown to the model ("." for the root itself)."""
    rel = os.path.relpath(real, root)
    return "." if rel == "." else rel.replace(os.sep, "/")


def resolve_path(path: str, *, root: str | None = None) -> str:
    """Resolve ``path`` inside the workspace ``root`` (default `real_root`); its real path.

    Raises:
        ToolInputError: ``path`` is empty or not a string.
        PathEscapeError: ``path`` leads outside the workspace.
    """
    return resolve_tool_path(path, root or real_root()).real


def _parts(real: str, root: str) -> list[str]:
    """The components of ``real`` below ``root`` (empty for the root itself)."""
    if not is_inside(real, root):
        raise PathEscapeError(f"{real!r} is outside the workspace {root!r}")
    rel = os.path.relpath(real, root)
    return [] if rel == "." else rel.split(os.sep)


def dir_fd_at(parent: int, name: str, *, create: bool = False) -> int:
    """Open the folder ``name`` of the folder ``parent`` without following a symlink.

    ``create`` makes it first when it is missing.

    Raises:
        PathEscapeError: ``name`` is a symbolic link (it was swapped in, or points away).
        OSError: missing (without ``create``), not a folder, no permission.
    """
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=parent)
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        # O_NOFOLLOW on a symlink: ELOOP, or ENOTDIR with O_DIRECTORY (Linux)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, parent):
            raise PathEscapeError(
                f"the folder {name!r} on the way was swapped for a symbolic link while being "
                "opened; refused, so that nothing is redirected outside the workspace"
            ) from None
        raise


def _is_link(name: str, parent: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_dir_at(fd: int, parts: Iterable[str], *, create: bool = False) -> int:
    """A new descriptor of the folder reached from the folder ``fd`` through ``parts`` (names,
    one level each), no symlink followed; ``fd`` itself stays open.

    Raises:
        PathEscapeError: a component is a symbolic link.
        OSError: a component is missing (without ``create``) or not a folder.
    """
    fd = os.dup(fd)
    try:
        for name in parts:
            child = dir_fd_at(fd, name, create=create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir_beneath(real: str, root: str, *, create: bool = False) -> int:
    """A descriptor of the folder ``real``, reached from ``root`` component by component.

    ``create`` makes missing folders on the way (each inside its opened parent).

    Raises:
        PathEscapeError: ``real`` is outside ``root``, or a component is a symbolic link.
        OSError: a component is missing (without ``create``) or not a folder.
    """
    parts = _parts(real, root)  # refuses a path outside before anything is opened
    with closing_fd(os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)) as top:
        return open_dir_at(top, parts, create=create)


def open_beneath(real: str, root: str, flags: int) -> int:
    """Open the file ``real`` (never the root) from ``root``, without following symlinks.

    Raises:
        PathEscapeError: ``real`` is outside ``root`` or the root itself, or a component is a
            symbolic link.
        OSError: the open failed (missing, a folder, no permission); ``ELOOP`` when the last
            component is a symbolic link.
    """
    parent, name = os.path.split(real)
    dir_fd = open_dir_beneath(parent, root)  # refuses a parent outside (so the root itself)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def closing_fd(fd: int) -> Iterator[int]:
    """Close ``fd`` when the block ends."""
    try:
        yield fd
    finally:
        os.close(fd)
