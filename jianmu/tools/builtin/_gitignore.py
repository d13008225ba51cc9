"""`.gitignore` matching and a confined directory walk for the search tools."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import regex

from jianmu.errors import ToolInputError
from jianmu.tools.builtin._paths import is_inside
from jianmu.tools.builtin._regex import PatternTimeout, SearchOutOfTime, timed_match

__all__ = ("GitIgnore", "glob_to_regex", "walk_files")

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
        path = os.path.join(real_dir, ".gitignore")
        if os.path.islink(path) or not os.path.isfile(path):
            return  # a symlinked .gitignore might point outside the workspace
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read(1_000_000).splitlines()
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


def walk_files(
    start: str, root: str, *, gitignore: bool = True
) -> Iterator[tuple[str, str]]:
    """Yield ``(real_path, path_relative_to_root)`` for files under ``start``, sorted.

    Symlinked folders are not entered; symlinked files are yielded only when their real
    location is inside ``root``. Only regular files are yielded: opening a FIFO or a device
    would block or never end. `.gitignore` files from ``root`` down are honoured.
    """
    ignore = GitIgnore()
    if gitignore:
        # Rules of the folders between the workspace root and the start folder apply too.
        rel_start = os.path.relpath(start, root)
        parts = [] if rel_start == "." else rel_start.split(os.sep)
        for k in range(len(parts)):
            rel = "/".join(parts[:k])
            ignore.load(os.path.join(root, *parts[:k]), rel)

    def rel_of(path: str) -> str:
        rel = os.path.relpath(path, root)
        return "" if rel == "." else rel.replace(os.sep, "/")

    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        rel_dir = rel_of(dirpath)
        if gitignore:
            ignore.load(dirpath, rel_dir)
        kept = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if d in _ALWAYS_SKIP or os.path.islink(os.path.join(dirpath, d)):
                continue
            if gitignore and ignore.ignored(rel, True):
                continue
            kept.append(d)
        dirnames[:] = kept
        for f in sorted(filenames):
            full = os.path.join(dirpath, f)
            rel = f"{rel_dir}/{f}" if rel_dir else f
            if gitignore and ignore.ignored(rel, False):
                continue
            if os.path.islink(full):
                real = os.path.realpath(full)
                if not is_inside(real, root) or not os.path.isfile(real):
                    continue  # isfile follows the link: regular files only
                yield real, rel
            elif _is_regular(full):
                yield full, rel


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
