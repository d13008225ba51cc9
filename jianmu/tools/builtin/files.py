"""File tools: read, write, list, inspect and edit files inside the workspace root.

Every path is confined to `jianmu.execution.runner.current_workspace()` (set by the
`ToolRunner` from ``ExecutionConstraints.workdir``; the current folder otherwise): ``..``,
absolute paths outside it, and symlinks leading out are refused with a clear error. Files are
then reached by folder descriptors from the root without following symlinks (see `_paths`),
so another process swapping a folder for a link cannot lead a tool outside.

Each tool is a `@tool` function over an operation of this module; the names ending in
``Tool`` are what the tools were called as classes (`copies`).
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import errno
import fnmatch
import io
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from jianmu.errors import ToolError, ToolExecutionError, ToolInputError
from jianmu.execution.runner import read_only_paths
from jianmu.tools.base import FunctionTool, tool
from jianmu.tools.builtin._paths import (
    PathEscapeError,
    closing_fd,
    dir_fd_at,
    display_path,
    is_inside,
    open_beneath,
    open_dir_beneath,
    real_root,
    resolve_path,
    shown_name,
)

__all__ = (
    "MAX_READ_BYTES",
    "FileInfoTool",
    "ListDirTool",
    "ReadFileTool",
    "StrReplaceTool",
    "WorkspacePath",
    "WriteFileTool",
    "copies",
    "file_info",
    "line_heads",
    "list_dir",
    "read_file",
    "read_lines",
    "str_replace",
    "write_file",
)


WorkspacePath = Annotated[
    str,
    "Path relative to the workspace root, e.g. 'src/app.py'. Paths outside the workspace "
    "(via '..', absolute paths or symlinks) are refused.",
]
"""A path argument of a file tool; `jianmu.tools.builtin._paths` confines it to the root."""


def copies(made: FunctionTool, old_name: str) -> Callable[[], FunctionTool]:
    """A factory of fresh copies of ``made``, under the class name the built-in once had.

    Calling the old name (``ReadFileTool()``) still gives a tool of one's own, so setting an
    attribute on it (``max_result_length``, ``permission``) never changes the shared one.
    """

    def factory() -> FunctionTool:
        fresh = copy.copy(made)
        fresh.metadata = dict(made.metadata)
        return fresh

    factory.__name__ = factory.__qualname__ = old_name
    factory.__doc__ = f"A fresh copy of the built-in `{made.name}` tool."
    return factory


DEFAULT_IGNORE = (
    ".git", "__pycache__", ".venv", "node_modules", ".mypy_cache", ".ruff_cache", ".jianmu",
)
PROTECTED_DIRS = (".git", ".jianmu")
"""Folders (at any depth) the file tools never write into: git runs hooks, ``core.fsmonitor``
and other commands named in ``.git/config`` (so a write there turns an allowed ``git status``
into arbitrary code), and ``.jianmu`` holds Jianmu's own state. Reading them stays allowed."""
_PROTECTED = frozenset(PROTECTED_DIRS)
_SNIFF = 8192
_MAX_TEXT_BYTES = 8 * 1024 * 1024
"""The largest file read whole (to edit it): with its text and the edited copy, the memory
an edit takes stays bounded."""
_CHUNK = 64 * 1024
MAX_READ_BYTES = 40_000
"""The most of a file one `read_lines` keeps: every read is bounded in bytes, never only by
lines. With its note it fits the 50,000 characters a ``read_file`` result may hold, so the
note saying what was cut reaches the model."""
_MAX_LIST_ENTRIES = 2000


def _os_error(exc: OSError, path: str) -> ToolError:
    """Translate an OSError into a message the model can act on."""
    if exc.errno == errno.ENOENT:
        return ToolExecutionError(f"{path!r} does not exist; check the path with list_dir")
    if exc.errno == errno.EISDIR:
        return ToolExecutionError(f"{path!r} is a directory, not a file; use list_dir")
    if exc.errno == errno.ENOTDIR:
        return ToolExecutionError(f"a parent of {path!r} is a file, not a directory")
    if exc.errno == errno.ELOOP:
        return PathEscapeError(f"{path!r} is a symbolic link that changed while being opened")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ToolExecutionError(f"permission denied for {path!r}")
    return ToolExecutionError(f"cannot access {path!r}: {exc.strerror or exc}")


def _open_regular(path: str) -> tuple[int, os.stat_result, str]:
    """Open an existing regular file inside the workspace for reading."""
    root = real_root()
    real = resolve_path(path, root=root)
    if real == root:
        raise ToolExecutionError(f"{path!r} is a directory, not a file; use list_dir")
    try:
        # O_NONBLOCK: a FIFO must not block the open; it is refused just below.
        fd = open_beneath(real, root, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _os_error(exc, path) from None
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise ToolExecutionError(f"{path!r} is a directory, not a file; use list_dir")
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ToolExecutionError(f"{path!r} is not a regular file (a device, socket or pipe)")
    return fd, st, real


def _decode(data: bytes, path: str, offset: int = 0) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolExecutionError(
            f"{path!r} is not valid UTF-8 (byte {data[exc.start]:#04x} at offset "
            f"{offset + exc.start}); it may use another encoding — file_info shows it"
        ) from None


def _refuse_binary(head: bytes, path: str) -> None:
    if b"\x00" in head:
        raise ToolExecutionError(
            f"{path!r} looks like a binary file (it contains NUL bytes); "
            "read_file only reads text"
        )


def read_text(path: str) -> tuple[str, str, int]:
    """Read a whole UTF-8 text file; return ``(text, real_path, mode)``."""
    fd, st, real = _open_regular(path)
    if st.st_size > _MAX_TEXT_BYTES:
        os.close(fd)
        raise ToolExecutionError(
            f"{path!r} is {st.st_size:,} bytes, over the {_MAX_TEXT_BYTES:,}-byte limit"
        )
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(_MAX_TEXT_BYTES + 1)  # bounded: the file may grow after the fstat
    if len(data) > _MAX_TEXT_BYTES:
        raise ToolExecutionError(f"{path!r} is over the {_MAX_TEXT_BYTES:,}-byte limit")
    _refuse_binary(data[:_SNIFF], path)
    return _decode(data, path), real, stat.S_IMODE(st.st_mode)


def _read_file(path: str, offset: int = 1, limit: int = 500) -> str:
    """Return lines ``offset .. offset+limit-1`` (1-based) and how many lines remain."""
    if offset < 1:
        raise ToolInputError(f"offset must be 1 or more (the first line is 1), got {offset!r}")
    if limit < 1:
        raise ToolInputError(f"limit must be 1 or more, got {limit!r}")
    fd, _st, _real = _open_regular(path)
    return read_lines(fd, path, offset, limit)


def read_lines(
    fd: int, path: str, offset: int = 1, limit: int = 500, *, max_bytes: int = MAX_READ_BYTES
) -> str:
    """`read_file` on an opened file: lines ``offset .. offset+limit-1``; closes ``fd``.

    ``path`` names the file in messages. At most ``max_bytes`` of the file are kept, whatever
    its lines' lengths: every read is bounded before it is split into lines, so a huge file
    with no newline costs no more memory than a small one. A line longer than what is left
    is cut, and a final note says so (and where to go on from).
    """
    with os.fdopen(fd, "rb") as fh:
        _refuse_binary(fh.read(_SNIFF), path)
        fh.seek(0)
        window = _Window(offset, offset + limit - 1, max_bytes)
        total = window.read(fh)
        total += _count_rest(fh)
    if total == 0:
        return f"[{path} is empty]"
    if offset > total:
        raise ToolInputError(
            f"offset {offset} is past the end of {path!r}, which has {total} lines"
        )
    text = _decode(window.data(), path, window.start_byte)
    last = window.last
    remaining = total - last
    if offset == 1 and remaining == 0 and window.cut is None:
        return text
    note = f"[lines {offset}-{last} of {total}"
    if window.cut is not None:
        line, size = window.cut
        note += (f"; line {line} is {size:,} bytes long and only its first "
                 f"{window.kept_of_cut:,} bytes are shown (the output is limited to "
                 f"{max_bytes:,} bytes)")
    elif window.full and remaining:
        note += f"; the output is limited to {max_bytes:,} bytes"
    if remaining:
        noun = "line" if remaining == 1 else "lines"
        note += f"; {remaining} more {noun}: call again with offset={last + 1}]"
    else:
        note += "]"
    return text + ("" if text.endswith("\n") else "\n") + note


class _Window:
    """The lines ``first .. last`` of a file, kept up to a number of bytes; counts lines."""

    def __init__(self, first: int, last: int, max_bytes: int) -> None:
        self.first, self.wanted_last, self.room = first, last, max(max_bytes, 1)
        self.chosen: list[bytes] = []
        self.start_byte = 0
        self.last = first - 1
        """The last line kept."""
        self.cut: tuple[int, int] | None = None
        """(line, its length in bytes) of a line kept only in part."""
        self.kept_of_cut = 0
        self.full = False
        """Whether the byte limit stopped the window before ``wanted_last``."""

    def read(self, fh: io.BufferedReader) -> int:
        """Read lines up to the window's end (or the byte limit); the number of lines read."""
        line = 0
        position = 0
        while line < self.wanted_last and not self.full:
            keep = line + 1 >= self.first
            head = fh.readline(self.room if keep else _CHUNK)
            if not head:
                return line
            size = len(head) + (0 if head.endswith(b"\n") else _skip_line(fh))
            line += 1
            if keep:
                if not self.chosen:
                    self.start_byte = position
                if size > len(head):
                    head = _whole_characters(head)
                    self.cut, self.kept_of_cut = (line, size), len(head)
                self.chosen.append(head)
                self.room -= len(head)
                self.last = line
                self.full = self.room <= 0 or self.cut is not None
            position += size
        return line

    def data(self) -> bytes:
        """The kept bytes."""
        return b"".join(self.chosen)


def line_heads(fh: io.BufferedReader, max_bytes: int) -> Iterator[tuple[bytes, int]]:
    """Each line of ``fh``: its first ``max_bytes`` bytes and its whole length in bytes.

    The rest of a longer line is read in chunks and dropped, so no line is held whole.
    """
    while head := fh.readline(max_bytes):
        yield head, len(head) + (0 if head.endswith(b"\n") else _skip_line(fh))


def _whole_characters(head: bytes) -> bytes:
    """``head`` without a UTF-8 character cut at its end."""
    for back in range(1, min(4, len(head)) + 1):
        byte = head[-back]
        if byte < 0x80:
            return head
        if byte >= 0xC0:  # the lead byte of the last character: is it complete?
            needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return head if back >= needed else head[:-back]
    return head


def _skip_line(fh: io.BufferedReader) -> int:
    """Read the rest of the current line without keeping it; its length in bytes."""
    size = 0
    while chunk := fh.readline(_CHUNK):
        size += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return size


def _count_rest(fh: io.BufferedReader) -> int:
    """The lines from the current position (at a line's start) to the end, read in chunks."""
    lines = 0
    last = b"\n"
    while chunk := fh.read(_CHUNK):
        lines += chunk.count(b"\n")
        last = chunk[-1:]
    return lines + (0 if last == b"\n" else 1)


def _refuse_protected(real: str, root: str, path: str) -> None:
    """Refuse a write whose real location is in (or is) a ``.git`` or ``.jianmu`` folder, one
    of the run's ``execution.read_only_paths``, or the Python install Jianmu runs from
    (`jianmu.execution.sandbox.engine_paths_in`)."""
    rel = os.path.relpath(real, root)
    # casefold: on case-insensitive file systems `.GIT/config` is `.git/config`
    parts = {part.casefold() for part in rel.split(os.sep)}
    hit = parts & _PROTECTED
    if hit:
        folder = sorted(hit)[0]
        raise ToolInputError(
            f"writing {path!r} is refused: it is inside a {folder!r} folder, which the file "
            "tools never change (git runs commands named in .git/config and hooks; .jianmu "
            "holds Jianmu's own state); edit files outside it, or ask the user to make "
            "this change"
        )
    where = [p.casefold() for p in rel.split(os.sep)]
    for kept in read_only_paths():
        if where[:len(kept.split("/"))] == [p.casefold() for p in kept.split("/")]:
            raise ToolInputError(
                f"writing {path!r} is refused: {kept!r} is read-only for every tool "
                "(execution.read_only_paths: what runs on the host once changed, such as the "
                "config Jianmu loads, the skills it imports, a project's .venv); ask the user "
                "to make this change"
            )
    from jianmu.execution.sandbox import engine_paths_in  # light: only for writes

    for host, _rel in engine_paths_in(root):
        if real == host or real.startswith(host + os.sep):
            raise ToolInputError(
                f"writing {path!r} is refused: it is inside the Python install Jianmu runs "
                f"from ({display_path(host, root)!r}), whose code the engine imports; ask "
                "the user to make this change"
            )


def _check_writable(path: str) -> None:
    """Refuse early (before any read) a write into a protected folder."""
    root = real_root()
    _refuse_protected(resolve_path(path, root=root), root, path)


_PERMISSION_BITS = 0o777
"""What a rewritten file keeps of its mode."""


def write_text_atomic(path: str, data: bytes, *, keep_mode: int | None = None) -> tuple[str, bool]:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    Returns the displayed path and whether the file was created.

    Raises:
        ToolInputError: the path is inside a ``.git`` or ``.jianmu`` folder (`PROTECTED_DIRS`).
    """
    root = real_root()
    real = resolve_path(path, root=root)
    if real == root:
        raise ToolExecutionError(f"{path!r} is the workspace folder itself; give a file path")
    _refuse_protected(real, root, path)
    parent, name = os.path.split(real)
    try:
        # each missing folder is made inside its opened parent: no swapped-in symlink is
        # ever followed, so nothing is created outside the workspace
        dir_fd = open_dir_beneath(parent, root, create=True)
    except OSError as exc:
        raise _os_error(exc, path) from None
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    try:
        try:
            existing = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            raise ToolExecutionError(f"{path!r} is a directory; give a file path")
        if existing is not None and stat.S_ISLNK(existing.st_mode):
            raise PathEscapeError(f"{path!r} became a symbolic link while being written")
        mode = keep_mode if keep_mode is not None else (
            stat.S_IMODE(existing.st_mode) if existing is not None else 0o644
        )
        # only the permission bits: set-user-ID, set-group-ID and sticky bits planted by
        # sandboxed code would turn what the model writes into a program run as our user
        mode &= _PERMISSION_BITS
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(tmp, flags | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fchmod(fh.fileno(), mode)  # on the descriptor: the name could be swapped
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    except OSError as exc:
        raise _os_error(exc, path) from None
    finally:
        os.close(dir_fd)
    return display_path(real, root), existing is None


def append_or_write(path: str, content: str, mode: str = "overwrite") -> str:
    """Write or append ``content`` (atomically in both cases) and say what was done."""
    if mode not in ("overwrite", "append"):
        raise ToolInputError(f"mode must be 'overwrite' or 'append', got {mode!r}")
    data = content.encode("utf-8")
    keep_mode = None
    _check_writable(path)
    if mode == "append":
        try:
            old, _real, keep_mode = read_text(path)
        except ToolExecutionError as exc:
            if "does not exist" not in str(exc):
                raise
        else:
            data = old.encode("utf-8") + data
    shown, created = write_text_atomic(path, data, keep_mode=keep_mode)
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    verb = "Appended" if mode == "append" and not created else "Wrote"
    where = "new file" if created else "file"
    return f"{verb} {len(content)} characters ({lines} lines) to {where} {shown}"


def _str_replace(path: str, old: str, new: str, count: int | None = None) -> str:
    """Replace ``old`` by ``new``; ``old`` must occur exactly once, or exactly ``count`` times."""
    if not old:
        raise ToolInputError("old is empty; give the exact text to replace")
    if old == new:
        raise ToolInputError("old and new are the same; nothing would change")
    if count is not None and count < 1:
        raise ToolInputError(f"count must be 1 or more, got {count!r}")
    _check_writable(path)
    text, _real, mode = read_text(path)
    found = text.count(old)
    expected = 1 if count is None else count
    if found == 0:
        raise ToolExecutionError(
            f"old text not found in {path!r}; read the file and copy the exact text, "
            "including whitespace and indentation"
        )
    if found != expected:
        if count is None:
            raise ToolExecutionError(
                f"old text occurs {found} times in {path!r}; include more surrounding lines "
                f"to make it unique, or set count={found} to replace every occurrence"
            )
        raise ToolExecutionError(
            f"old text occurs {found} times in {path!r}, not {count}; "
            f"set count={found} to replace them all, or make old more specific"
        )
    lines = []
    pos = text.find(old)
    while pos != -1:
        lines.append(text.count("\n", 0, pos) + 1)
        pos = text.find(old, pos + len(old))
    shown, _ = write_text_atomic(path, text.replace(old, new).encode("utf-8"), keep_mode=mode)
    where = ", ".join(map(str, lines[:20])) + (" ..." if len(lines) > 20 else "")
    plural = "occurrence" if found == 1 else "occurrences"
    return f"Replaced {found} {plural} in {shown} (line {where})"


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _list_dir(path: str = ".", depth: int = 1, ignore: list[str] | None = None) -> str:
    """List a folder as an indented tree, ``depth`` levels deep."""
    if depth < 1:
        raise ToolInputError(f"depth must be 1 or more, got {depth!r}")
    patterns = list(DEFAULT_IGNORE if ignore is None else ignore)
    root = real_root()
    real = resolve_path(path or ".", root=root)
    try:
        top = open_dir_beneath(real, root)
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise ToolExecutionError(
                f"{path!r} is a file, not a directory; use file_info"
            ) from None
        if exc.errno == errno.ENOENT:
            raise ToolExecutionError(
                f"{path!r} does not exist; check the path with list_dir('.')"
            ) from None
        raise _os_error(exc, path) from None
    out: list[str] = []
    omitted = 0

    def skip(name: str, rel: str) -> bool:
        return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(rel, p) for p in patterns)

    def walk(fd: int, folder: str, level: int) -> None:
        # `fd` is the folder's descriptor, reached without following any symlink; `folder`
        # is its real path, used only to name entries
        nonlocal omitted
        try:
            entries = sorted(
                os.scandir(fd), key=lambda e: (not e.is_dir(follow_symlinks=False), e.name)
            )
        except OSError as exc:
            out.append("  " * level + f"[cannot list: {exc.strerror}]")
            return
        for entry in entries:
            full = os.path.join(folder, entry.name)
            rel = display_path(full, root)
            if skip(entry.name, rel):
                continue
            if len(out) >= _MAX_LIST_ENTRIES:
                omitted += 1
                continue
            pad = "  " * level
            if entry.is_symlink():
                target = os.path.realpath(full)
                where = display_path(target, root) if is_inside(target, root) else "outside"
                out.append(f"{pad}{shown_name(entry.name)}@ -> {shown_name(where)}")
            elif entry.is_dir(follow_symlinks=False):
                out.append(f"{pad}{shown_name(entry.name)}/")
                if level + 1 < depth:
                    _walk_child(fd, entry.name, full, level + 1)
            else:
                try:
                    size = entry.stat(follow_symlinks=False).st_size
                except OSError:
                    size = 0  # removed while listing
                out.append(f"{pad}{shown_name(entry.name)}  ({_human_size(size)})")

    def _walk_child(parent: int, name: str, folder: str, level: int) -> None:
        try:
            child = dir_fd_at(parent, name)
        except (OSError, PathEscapeError):
            # swapped for a symlink or removed since it was listed: not entered
            out.append("  " * level + "[cannot list: it changed while being listed]")
            return
        with closing_fd(child):
            walk(child, folder, level)

    with closing_fd(top):
        walk(top, real, 0)
    header = f"{shown_name(display_path(real, root))}/"
    if not out:
        return f"{header}\n  [empty]"
    body = "\n".join("  " + line for line in out)
    if omitted:
        body += f"\n[{omitted} more entries not shown; list a subfolder or lower depth]"
    return f"{header}\n{body}"


def _encoding(head: bytes, complete: bool) -> str:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if b"\x00" in head:
        return "binary"
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    try:
        head.decode("ascii")
        return "ascii"
    except UnicodeDecodeError:
        pass
    try:
        head.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sample is still UTF-8.
        if not complete and exc.start >= len(head) - 3:
            return "utf-8"
        return "unknown (not UTF-8)"


def _file_info(path: str) -> dict[str, Any]:
    """Size, type, modification time, and for files the line count and encoding."""
    root = real_root()
    real = resolve_path(path, root=root)
    lexical = os.path.join(root, path) if not os.path.isabs(path) else path
    try:
        # a descriptor of the folder itself, or of the file's folder: reached without
        # following a symlink, so a swapped-in link to outside is refused, never stat-ed
        is_root = real == root
        parent = open_dir_beneath(real if is_root else os.path.dirname(real), root)
        with closing_fd(parent):
            st = os.stat(parent) if is_root else os.stat(
                os.path.basename(real), dir_fd=parent, follow_symlinks=False
            )
            if stat.S_ISLNK(st.st_mode):
                raise PathEscapeError(f"{path!r} is a symbolic link that changed while being read")
            entries = len(os.listdir(parent)) if is_root else None
            if entries is None and stat.S_ISDIR(st.st_mode):
                with closing_fd(dir_fd_at(parent, os.path.basename(real))) as folder:
                    entries = len(os.listdir(folder))
    except OSError as exc:
        raise _os_error(exc, path) from None
    info: dict[str, Any] = {"path": display_path(real, root)}
    if os.path.islink(os.path.normpath(lexical)):
        info["symlink"] = True
    modified = dt.datetime.fromtimestamp(st.st_mtime, tz=dt.UTC).isoformat(timespec="seconds")
    if stat.S_ISDIR(st.st_mode):
        info.update(type="directory", entries=entries, modified=modified)
        return info
    if not stat.S_ISREG(st.st_mode):
        info.update(type="other", size=st.st_size, modified=modified)
        return info
    fd, st, _ = _open_regular(path)
    lines = 0
    last = b""
    with os.fdopen(fd, "rb") as fh:
        head = fh.read(65536)
        complete = len(head) < 65536
        chunk = head
        while chunk:
            lines += chunk.count(b"\n")
            last = chunk[-1:]
            chunk = fh.read(1 << 20)
    encoding = _encoding(head, complete)
    if st.st_size and last != b"\n":
        lines += 1
    info.update(
        type="file",
        size=st.st_size,
        size_human=_human_size(st.st_size),
        modified=modified,
        encoding=encoding,
        permissions=stat.filemode(st.st_mode),
    )
    if encoding not in ("binary", "utf-16"):  # newline bytes mean lines only here
        info["lines"] = lines
    return info


@tool(
    category="read", effect_tags=("file_read",), timeout_seconds=30.0, max_result_length=50_000
)
def read_file(
    path: WorkspacePath,
    offset: Annotated[int, Field(ge=1)] = 1,
    limit: Annotated[int, Field(ge=1, le=5000)] = 500,
) -> str:
    """Read a UTF-8 text file from the workspace.

    Use it to look at source code, configs or notes before answering or editing. Returns the
    lines' text; when the file has more lines, a final note says which lines were shown and
    how many remain, with the offset to continue from. Binary and non-UTF-8 files are refused.

    Args:
        path: Path relative to the workspace root.
        offset: First line to read, counting from 1.
        limit: Maximum number of lines to return.

    Returns:
        The requested lines of the file.
    """
    return _read_file(path, offset, limit)


@tool(
    category="write", effect_tags=("file_write",), timeout_seconds=30.0, max_result_length=2_000
)
def write_file(
    path: WorkspacePath, content: str, mode: Literal["overwrite", "append"] = "overwrite"
) -> str:
    """Create or change a text file in the workspace.

    Use it to save new files or replace a file's whole content; for a small edit in an
    existing file prefer str_replace. Missing parent folders are created. The write is
    atomic: a temporary file is written and then renamed over the target, so a reader never
    sees half a file. Files inside .git and .jianmu folders cannot be written. Returns what
    was written and where.

    Args:
        path: Path relative to the workspace root; missing parent folders are created.
        content: The text to write (UTF-8).
        mode: 'overwrite' replaces the file; 'append' adds to its end.

    Returns:
        A one-line summary of the write.
    """
    return append_or_write(path, content, mode)


@tool(
    category="read", effect_tags=("file_read",), timeout_seconds=30.0, max_result_length=30_000
)
def list_dir(
    path: WorkspacePath = ".",
    depth: Annotated[int, Field(ge=1, le=10)] = 1,
    ignore: list[str] | None = None,
) -> str:
    """List the files and folders in a workspace folder as an indented tree.

    Folders end with '/', files show their size, symlinks show their target; a name with
    line breaks or unusual characters is shown quoted, with escapes. Use it to find your way
    around a project before reading files. Returns the tree as text.

    Args:
        path: Folder relative to the workspace root.
        depth: How many levels to descend; 1 lists only the folder itself.
        ignore: Glob patterns (e.g. '*.pyc', 'build') of entries to omit; by default .git,
            __pycache__, .venv, node_modules and .jianmu are left out.

    Returns:
        The folder's tree.
    """
    return _list_dir(path, depth, ignore)


@tool(
    category="read", effect_tags=("file_read",), timeout_seconds=30.0, max_result_length=2_000
)
def file_info(path: WorkspacePath) -> dict[str, Any]:
    """Describe a file or folder in the workspace without reading it all.

    Gives its type (file/directory/other), size, last modified time (UTC, ISO 8601),
    permissions, and for files the line count and encoding (ascii, utf-8, utf-16, binary,
    ...). Use it to check a file before reading or editing it. Returns a JSON object with
    those fields.

    Args:
        path: Path relative to the workspace root.

    Returns:
        path, type, size, modified, permissions, lines, encoding.
    """
    return _file_info(path)


@tool(
    category="write", effect_tags=("file_write",), timeout_seconds=30.0, max_result_length=2_000
)
def str_replace(
    path: WorkspacePath,
    old: str,
    new: str,
    count: Annotated[int, Field(ge=1)] | None = None,
) -> str:
    """Edit a text file by replacing an exact piece of text with another.

    Use it for targeted edits instead of rewriting the whole file. If old is missing or
    occurs a different number of times than expected, nothing changes and the error says
    how many times it occurs. Files inside .git and .jianmu folders cannot be edited.
    Returns how many occurrences were replaced and on which lines.

    Args:
        path: Path relative to the workspace root.
        old: The exact text to replace, whitespace included; it must occur exactly once, so
            include enough surrounding lines to make it unique.
        new: The text to put in its place.
        count: How many occurrences to replace when old occurs more than once; they must
            all exist. Leave it out to require exactly one.

    Returns:
        A one-line summary of the edit.
    """
    return _str_replace(path, old, new, count)


ReadFileTool = copies(read_file, "ReadFileTool")
WriteFileTool = copies(write_file, "WriteFileTool")
ListDirTool = copies(list_dir, "ListDirTool")
FileInfoTool = copies(file_info, "FileInfoTool")
StrReplaceTool = copies(str_replace, "StrReplaceTool")
