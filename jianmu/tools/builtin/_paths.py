"""Confined paths: a file tool's path inside the workspace, and a folder pinned by descriptor.

A tool's path is resolved once by `jianmu.execution.runner.resolve_tool_path` (symlinks
followed, refused unless the real location is inside the root). The file is then reached from
a descriptor of the real root, one component at a time, each folder opened with
``O_DIRECTORY | O_NOFOLLOW`` relative to its parent (``openat`` semantics) and the last
component with ``O_NOFOLLOW``. A folder swapped for a symlink after the check makes the open
fail instead of leaving the workspace, whatever another process does meanwhile.

`PinnedFolder` holds a folder by one descriptor, and its files are reached only from there. A
skill's folder often sits where sandboxed code can change it: a folder swapped for a link to
``/`` after the skill was loaded must not lead a tool there. So the folder is opened once, when
it is pinned, from ``/`` one component at a time with ``O_NOFOLLOW`` (``openat``), and every
later read, listing and mount starts from that descriptor: renaming the folder, or putting a
link where it was, changes nothing for its users. Inside the folder, a symbolic link is
followed only while it stays inside: it is resolved component by component from the
descriptor (an absolute target counts when it names the folder's own path), and a link leading
out is refused. The file is then opened from the descriptor with ``O_NOFOLLOW`` on every
component, so a link swapped in between the check and the open makes the open fail instead of
leaving the folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from jianmu.errors import PathEscapeError, ToolExecutionError
from jianmu.execution.runner import current_workspace, is_inside, resolve_tool_path

__all__ = (
    "MAX_LISTED_FILES",
    "PathEscapeError",
    "PinnedFolder",
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


# what a listing writes after or between names: a name holding one could pass for more
_LISTING_MARKS = ("  (", "@ -> ")


def shown_name(name: str) -> str:
    """``name`` (a file's name or path) as a listing shows it to the model: as it is when
    plain, else quoted with its escapes (``repr``), so that a name holding a line break, a
    listing's own marks or invisible characters cannot pass for other entries, and an
    undecodable byte (a lone surrogate) is named as the model can send it back."""
    if name.isprintable() and name == name.strip() and not name.startswith(("'", '"')) \
            and not any(mark in name for mark in _LISTING_MARKS):
        return name
    return repr(name)


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


MAX_LISTED_FILES = 10_000
"""The most files `PinnedFolder.files` walks and lists (a folder may hold any number)."""

_MAX_LINKS = 40  # as the kernel's own limit on links followed in one path


class PinnedFolder:
    """A folder opened once (by descriptor, no symlink on its way); its files are reached from it.

    Args:
        path: The folder. A link on its way is followed this once (the real path is pinned).

    Raises:
        OSError: the folder is missing, not a folder, or changed while being opened.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        given = os.path.abspath(os.fspath(path))
        self.path = os.path.realpath(given)
        """The folder's real path when it was pinned (for messages and absolute links)."""
        self._aliases = tuple(dict.fromkeys((self.path, given)))
        self._fd = open_dir_beneath(self.path, "/")
        self._closer = weakref.finalize(self, os.close, self._fd)

    def fileno(self) -> int:
        """The folder's descriptor (valid while this object lives; never close it)."""
        return self._fd

    def close(self) -> None:
        """Close the descriptor now (it is closed when the object is collected anyway)."""
        self._closer()

    # the descriptor belongs to this object: a copy is the same pin, a pickle pins again
    def __copy__(self) -> PinnedFolder:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> PinnedFolder:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (PinnedFolder, (self.path,))

    def __repr__(self) -> str:
        return f"<PinnedFolder {self.path!r} fd={self._fd}>"

    # -- paths -----------------------------------------------------------------------------------
    def resolve(self, rel: str) -> str:
        """Where ``rel`` (relative to the folder) really leads, relative to the folder, links
        inside followed; ``""`` for the folder itself.

        Raises:
            PathEscapeError: ``rel`` is absolute, or it (or a link on its way) leads outside.
            FileNotFoundError: a component is missing.
            NotADirectoryError: a component before the last is a file.
        """
        if os.path.isabs(rel) or "\x00" in rel:
            raise PathEscapeError(f"{rel!r} is not a path relative to the folder")
        pending = _components(rel)
        done: list[str] = []
        links = 0
        while pending:
            part = pending.pop(0)
            if part == "..":
                if not done:
                    how = " through a symbolic link" if links else ""
                    raise PathEscapeError(f"{rel!r} leads{how} outside the folder")
                done.pop()
                continue
            with closing_fd(self._dir_at(done)) as parent:
                st = os.stat(part, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > _MAX_LINKS:
                        raise PathEscapeError(f"{rel!r} goes through too many symbolic links")
                    target = os.readlink(part, dir_fd=parent)
                    if os.path.isabs(target):
                        done, pending = [], self._inside(target, rel) + pending
                    else:
                        pending = _components(target) + pending
                    continue
            if pending and not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a folder", "/".join([*done, part]))
            done.append(part)
        return "/".join(done)

    def _inside(self, target: str, rel: str) -> list[str]:
        """The parts of an absolute link target below the folder; refused when outside."""
        norm = os.path.normpath(target)
        for alias in self._aliases:
            if norm == alias or norm.startswith(alias.rstrip("/") + "/"):
                return _components(os.path.relpath(norm, alias))
        raise PathEscapeError(f"{rel!r} leads through a symbolic link outside the folder")

    def _dir_at(self, parts: Iterable[str]) -> int:
        """A new descriptor of the sub-folder ``parts``, no link followed on the way."""
        return open_dir_at(self._fd, parts)

    # -- files -----------------------------------------------------------------------------------
    def open(self, rel: str, flags: int = os.O_RDONLY) -> int:
        """Open ``rel`` (links inside followed, see `resolve`) from the folder's descriptor.

        ``O_NOFOLLOW`` holds for every component: a link swapped in meanwhile fails the open.

        Raises:
            PathEscapeError: the path leads outside, or became a link while being opened.
            OSError: missing, a folder (``EISDIR``), no permission.
        """
        real = self.resolve(rel)
        if not real:
            raise IsADirectoryError(errno.EISDIR, "is the folder itself", rel)
        *folders, name = real.split("/")
        with closing_fd(self._dir_at(folders)) as parent:
            try:
                return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            except OSError as exc:
                raise _swapped(exc) from None

    def read_bytes(self, rel: str, limit: int) -> bytes:
        """At most ``limit`` bytes of the regular file ``rel``.

        Raises:
            PathEscapeError: see `open`.
            OSError: missing, a folder, not a regular file (``EINVAL``), unreadable.
        """
        fd = self.open(rel, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", rel)
            return fh.read(limit)

    def stat(self, rel: str) -> os.stat_result:
        """The status of what ``rel`` leads to (links inside followed).

        Raises:
            PathEscapeError: see `resolve`.
            OSError: missing.
        """
        real = self.resolve(rel)
        if not real:
            return os.fstat(self._fd)
        *folders, name = real.split("/")
        with closing_fd(self._dir_at(folders)) as parent:
            return os.stat(name, dir_fd=parent, follow_symlinks=False)

    def files(self, skip: Iterable[str] = ()) -> list[tuple[str, int]]:
        """Every regular file below the folder: (relative POSIX path, size), sorted.

        Folders named in ``skip`` are not entered, nor are folder links; a file link is listed
        where it is when it leads to a file inside the folder, left out otherwise. At most
        `MAX_LISTED_FILES` entries are looked at.
        """
        skipped = frozenset(skip)
        found: list[tuple[str, int]] = []
        budget = [MAX_LISTED_FILES]

        def walk(fd: int, prefix: str) -> None:
            try:
                entries = sorted(os.scandir(fd), key=lambda e: e.name)
            except OSError:
                return
            for entry in entries:
                budget[0] -= 1
                if budget[0] < 0:
                    return
                rel = prefix + entry.name
                try:
                    if entry.is_symlink():
                        if _is_file(self, rel):
                            found.append((rel, self.stat(rel).st_size))
                    elif entry.is_dir(follow_symlinks=False):
                        if entry.name not in skipped:
                            with closing_fd(dir_fd_at(fd, entry.name)) as child:
                                walk(child, rel + "/")
                    elif entry.is_file(follow_symlinks=False):
                        found.append((rel, entry.stat(follow_symlinks=False).st_size))
                except (OSError, PathEscapeError):
                    continue  # a link out, a dangling one, or changed while listed: left out

        with closing_fd(os.dup(self._fd)) as top:
            walk(top, "")
        return sorted(found)


def _is_file(folder: PinnedFolder, rel: str) -> bool:
    return stat.S_ISREG(folder.stat(rel).st_mode)


def _components(path: str) -> list[str]:
    return [p for p in path.split("/") if p and p != "."]


def _swapped(exc: OSError) -> Exception:
    """``O_NOFOLLOW`` met a link (``ELOOP``; ``ENOTDIR`` with ``O_DIRECTORY``): it was swapped
    in after the path was resolved. Other errors stay as they are."""
    if exc.errno == errno.ELOOP:
        return PathEscapeError("a path component became a symbolic link while being opened")
    return exc
