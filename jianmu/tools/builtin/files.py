"""File tools: read, write, list, inspect and edit files inside the workspace root.

Every path is confined to `jianmu.execution.workspace.current_workspace()` (set by the
`ToolRunner` from ``ExecutionConstraints.workdir``; the current folder otherwise): ``..``,
absolute paths outside it, and symlinks leading out are refused with a clear error. Files are
then reached by folder descriptors from the root without following symlinks (see `_paths`),
so another process swapping a folder for a link cannot lead a tool outside.
"""

from __future__ import annotations

from typing import Any

from jianmu.tools.base import Tool
from jianmu.tools.builtin import _fileops

__all__ = ("FileInfoTool", "ListDirTool", "ReadFileTool", "StrReplaceTool", "WriteFileTool")

_PATH = {
    "type": "string",
    "description": "Path relative to the workspace root, e.g. 'src/app.py'. Paths outside "
    "the workspace (via '..', absolute paths or symlinks) are refused.",
}


class ReadFileTool(Tool):
    """Read a text file from the workspace."""

    name = "read_file"
    description = (
        "Read a UTF-8 text file from the workspace. Use it to look at source code, configs "
        "or notes before answering or editing. Args: path (relative to the workspace root), "
        "offset (first line to read, 1-based, default 1), limit (how many lines, default "
        "500). Returns the lines' text; when the file has more lines, a final note says "
        "which lines were shown and how many remain, with the offset to continue from. "
        "Binary and non-UTF-8 files are refused."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "offset": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "First line to read, counting from 1.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 5000,
                "default": 500,
                "description": "Maximum number of lines to return.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    output_schema = {"type": "string", "description": "The requested lines of the file."}
    category = "read"
    permission = "auto"
    effect_tags = ("file_read",)
    parallel_safe = True
    timeout_seconds = 30.0
    max_result_length = 50_000

    def run(self, path: str, offset: int = 1, limit: int = 500) -> str:
        """Return the requested lines of ``path``."""
        return _fileops.read_file(path, offset, limit)


class WriteFileTool(Tool):
    """Write or append to a text file in the workspace, atomically."""

    name = "write_file"
    description = (
        "Create or change a text file in the workspace. Use it to save new files or replace "
        "a file's whole content; for a small edit in an existing file prefer str_replace. "
        "Args: path (relative to the workspace root; missing parent folders are created), "
        "content (the text to write), mode ('overwrite', the default, or 'append'). The "
        "write is atomic: a temporary file is written and then renamed over the target, so "
        "a reader never sees half a file. Files inside .git and .jianmu folders cannot be "
        "written. Returns what was written and where."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "The text to write (UTF-8)."},
            "mode": {
                "type": "string",
                "enum": ["overwrite", "append"],
                "default": "overwrite",
                "description": "'overwrite' replaces the file; 'append' adds to its end.",
            },
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    output_schema = {"type": "string", "description": "A one-line summary of the write."}
    category = "write"
    permission = "auto"
    effect_tags = ("file_write",)
    parallel_safe = False
    timeout_seconds = 30.0
    max_result_length = 2_000

    def run(self, path: str, content: str, mode: str = "overwrite") -> str:
        """Write ``content`` to ``path``."""
        return _fileops.append_or_write(path, content, mode)


class ListDirTool(Tool):
    """List a folder of the workspace as a tree."""

    name = "list_dir"
    description = (
        "List the files and folders in a workspace folder as an indented tree (folders end "
        "with '/', files show their size, symlinks show their target). Use it to find your "
        "way around a project before reading files. Args: path (folder relative to the "
        "workspace root, default '.'), depth (levels to descend, default 1), ignore (glob "
        "patterns of names to leave out; default skips .git, __pycache__, .venv, "
        "node_modules and .jianmu). Returns the tree as text."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {**_PATH, "default": "."},
            "depth": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10,
                "default": 1,
                "description": "How many levels to descend; 1 lists only the folder itself.",
            },
            "ignore": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Glob patterns (e.g. '*.pyc', 'build') of entries to omit.",
            },
        },
        "required": [],
        "additionalProperties": False,
    }
    output_schema = {"type": "string", "description": "The folder's tree."}
    category = "read"
    permission = "auto"
    effect_tags = ("file_read",)
    parallel_safe = True
    timeout_seconds = 30.0
    max_result_length = 30_000

    def run(self, path: str = ".", depth: int = 1, ignore: list[str] | None = None) -> str:
        """Return the tree under ``path``."""
        return _fileops.list_dir(path, depth, ignore)


class FileInfoTool(Tool):
    """Describe a file or folder of the workspace."""

    name = "file_info"
    description = (
        "Describe a file or folder in the workspace without reading it all: type "
        "(file/directory/other), size, last modified time (UTC, ISO 8601), permissions, "
        "and for files the line count and encoding (ascii, utf-8, utf-16, binary, ...). Use "
        "it to check a file before reading or editing it. Args: path (relative to the "
        "workspace root). Returns a JSON object with those fields."
    )
    input_schema = {
        "type": "object",
        "properties": {"path": _PATH},
        "required": ["path"],
        "additionalProperties": False,
    }
    output_schema = {
        "type": "object",
        "description": "path, type, size, modified, permissions, lines, encoding.",
    }
    category = "read"
    permission = "auto"
    effect_tags = ("file_read",)
    parallel_safe = True
    timeout_seconds = 30.0
    max_result_length = 2_000

    def run(self, path: str) -> dict[str, Any]:
        """Return facts about ``path``."""
        return _fileops.file_info(path)


class StrReplaceTool(Tool):
    """Replace an exact piece of text in a workspace file."""

    name = "str_replace"
    description = (
        "Edit a text file by replacing an exact piece of text with another. Use it for "
        "targeted edits instead of rewriting the whole file. Args: path (relative to the "
        "workspace root), old (the exact text to replace, whitespace included; it must "
        "occur exactly once, so include enough surrounding lines to make it unique), new "
        "(the replacement text), count (optional: the number of occurrences you expect and "
        "want replaced when old occurs more than once). If old is missing or occurs a "
        "different number of times, nothing changes and the error says how many times it "
        "occurs. Files inside .git and .jianmu folders cannot be edited. Returns how many "
        "occurrences were replaced and on which lines."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "old": {"type": "string", "description": "The exact text to replace."},
            "new": {"type": "string", "description": "The text to put in its place."},
            "count": {
                "type": "integer",
                "minimum": 1,
                "description": "How many occurrences to replace; they must all exist. "
                "Leave it out to require exactly one.",
            },
        },
        "required": ["path", "old", "new"],
        "additionalProperties": False,
    }
    output_schema = {"type": "string", "description": "A one-line summary of the edit."}
    category = "write"
    permission = "auto"
    effect_tags = ("file_write",)
    parallel_safe = False
    timeout_seconds = 30.0
    max_result_length = 2_000

    def run(self, path: str, old: str, new: str, count: int | None = None) -> str:
        """Replace ``old`` by ``new`` in ``path``."""
        return _fileops.str_replace(path, old, new, count)
