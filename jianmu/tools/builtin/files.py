"""File tools: read, write, list, inspect and edit files inside the workspace root.

Every path is confined to `jianmu.execution.workspace.current_workspace()` (set by the
`ToolRunner` from ``ExecutionConstraints.workdir``; the current folder otherwise): ``..``,
absolute paths outside it, and symlinks leading out are refused with a clear error. Files are
then reached by folder descriptors from the root without following symlinks (see `_paths`),
so another process swapping a folder for a link cannot lead a tool outside.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from jianmu.tools.base import tool
from jianmu.tools.builtin import _fileops
from jianmu.tools.builtin._common import WorkspacePath, copies

__all__ = (
    "FileInfoTool",
    "ListDirTool",
    "ReadFileTool",
    "StrReplaceTool",
    "WriteFileTool",
    "file_info",
    "list_dir",
    "read_file",
    "str_replace",
    "write_file",
)


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
    return _fileops.read_file(path, offset, limit)


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
    return _fileops.append_or_write(path, content, mode)


@tool(
    category="read", effect_tags=("file_read",), timeout_seconds=30.0, max_result_length=30_000
)
def list_dir(
    path: WorkspacePath = ".",
    depth: Annotated[int, Field(ge=1, le=10)] = 1,
    ignore: list[str] | None = None,
) -> str:
    """List the files and folders in a workspace folder as an indented tree.

    Folders end with '/', files show their size, symlinks show their target. Use it to find
    your way around a project before reading files. Returns the tree as text.

    Args:
        path: Folder relative to the workspace root.
        depth: How many levels to descend; 1 lists only the folder itself.
        ignore: Glob patterns (e.g. '*.pyc', 'build') of entries to omit; by default .git,
            __pycache__, .venv, node_modules and .jianmu are left out.

    Returns:
        The folder's tree.
    """
    return _fileops.list_dir(path, depth, ignore)


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
    return _fileops.file_info(path)


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
    return _fileops.str_replace(path, old, new, count)


ReadFileTool = copies(read_file, "ReadFileTool")
WriteFileTool = copies(write_file, "WriteFileTool")
ListDirTool = copies(list_dir, "ListDirTool")
FileInfoTool = copies(file_info, "FileInfoTool")
StrReplaceTool = copies(str_replace, "StrReplaceTool")
