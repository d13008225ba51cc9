"""The built-in tools that `BuiltinToolProvider` registers lazily, safe by default.

File and search tools are confined to the workspace root
(`jianmu.execution.runner.current_workspace`); `bash` and `python_repl` run in a sandbox;
`calculator` is a closed AST evaluator.

Each tool is a `@tool` function (``read_file``, ``grep_search``...; ``http_request_tool()``
and ``duckduckgo_search_tool()`` make ones with other settings), except the sandboxed
`BashTool` and `PythonREPLTool` classes. The other names ending in ``Tool`` are what the
tools were called as classes: calling one gives a fresh copy of the tool.

Its names load on first use (module ``__getattr__``): importing one imports only the module
that holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu._lazy import lazy_names

if TYPE_CHECKING:
    from jianmu.tools.builtin.bash import BashTool
    from jianmu.tools.builtin.calculator import CalculatorTool, calculator
    from jianmu.tools.builtin.files import (
        FileInfoTool,
        ListDirTool,
        ReadFileTool,
        StrReplaceTool,
        WriteFileTool,
        file_info,
        list_dir,
        read_file,
        str_replace,
        write_file,
    )
    from jianmu.tools.builtin.http import HTTPTool, http_request, http_request_tool
    from jianmu.tools.builtin.python_repl import PythonREPLTool
    from jianmu.tools.builtin.search import GlobSearchTool, GrepSearchTool, glob_search, grep_search
    from jianmu.tools.builtin.web_search import (
        DuckDuckGoSearchTool,
        duckduckgo_search,
        duckduckgo_search_tool,
    )

__all__ = (
    "BashTool",
    "CalculatorTool",
    "DuckDuckGoSearchTool",
    "FileInfoTool",
    "GlobSearchTool",
    "GrepSearchTool",
    "HTTPTool",
    "ListDirTool",
    "PythonREPLTool",
    "ReadFileTool",
    "StrReplaceTool",
    "WriteFileTool",
    "calculator",
    "duckduckgo_search",
    "duckduckgo_search_tool",
    "file_info",
    "glob_search",
    "grep_search",
    "http_request",
    "http_request_tool",
    "list_dir",
    "read_file",
    "str_replace",
    "write_file",
)

_HOLDERS = {
    "jianmu.tools.builtin.calculator": ("CalculatorTool", "calculator"),
    "jianmu.tools.builtin.bash": ("BashTool",),
    "jianmu.tools.builtin.files": (
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
    ),
    "jianmu.tools.builtin.http": ("HTTPTool", "http_request", "http_request_tool"),
    "jianmu.tools.builtin.python_repl": ("PythonREPLTool",),
    "jianmu.tools.builtin.search": (
        "GlobSearchTool",
        "GrepSearchTool",
        "glob_search",
        "grep_search",
    ),
    "jianmu.tools.builtin.web_search": (
        "DuckDuckGoSearchTool",
        "duckduckgo_search",
        "duckduckgo_search_tool",
    ),
}
__getattr__, __dir__ = lazy_names(__name__, _HOLDERS, __all__)
