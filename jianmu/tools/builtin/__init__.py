"""The built-in tools that `BuiltinToolProvider` registers lazily, safe by default.

File and search tools are confined to the workspace root
(`jianmu.execution.runner.current_workspace`); `bash` and `python_repl` run in a sandbox;
`calculator` is a closed AST evaluator; `ask_user` suspends the run until a person answers.

Each tool is a `@tool` function (``read_file``, ``grep_search``...; ``http_request_tool()``
and ``duckduckgo_search_tool()`` make ones with other settings), except the sandboxed
`BashTool` and `PythonREPLTool` classes. The other names ending in ``Tool`` are what the
tools were called as classes: calling one gives a fresh copy of the tool.

The package loads every built-in tool at once: nothing on a script's import path imports it,
and a lazy package would let the module ``calculator`` hide the tool of that name.
"""

from __future__ import annotations

from jianmu.tools.builtin.ask import AskUserTool, ask_user
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
    "AskUserTool",
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
    "ask_user",
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
