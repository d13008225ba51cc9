"""Workspace confinement for the file tools: resolve, check and open paths inside the root.

Every path a model gives is resolved against `current_workspace()` and refused unless its
real location (symlinks followed, with ``os.path.realpath``) is the root or below it. Files
are then opened with ``O_NOFOLLOW`` and the opened descriptor is checked again through
``/proc/self/fd`` where it exists, so a folder swapped for a symlink between the check and the
open is caught as well.
"""

from __future__ import annotations

import os
from pathlib import Path

from jianmu.errors import ToolExecutionError, ToolInputError
from jianmu.execution.workspace import current_workspace

__all__ = (
    "PathEscapeError",
    "display_path",
    "is_inside",
    "open_dir_confined",
    "open_file_confined",
    "real_root",
    "resolve_path",
)

_PROC_FD = Path("/proc/self/fd")


class PathEscapeError(ToolInputError):
    """A path leads outside the workspace root."""


def real_root() -> str:
    """The real (symlink-free) path of the current workspace root."""
    root = current_workspace()
    real = os.path.realpath(root)
    if not os.path.isdir(real):
        raise ToolExecutionError(f"workspace root {str(root)!r} is not an existing folder")
    return real


def is_inside(real: str, root: str) -> bool:
    """Whether the real path ``real`` is ``root`` or below it."""
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def display_path(real: str, root: str) -> str:
    """The path relative to the root, as shown to the model ("." for the root itself)."""
    rel = os.path.relpath(real, root)
    return "." if rel == "." else rel.replace(os.sep, "/")


def resolve_path(path: str, *, root: str | None = None) -> str:
    """Resolve ``path`` inside the workspace and return its real path.

    Relative paths are taken from the root. Absolute paths are accepted only when they lie
    inside the root. The path need not exist yet (for writes); its existing part is resolved.

    Raises:
        ToolInputError: ``path`` is empty or not a string.
        PathEscapeError: ``path`` leads outside the workspace.
    """
    if not isinstance(path, str):
        raise ToolInputError(f"path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise ToolInputError(f"path {path!r} contains a NUL character")
    if not path.strip():
        raise ToolInputError("path is empty; give a path relative to the workspace root")
    root = root or real_root()
    if path.startswith("~"):
        # `~` is the user's home, which is outside the workspace; never expand it silently.
        raise PathEscapeError(
            f"path {path!r} refers to a home folder, outside the workspace; "
            "give a path relative to the workspace root"
        )
    candidate = path if os.path.isabs(path) else os.path.join(root, path)
    lexical = os.path.normpath(candidate)
    if not is_inside(lexical, root) and not is_inside(os.path.realpath(lexical), root):
        raise PathEscapeError(
            f"path {path!r} is outside the workspace {root!r}; "
            "give a path relative to the workspace root, without '..' leading out of it"
        )
    real = os.path.realpath(candidate)
    if not is_inside(real, root):
        raise PathEscapeError(
            f"path {path!r} resolves to {real!r} through a symbolic link, outside the "
            f"workspace {root!r}; only paths whose real location is inside it are allowed"
        )
    return real


def _check_fd(fd: int, path: str, root: str) -> None:
    """Re-check an opened descriptor's real location (Linux); close it and raise if outside."""
    link = _PROC_FD / str(fd)
    try:
        actual = os.readlink(link)
    except OSError:
        return  # no /proc: the realpath check before the open is what we have
    if not is_inside(actual, root):
        os.close(fd)
        raise PathEscapeError(
            f"path {path!r} was redirected outside the workspace while it was being opened"
        )


def open_file_confined(real: str, flags: int, path: str, root: str, mode: int = 0o666) -> int:
    """Open the resolved path ``real`` with ``O_NOFOLLOW``, and re-check where it landed.

    Raises:
        PathEscapeError: the file was swapped for something outside the workspace.
        OSError: the open itself failed (missing file, a directory, no permission).
    """
    fd = os.open(real, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    _check_fd(fd, path, root)
    return fd


def open_dir_confined(real: str, path: str, root: str) -> int:
    """Open the resolved folder ``real`` (for ``dir_fd`` operations) and re-check it."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW
    fd = os.open(real, flags | getattr(os, "O_CLOEXEC", 0))
    _check_fd(fd, path, root)
    return fd
