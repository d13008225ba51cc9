"""Code search tools: find files by glob and lines by regex, honouring `.gitignore`.

The walk is confined to the workspace: each folder is opened beneath the root without
following links (`_paths`), and `.gitignore` files are read on the way (`GitIgnore`).

The regular expressions come from the model, and they are matched without freezing the
process. Python's ``re`` holds the GIL while it backtracks and has no timeout, so a pattern
such as ``(a|aa)+$`` over a crafted line stops every thread and the event loop. The ``regex``
package (with ``VERSION0``: Python ``re`` syntax) releases the GIL while matching and takes a
``timeout``; every match here gets the time left before the search's deadline, which the
search tools set with `search_deadline`. ``regex`` expands counted repeats when it compiles
(``a{3000000}`` costs ~800 MB), so the pattern's expanded size is checked first.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import stat
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from jianmu.errors import PatternTimeout, SearchOutOfTime, ToolExecutionError, ToolInputError
from jianmu.tools.base import tool
from jianmu.tools.builtin._paths import (
    PathEscapeError,
    closing_fd,
    dir_fd_at,
    display_path,
    open_beneath,
    real_root,
    resolve_path,
    shown_name,
)
from jianmu.tools.builtin.files import copies, line_heads

if TYPE_CHECKING:
    import regex

__all__ = (
    "GitIgnore",
    "GlobSearchTool",
    "GrepSearchTool",
    "compile_pattern",
    "find_files",
    "find_lines",
    "glob_search",
    "glob_to_regex",
    "grep_search",
    "search_deadline",
    "walk_files",
)


MAX_PATTERN_WEIGHT = 50_000
"""Largest expanded size of a pattern (counted repeats multiplied out), in pattern nodes."""

_DEADLINE: ContextVar[float | None] = ContextVar("jianmu_search_deadline", default=None)
_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})


@contextlib.contextmanager
def search_deadline(seconds: float) -> Iterator[None]:
    """Give every `timed_match`/`timed_search` in this block ``seconds`` in all."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _remaining() -> float | None:
    deadline = _DEADLINE.get()
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise SearchOutOfTime("the search ran out of time")
    return left


def timed_match(rx: regex.Pattern[str], text: str) -> bool:
    """``rx.match(text)`` within the deadline; raises `PatternTimeout` past it."""
    try:
        return rx.match(text, timeout=_remaining()) is not None
    except TimeoutError as exc:
        raise PatternTimeout(str(exc)) from None


def timed_search(rx: regex.Pattern[str], text: str) -> bool:
    """``rx.search(text)`` within the deadline; raises `PatternTimeout` past it."""
    try:
        return rx.search(text, timeout=_remaining()) is not None
    except TimeoutError as exc:
        raise PatternTimeout(str(exc)) from None


def _weight(parsed: Any) -> int:
    """Expanded size of a parsed ``re`` pattern: counted repeats multiply their body."""
    total = 0
    for op, av in parsed:
        if str(op) in _REPEATS:
            low, high, body = av
            count = low if high == _MAXREPEAT else high
            total += max(1, count) * _weight(body)
        else:
            total += 1 + sum(_weight(sub) for sub in _subpatterns(av))
        if total > MAX_PATTERN_WEIGHT:
            return total  # stop early: the product may be astronomically large
    return total


def _subpatterns(value: Any) -> Iterator[Any]:
    if isinstance(value, _SubPattern):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _subpatterns(item)


_parser: Any = importlib.import_module("re._parser")  # Python's own parser (3.11+)
_SubPattern: type = _parser.SubPattern
_MAXREPEAT: int = _parser.MAXREPEAT


def compile_pattern(pattern: str, flags: int = 0, *, what: str = "regular expression") -> Any:
    """Compile a model-supplied ``pattern`` (Python ``re`` syntax) with ``regex``.

    Raises:
        ToolInputError: the pattern is invalid or expands too much when compiled.
    """
    try:
        parsed = _parser.parse(pattern, flags)
    except Exception as exc:  # re.error, RecursionError, OverflowError on absurd input
        msg = getattr(exc, "msg", str(exc))
        pos = getattr(exc, "pos", None)
        where = f" at position {pos}" if pos is not None else ""
        raise ToolInputError(
            f"invalid {what} {pattern!r}: {msg}{where}; escape special characters such "
            "as ( [ . * with a backslash"
        ) from None
    weight = _weight(parsed)
    if weight > MAX_PATTERN_WEIGHT:
        raise ToolInputError(
            f"the {what} {pattern!r} is too large once its counted repeats ({{n}}, {{m,n}}) "
            f"are multiplied out (over {MAX_PATTERN_WEIGHT:,}); use smaller counts, or + and *"
        )
    import regex  # here, not at the top: `import jianmu` does not need it

    try:
        return regex.compile(pattern, flags | regex.VERSION0)
    except regex.error as exc:
        raise ToolInputError(f"invalid {what} {pattern!r}: {exc}") from None


_ALWAYS_SKIP = frozenset({".git", ".hg", ".svn"})


def _translate(pattern: str) -> str:
    """Translate a glob (``*``, ``?``, ``[...]``, ``**``) into a regex body, ``/``-aware."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i) and i + 2 == n and (i == 0 or pattern[i - 1] == "/"):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _compile(body: str) -> Any:
    # `regex` (not `re`): globs like *a*a*a*a*b backtrack badly, and only `regex` matches
    # with a timeout (see _regex.timed_match) and without holding the GIL.
    import regex  # here, not at the top: `import jianmu` does not need it

    return regex.compile(f"^{body}$", regex.VERSION0)


def glob_to_regex(pattern: str) -> Any:
    """Compile a search glob: without a ``/`` it matches a file name at any depth.

    Raises:
        ToolInputError: the glob has an invalid ``[...]`` class.
    """
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    body = _translate(pattern.lstrip("/"))
    if "/" not in pattern.rstrip("/"):
        body = "(?:.*/)?" + body
    import regex

    try:
        return _compile(body)
    except regex.error as exc:
        raise ToolInputError(
            f"invalid glob {pattern!r}: {exc}; check its [...] character classes"
        ) from None


@dataclass(frozen=True)
class _Rule:
    regex: Any  # a compiled `regex` pattern
    negate: bool
    dir_only: bool
    base: str  # folder of the .gitignore, relative to the walk root ("" for the root)


class GitIgnore:
    """The rules of every `.gitignore` met so far; the last matching rule decides."""

    def __init__(self) -> None:
        self._rules: list[_Rule] = []

    def load(self, real_dir: str, rel_dir: str) -> None:
        """Read ``real_dir/.gitignore`` (if any); its rules apply below ``rel_dir``."""
        try:
            fd = os.open(real_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        with closing_fd(fd):
            self.load_at(fd, rel_dir)

    def load_at(self, dir_fd: int, rel_dir: str) -> None:
        """Read the ``.gitignore`` of the folder open as ``dir_fd``; its rules apply below
        ``rel_dir``. A symlinked one is skipped: it might point outside the workspace."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(".gitignore", flags, dir_fd=dir_fd)
        except OSError:
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                return
            fh = os.fdopen(fd, "rb")
        except OSError:
            os.close(fd)
            return
        try:
            with fh:
                lines = fh.read(1_000_000).decode("utf-8", "replace").splitlines()
        except OSError:
            return
        for raw in lines:
            rule = self._parse(raw, rel_dir)
            if rule is not None:
                self._rules.append(rule)

    @staticmethod
    def _parse(raw: str, base: str) -> _Rule | None:
        line = raw.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            return None
        if not line.endswith("\\ "):
            line = line.rstrip()
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        elif line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            return None
        anchored = "/" in line
        body = _translate(line.lstrip("/"))
        if not anchored:
            body = "(?:.*/)?" + body
        import regex

        try:
            compiled = _compile(body)
        except regex.error:
            return None  # git ignores a rule it cannot parse as well
        return _Rule(compiled, negate, dir_only, base)

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether the path ``rel`` (relative to the walk root, ``/``-separated) is ignored."""
        verdict = False
        for rule in self._rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.base:
                if not rel.startswith(rule.base + "/"):
                    continue
                target = rel[len(rule.base) + 1 :]
            else:
                target = rel
            try:
                hit = timed_match(rule.regex, target)
            except SearchOutOfTime:
                raise
            except PatternTimeout:
                raise PatternTimeout(
                    f"the .gitignore rule {rule.regex.pattern!r} took too long on {rel!r}"
                ) from None
            if hit:
                verdict = not rule.negate
        return verdict


@dataclass(frozen=True)
class WalkedFile:
    """A file met by `walk_files`; `dir_fd` is valid until the walk moves on."""

    rel: str
    """Its path relative to the workspace root, ``/``-separated."""
    dir_fd: int
    """A descriptor of its folder, reached without following any symlink."""
    name: str
    """Its name in that folder."""
    target: str | None
    """For a symlink to a file inside the workspace: the real path it leads to."""
    root: str
    """The real workspace root."""

    def open(self, flags: int) -> int:
        """Open the file (the link's target for a symlink) without leaving the workspace.

        Raises:
            OSError, PathEscapeError: it changed since it was listed.
        """
        if self.target is not None:
            return open_beneath(self.target, self.root, flags)
        return os.open(
            self.name, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=self.dir_fd
        )


def walk_files(start: str, root: str, *, gitignore: bool = True) -> Iterator[WalkedFile]:
    """Yield the regular files under the folder ``start`` (a real path inside ``root``), sorted.

    The walk goes by folder descriptors from ``root`` (`os.fwalk`), so a folder swapped for a
    symlink while it runs is never entered. Symlinks are not followed, to folders or files: a
    guard rule that allowed searching ``docs`` did not look at what a link in it names
    (``docs/k -> ../secrets/key``); read such a file by its path instead. Only regular files are
    yielded: opening a FIFO or a device would block or never end. `.gitignore` files from
    ``root`` down are honoured.

    Raises:
        OSError, PathEscapeError: ``start`` cannot be opened as a folder inside ``root``.
    """
    ignore = GitIgnore()
    rel_start = os.path.relpath(start, root)
    parts = [] if rel_start == "." else rel_start.split(os.sep)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        # Rules of the folders between the workspace root and the start folder apply too.
        for k, name in enumerate(parts):
            if gitignore:
                ignore.load_at(fd, "/".join(parts[:k]))
            child = dir_fd_at(fd, name)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    with closing_fd(fd):
        yield from _walk_beneath(fd, "/".join(parts), root, ignore if gitignore else None)


def _walk_beneath(
    start_fd: int, rel_start: str, root: str, ignore: GitIgnore | None
) -> Iterator[WalkedFile]:
    for top, dirnames, filenames, top_fd in os.fwalk(".", dir_fd=start_fd):
        sub = os.path.normpath(top)
        rel_dir = rel_start if sub == "." else "/".join(p for p in (rel_start, sub) if p)
        rel_dir = rel_dir.replace(os.sep, "/")
        if ignore is not None:
            ignore.load_at(top_fd, rel_dir)
        kept = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if d in _ALWAYS_SKIP or _kind(d, top_fd) != stat.S_IFDIR:
                continue  # a symlinked folder is not entered
            if ignore is not None and ignore.ignored(rel, True):
                continue
            kept.append(d)
        dirnames[:] = kept
        for f in sorted(filenames):
            rel = f"{rel_dir}/{f}" if rel_dir else f
            if ignore is not None and ignore.ignored(rel, False):
                continue
            kind = _kind(f, top_fd)
            if kind == stat.S_IFREG:
                yield WalkedFile(rel, top_fd, f, None, root)


def _kind(name: str, dir_fd: int) -> int | None:
    """The file type of ``name`` in the folder ``dir_fd`` (symlinks not followed)."""
    try:
        return stat.S_IFMT(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return None


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


def find_files(pattern: str, root: str = ".", *, timeout: float | None = None) -> str:
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
                    hits.append(shown_name(rel))
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


def find_lines(
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
                        out.append(f"{shown_name(rel)}:{lineno}:{text}")
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


_GLOB_TIMEOUT = 30.0
_GREP_TIMEOUT = 60.0


@tool(
    category="read",
    effect_tags=("file_read",),
    timeout_seconds=_GLOB_TIMEOUT,
    max_result_length=30_000,
)
def glob_search(pattern: str, root: str = ".") -> str:
    """Find files in the workspace whose path matches a glob pattern.

    Files ignored by .gitignore and the .git folder are skipped. Use it to locate files by
    name or extension. Returns the matching paths relative to the workspace root, one per
    line, sorted.

    Args:
        pattern: Glob pattern, e.g. '**/*.md': '*' and '?' match within one path segment,
            '**' across folders; a pattern without '/' matches file names at any depth
            (e.g. '*.py'), with '/' it matches the path relative to root (e.g.
            'src/**/test_*.py').
        root: Folder to search in, relative to the workspace root.

    Returns:
        Matching paths, one per line.
    """
    # the matching gets the tool's timeout, so it stops with its own message first
    return find_files(pattern, root, timeout=_GLOB_TIMEOUT)


@tool(
    category="read",
    effect_tags=("file_read",),
    timeout_seconds=_GREP_TIMEOUT,
    max_result_length=30_000,
)
def grep_search(
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    case_sensitive: bool = True,
    max_matches: Annotated[int, Field(ge=1, le=10_000)] = 100,
) -> str:
    """Search the text files of the workspace for lines matching a regular expression.

    The regex uses Python 're' syntax; binary files and files ignored by .gitignore are
    skipped. Use it to find where a function, setting or message is defined or used. Returns
    one match per line as 'file:line:text'; a final note says when it stopped at max_matches.

    Args:
        pattern: Regular expression to search for.
        path: File or folder to search, relative to the workspace root.
        glob: Only search files matching this glob, e.g. '*.py'.
        case_sensitive: Whether letter case must match.
        max_matches: Stop after this many matching lines.

    Returns:
        Matches as file:line:text lines.
    """
    return find_lines(
        pattern, path, glob, case_sensitive, max_matches, timeout=_GREP_TIMEOUT
    )


GlobSearchTool = copies(glob_search, "GlobSearchTool")
GrepSearchTool = copies(grep_search, "GrepSearchTool")
