"""The built-in tools that `BuiltinToolProvider` registers lazily, safe by default.

File and search tools are confined to the workspace root
(`jianmu.execution.workspace.current_workspace`); `bash` and `python_repl` run in a sandbox;
`calculator` is a closed AST evaluator.
"""

from __future__ import annotations

from jianmu.tools.builtin.bash import BashTool
from jianmu.tools.builtin.calculator import CalculatorTool
from jianmu.tools.builtin.files import (
    FileInfoTool,
    ListDirTool,
    ReadFileTool,
    StrReplaceTool,
    WriteFileTool,
)
from jianmu.tools.builtin.http import HTTPTool
from jianmu.tools.builtin.python_repl import PythonREPLTool
from jianmu.tools.builtin.search import GlobSearchTool, GrepSearchTool
from jianmu.tools.builtin.web_search import DuckDuckGoSearchTool

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
)
