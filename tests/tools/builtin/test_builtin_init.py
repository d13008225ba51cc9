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
}


def test_exports_every_builtin_tool() -> None:
    assert set(builtin.__all__) == set(NAMES)
    for cls_name, tool_name in NAMES.items():
        tool = getattr(builtin, cls_name)()
        assert isinstance(tool, Tool) and tool.name == tool_name
        # Every description says what, when, args and returns, and every parameter is described.
        assert len(tool.description) > 150 and "Returns" in tool.description
        tool.check_definition(require_parameter_descriptions=True)
        for prop in tool.parameters["properties"].values():
            assert prop.get("description")


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
