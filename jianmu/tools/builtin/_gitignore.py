"""`.gitignore` matching and a confined directory walk for the search tools."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jianmu.errors import ToolInputError
from jianmu.tools.builtin._paths import (
    closing_fd,
    dir_fd_at,
    open_beneath,
)
from jianmu.tools.builtin._regex import PatternTimeout, SearchOutOfTime, timed_match

__all__ = ("GitIgnore", "WalkedFile", "glob_to_regex", "walk_files")

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
        yield from _walk(fd, "/".join(parts), root, ignore if gitignore else None)


def _walk(
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
