"""Code search tools: find files by glob and lines by regex, honouring `.gitignore`."""

from __future__ import annotations

import os
import re

from jianmu.errors import ToolExecutionError, ToolInputError
from jianmu.tools.base import Tool
from jianmu.tools.builtin._gitignore import glob_to_regex, walk_files
from jianmu.tools.builtin._paths import display_path, real_root, resolve_path

__all__ = ("GlobSearchTool", "GrepSearchTool", "glob_search", "grep_search")

_MAX_GLOB_RESULTS = 1000
_MAX_FILE_BYTES = 10 * 1024 * 1024
_MAX_LINE_SHOWN = 300
_MAX_LINE_SCANNED = 20_000  # bounds the work of one regex match on minified files


def _search_root(root: str) -> tuple[str, str]:
    ws = real_root()
    real = resolve_path(root or ".", root=ws)
    if not os.path.exists(real):
        raise ToolExecutionError(f"{root!r} does not exist; check the path with list_dir")
    return ws, real


def glob_search(pattern: str, root: str = ".") -> str:
    """Files under ``root`` whose path (relative to ``root``) matches ``pattern``."""
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
    regex = glob_to_regex(pattern)
    hits: list[str] = []
    more = 0
    for _real_file, rel in walk_files(real, ws):
        rel_to_start = os.path.relpath(os.path.join(ws, rel), real).replace(os.sep, "/")
        if not regex.match(rel_to_start):
            continue
        if len(hits) < _MAX_GLOB_RESULTS:
            hits.append(rel)
        else:
            more += 1
    if not hits:
        return f"No files match {pattern!r} under {display_path(real, ws)!r}"
    out = "\n".join(hits)
    if more:
        out += f"\n[{more} more files not shown; narrow the pattern or the root]"
    return out


def _is_binary(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return b"\x00" in fh.read(8192)
    except OSError:
        return True


def grep_search(
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    case_sensitive: bool = True,
    max_matches: int = 100,
) -> str:
    """Lines matching the regex ``pattern`` in files under ``path``, as file:line:text."""
    if not pattern:
        raise ToolInputError("pattern is empty; give a regular expression such as 'def \\w+'")
    if max_matches < 1:
        raise ToolInputError(f"max_matches must be 1 or more, got {max_matches!r}")
    try:
        regex = re.compile(pattern, 0 if case_sensitive else re.IGNORECASE)
    except re.error as exc:
        raise ToolInputError(
            f"invalid regular expression {pattern!r}: {exc.msg} at position {exc.pos}; "
            "escape special characters such as ( [ . * with a backslash"
        ) from None
    file_re = glob_to_regex(glob) if glob else None
    ws, real = _search_root(path)
    if os.path.isdir(real):
        files = walk_files(real, ws)
    else:
        files = iter([(real, display_path(real, ws))])
    out: list[str] = []
    scanned = 0
    truncated = False
    for real_file, rel in files:
        if file_re is not None and not file_re.match(rel):
            continue
        try:
            if os.path.getsize(real_file) > _MAX_FILE_BYTES or _is_binary(real_file):
                continue
            fh = open(real_file, encoding="utf-8", errors="replace")
        except OSError:
            continue
        scanned += 1
        with fh:
            for lineno, line in enumerate(fh, 1):
                text = line.rstrip("\n")
                if not regex.search(text[:_MAX_LINE_SCANNED]):
                    continue
                if len(out) >= max_matches:
                    truncated = True
                    break
                if len(text) > _MAX_LINE_SHOWN:
                    text = text[:_MAX_LINE_SHOWN] + f"…[+{len(text) - _MAX_LINE_SHOWN} chars]"
                out.append(f"{rel}:{lineno}:{text}")
        if truncated:
            break
    if not out:
        where = display_path(real, ws)
        return f"No matches for {pattern!r} in {where!r} ({scanned} files searched)"
    result = "\n".join(out)
    if truncated:
        result += (
            f"\n[stopped at max_matches={max_matches}; more matches exist — narrow the "
            "pattern, the path or the glob, or raise max_matches]"
        )
    return result


class GlobSearchTool(Tool):
    """Find workspace files by a glob pattern."""

    name = "glob_search"
    description = (
        "Find files in the workspace whose path matches a glob pattern, skipping files "
        "ignored by .gitignore and the .git folder. Use it to locate files by name or "
        "extension. Args: pattern (a glob: '*' and '?' match within one path segment, '**' "
        "across folders; a pattern without '/' matches file names at any depth, e.g. "
        "'*.py'; with '/' it matches the path relative to root, e.g. 'src/**/test_*.py'), "
        "root (folder to search, relative to the workspace root, default '.'). Returns the "
        "matching paths relative to the workspace root, one per line, sorted."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern, e.g. '**/*.md'."},
            "root": {
                "type": "string",
                "default": ".",
                "description": "Folder to search in, relative to the workspace root.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    output_schema = {"type": "string", "description": "Matching paths, one per line."}
    category = "read"
    permission = "auto"
    effect_tags = ("file_read",)
    parallel_safe = True
    timeout_seconds = 30.0
    max_result_length = 30_000

    def run(self, pattern: str, root: str = ".") -> str:
        """Return the files matching ``pattern`` under ``root``."""
        return glob_search(pattern, root)


class GrepSearchTool(Tool):
    """Search file contents in the workspace with a regular expression."""

    name = "grep_search"
    description = (
        "Search the text files of the workspace for lines matching a regular expression "
        "(Python 're' syntax), skipping binary files and files ignored by .gitignore. Use it "
        "to find where a function, setting or message is defined or used. Args: pattern (the "
        "regex), path (file or folder to search, relative to the workspace root, default "
        "'.'), glob (optional file-name filter such as '*.py'), case_sensitive (default "
        "true), max_matches (stop after this many, default 100). Returns one match per line "
        "as 'file:line:text'; a final note says when it stopped at max_matches."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for."},
            "path": {
                "type": "string",
                "default": ".",
                "description": "File or folder to search, relative to the workspace root.",
            },
            "glob": {
                "type": "string",
                "description": "Only search files matching this glob, e.g. '*.py'.",
            },
            "case_sensitive": {
                "type": "boolean",
                "default": True,
                "description": "Whether letter case must match.",
            },
            "max_matches": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10_000,
                "default": 100,
                "description": "Stop after this many matching lines.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    output_schema = {"type": "string", "description": "Matches as file:line:text lines."}
    category = "read"
    permission = "auto"
    effect_tags = ("file_read",)
    parallel_safe = True
    timeout_seconds = 60.0
    max_result_length = 30_000

    def run(
        self,
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        case_sensitive: bool = True,
        max_matches: int = 100,
    ) -> str:
        """Return the matching lines."""
        return grep_search(pattern, path, glob, case_sensitive, max_matches)
