"""Tests for jianmu/tools/builtin/__init__.py: the exports and lazy optional imports."""

from __future__ import annotations

import subprocess
import sys

import jianmu.tools.builtin as builtin
from jianmu.tools.base import Tool

NAMES = {
    "ReadFileTool": "read_file",
    "WriteFileTool": "write_file",
    "ListDirTool": "list_dir",
    "GlobSearchTool": "glob_search",
    "GrepSearchTool": "grep_search",
    "FileInfoTool": "file_info",
    "StrReplaceTool": "str_replace",
    "PythonREPLTool": "python_repl",
    "CalculatorTool": "calculator",
    "BashTool": "bash",
    "HTTPTool": "http_request",
    "DuckDuckGoSearchTool": "duckduckgo_search",
    "AskUserTool": "ask_user",
}


# The tools as objects (the @tool functions) and the factories of configurable ones.
TOOLS = {
    "read_file": "read_file",
    "write_file": "write_file",
    "list_dir": "list_dir",
    "file_info": "file_info",
    "str_replace": "str_replace",
    "glob_search": "glob_search",
    "grep_search": "grep_search",
    "calculator": "calculator",
    "http_request": "http_request",
    "duckduckgo_search": "duckduckgo_search",
    "ask_user": "ask_user",
}
FACTORIES = {"http_request_tool": "http_request", "duckduckgo_search_tool": "duckduckgo_search"}


def test_exports_every_builtin_tool() -> None:
    assert set(builtin.__all__) == set(NAMES) | set(TOOLS) | set(FACTORIES)
    for attr, tool_name in TOOLS.items():
        made = getattr(builtin, attr)
        assert isinstance(made, Tool) and made.name == tool_name
    for attr, tool_name in FACTORIES.items():
        assert getattr(builtin, attr)().name == tool_name
    for cls_name, tool_name in NAMES.items():
        tool = getattr(builtin, cls_name)()
        assert isinstance(tool, Tool) and tool.name == tool_name
        # Every description says what, when, args and returns, and every parameter is described.
        assert len(tool.description) > 150 and "Returns" in tool.description
        tool.check_definition(require_parameter_descriptions=True)
        for prop in tool.parameters["properties"].values():
            assert prop.get("description")
        # the old class name gives a tool of one's own: changing it leaves the next alone
        tool.max_result_length = 7
        assert getattr(builtin, cls_name)().max_result_length != 7


def test_importing_the_tools_loads_no_optional_or_network_module() -> None:
    code = (
        "import sys, jianmu.tools.builtin\n"
        "heavy = [m for m in ('httpx', 'ddgs', 'docker') if m in sys.modules]\n"
        "print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
