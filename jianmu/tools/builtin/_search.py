"""The searches behind the search tools: files by glob, lines by regex, minding `.gitignore`."""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Iterator

from jianmu.errors import ToolExecutionError, ToolInputError
from jianmu.tools.builtin._fileops import line_heads
from jianmu.tools.builtin._gitignore import WalkedFile, glob_to_regex, walk_files
from jianmu.tools.builtin._paths import (
    PathEscapeError,
    display_path,
    open_beneath,
    real_root,
    resolve_path,
)
from jianmu.tools.builtin._regex import (
    PatternTimeout,
    SearchOutOfTime,
    compile_pattern,
    search_deadline,
    timed_match,
    timed_search,
)

__all__ = ("glob_search", "grep_search")

_MAX_GLOB_RESULTS = 1000
_MAX_FILE_BYTES = 10 * 1024 * 1024
_MAX_LINE_SHOWN = 300
_MAX_LINE_SCANNED = 20_000  # bounds the work of one regex match on minified files
_DEFAULT_BUDGET = 60.0
# Share of the tool's timeout the matching may use, so the search stops with its own
# message (naming the slow file and line) before the caller's timeout stops it blind.
_BUDGET_SHARE = 0.9


def _budget(timeout: float | None) -> float:
    return (timeout if timeout is not None and timeout > 0 else _DEFAULT_BUDGET) * _BUDGET_SHARE


def _search_root(root: str) -> tuple[str, str]:
    ws = real_root()
    real = resolve_path(root or ".", root=ws)
    if not os.path.exists(real):
        raise ToolExecutionError(f"{root!r} does not exist; check the path with list_dir")
    return ws, real


def glob_search(pattern: str, root: str = ".", *, timeout: float | None = None) -> str:
    """Files under ``root`` whose path (relative to ``root``) matches ``pattern``.

    ``timeout`` (seconds, default 60) bounds the pattern matching as a whole.
    """
    if not pattern or not pattern.strip():
        raise ToolInputError("pattern is empty; give a glob such as '**/*.py' or 'test_*.py'")
    if os.path.isabs(pattern) or ".." in pattern.replace("\\", "/").split("/"):
        raise ToolInputError(
            f"pattern {pattern!r} must be relative and must not contain '..'; "
            "use root to choose the folder to search"
        )
    ws, real = _search_root(root)
    if not os.path.isdir(real):
        raise ToolExecutionError(f"root {root!r} is a file, not a directory")
    rx = glob_to_regex(pattern)
    hits: list[str] = []
    more = 0
    rel = ""
    try:
        with search_deadline(_budget(timeout)):
            for found in _walk(real, ws, root):
                rel = found.rel
                rel_to_start = os.path.relpath(os.path.join(ws, rel), real).replace(os.sep, "/")
                if not timed_match(rx, rel_to_start):
                    continue
                if len(hits) < _MAX_GLOB_RESULTS:
                    hits.append(rel)
                else:
                    more += 1
    except PatternTimeout as exc:
        raise ToolExecutionError(
            f"the glob search ran out of time near {rel!r} ({exc}); simplify the pattern "
            "(fewer '*'), narrow the root, or simplify the .gitignore rules"
        ) from None
    if not hits:
        return f"No files match {pattern!r} under {display_path(real, ws)!r}"
    out = "\n".join(hits)
    if more:
        out += f"\n[{more} more files not shown; narrow the pattern or the root]"
    return out


def _walk(real: str, ws: str, given: str) -> Iterator[WalkedFile]:
    """`walk_files` from the folder ``real``; a folder swapped away before it opens is refused."""
    try:
        yield from walk_files(real, ws)
    except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
        raise ToolExecutionError(f"cannot search {given!r}: {exc.strerror or exc}") from None


def _open_text(found: WalkedFile | str, ws: str) -> io.BufferedReader | None:
    """Open a regular, non-binary file of at most `_MAX_FILE_BYTES`; else None.

    ``found`` is a walked file or the real path of one file. The open never blocks
    (``O_NONBLOCK``), never follows a symlink swapped in, and the descriptor is checked to be
    a regular file, so a FIFO or device swapped in after the walk is skipped, not waited on.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK
    try:
        fd = open_beneath(found, ws, flags) if isinstance(found, str) else found.open(flags)
    except (OSError, PathEscapeError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_FILE_BYTES:
            os.close(fd)
            return None
        raw = os.fdopen(fd, "rb")
    except OSError:
        os.close(fd)
        return None
    try:
        if b"\x00" in raw.read(8192):
            raw.close()
            return None
        raw.seek(0)
    except OSError:
        raw.close()
        return None
    return raw


def grep_search(
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    case_sensitive: bool = True,
    max_matches: int = 100,
    *,
    timeout: float | None = None,
) -> str:
    """Lines matching the regex ``pattern`` in files under ``path``, as file:line:text.

    ``timeout`` (seconds, default 60) bounds the matching as a whole: a pattern that
    backtracks without end is stopped and reported instead of hanging.
    """
    if not pattern:
        raise ToolInputError("pattern is empty; give a regular expression such as 'def \\w+'")
    if max_matches < 1:
        raise ToolInputError(f"max_matches must be 1 or more, got {max_matches!r}")
    rx = compile_pattern(pattern, 0 if case_sensitive else re.IGNORECASE)
    file_re = glob_to_regex(glob) if glob else None
    ws, real = _search_root(path)
    files: Iterator[tuple[WalkedFile | str, str]]
    if os.path.isdir(real):
        files = ((found, found.rel) for found in _walk(real, ws, path))
    elif os.path.isfile(real):
        files = iter([(real, display_path(real, ws))])
    else:
        raise ToolExecutionError(
            f"{path!r} is not a regular file or a folder (a FIFO, socket or device); "
            "give a text file or a folder"
        )
    out: list[str] = []
    scanned = 0
    truncated = False
    out_of_time = False
    at = ""  # "file:line" while the pattern itself runs, so a timeout can name the line
    try:
        with search_deadline(_budget(timeout)):
            for real_file, rel in files:
                if file_re is not None and not timed_match(file_re, rel):
                    continue
                fh = _open_text(real_file, ws)
                if fh is None:
                    continue
                scanned += 1
                with fh:
                    # bounded reads: a minified file's one long line is scanned in part
                    lines = line_heads(fh, _MAX_LINE_SCANNED)
                    for lineno, (head, size) in enumerate(lines, 1):
                        text = head.decode("utf-8", errors="replace").rstrip("\n")
                        at = f"{rel}:{lineno}"
                        hit = timed_search(rx, text)
                        at = ""
                        if not hit:
                            continue
                        if len(out) >= max_matches:
                            truncated = True
                            break
                        if size > len(head):  # only its head was read
                            text = text[:_MAX_LINE_SHOWN] + f"…[a line of {size:,} bytes]"
                        elif len(text) > _MAX_LINE_SHOWN:
                            extra = len(text) - _MAX_LINE_SHOWN
                            text = text[:_MAX_LINE_SHOWN] + f"…[+{extra} chars]"
                        out.append(f"{rel}:{lineno}:{text}")
                if truncated:
                    break
    except SearchOutOfTime:
        out_of_time = True  # many files, no single slow match: return what was found
    except PatternTimeout:
        if not at:  # a .gitignore rule or the glob filter was the slow one
            out_of_time = True
        else:
            raise ToolExecutionError(
                f"the pattern {pattern!r} took too long on {at}; simplify it "
                "(avoid nested or overlapping repeats such as (a+)+ or (a|aa)*), or narrow "
                "the path or glob"
            ) from None
    if not out:
        where = display_path(real, ws)
        note = "; the search ran out of time, narrow the path or glob" if out_of_time else ""
        return f"No matches for {pattern!r} in {where!r} ({scanned} files searched{note})"
    result = "\n".join(out)
    if truncated:
        result += (
            f"\n[stopped at max_matches={max_matches}; more matches exist — narrow the "
            "pattern, the path or the glob, or raise max_matches]"
        )
    elif out_of_time:
        result += (
            f"\n[stopped after {scanned} files: the search ran out of time; narrow the "
            "path or the glob]"
        )
    return result
