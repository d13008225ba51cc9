"""Code search tools: find files by glob and lines by regex, honouring `.gitignore`."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from jianmu.tools.base import tool
from jianmu.tools.builtin import _search
from jianmu.tools.builtin._common import copies

__all__ = ("GlobSearchTool", "GrepSearchTool", "glob_search", "grep_search")

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
    return _search.glob_search(pattern, root, timeout=_GLOB_TIMEOUT)


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
    return _search.grep_search(
        pattern, path, glob, case_sensitive, max_matches, timeout=_GREP_TIMEOUT
    )


GlobSearchTool = copies(glob_search, "GlobSearchTool")
GrepSearchTool = copies(grep_search, "GrepSearchTool")
