"""A script imports only what it uses: building agents loads no MCP server, no built-in tool, no
sandbox, no optional extra and no pydantic validator (issue "Import only what is used")."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

SCRIPT = ("from jianmu import AgentState, ReactiveRunner, ScriptedLLM, SkillNode, StateManager, "
          "ToolExecutor, tool")

# Jianmu modules a script that builds agents does not need until it calls them.
HEAVY_MODULES = (
    "jianmu.mcp",  # the MCP client and server, skill content served over MCP
    "jianmu.tools.builtin",  # the built-in tools
    "jianmu.execution.sandbox",
    "jianmu.execution.local_sandbox",
    "jianmu.execution.docker_sandbox",
    "jianmu.execution.image",
    "jianmu.execution._process",
    "jianmu.execution._bwrap",
    "jianmu.execution._warm",
    "jianmu.execution._docker",
    "jianmu.execution._supervisor",
    "jianmu.guard._shell",  # the bash grammar, for the first shell rule
    "jianmu.skills.bt",
    "jianmu.skills.loader",
    "jianmu.skills.catalog",
    "jianmu.skills.skill_tools",
    "jianmu.nodes.react",
    "jianmu.nodes.agent_llm",
    "jianmu.llm.openai",
    "jianmu.llm.anthropic",
    "jianmu.runtime.checkpoint",
    "jianmu.studio",
    "jianmu.durable",
)
# Libraries only some calls need: extras, docstring parsing, SQLite, the bash grammar, and what
# `importlib.metadata` drags in (pydantic reads plugins from it when it builds a validator).
HEAVY_LIBRARIES = (
    "docker", "mcp", "openai", "anthropic", "httpx", "starlette", "dbos", "rich", "jsonschema",
    "tree_sitter", "tree_sitter_bash", "docstring_parser", "sqlite3", "email", "zipfile",
    "difflib", "csv", "importlib.metadata",
)
LAZY_PACKAGES = (
    "jianmu", "jianmu.execution", "jianmu.guard", "jianmu.llm", "jianmu.mcp", "jianmu.nodes",
    "jianmu.runtime", "jianmu.skills", "jianmu.tools",
)


def _modules_after(code: str) -> set[str]:
    """``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def _under(loaded: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == r or m.startswith(f"{r}.") for r in roots))


@pytest.fixture(scope="module")
def loaded() -> set[str]:
    return _modules_after(SCRIPT)


def test_the_script_import_loads_no_heavy_jianmu_module(loaded: set[str]) -> None:
    assert _under(loaded, HEAVY_MODULES) == []


def test_the_script_import_loads_no_library_only_some_calls_need(loaded: set[str]) -> None:
    assert _under(loaded, HEAVY_LIBRARIES) == []


def test_the_script_import_builds_no_pydantic_validator(loaded: set[str]) -> None:
    # pydantic loads its plugin loader when it builds the first validator (or TypeAdapter).
    assert "pydantic.plugin._loader" not in loaded


def test_the_script_runs_a_tool_call_after_the_light_import() -> None:
    code = (
        f"{SCRIPT}\n"
        "@tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add two numbers.\n\n    Args:\n        a: The first.\n"
        "        b: The second.\n    '''\n"
        "    return a + b\n"
        "state = StateManager(AgentState, {'actions': [\n"
        "    {'id': 'c1', 'name': 'add', 'arguments': {'a': 2, 'b': 3}}]})\n"
        "result = ReactiveRunner(ToolExecutor(tools=[add]), state).run_sync()\n"
        "assert result.ok and state.get('messages')[0].content == '5', state.get('messages')\n"
        "assert add.tool_spec.input_schema['properties']['a']['description'] == 'The first.'\n"
    )
    assert "jianmu.nodes.tool_executor" in _modules_after(code)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_each_lazy_name_is_the_object_of_its_module(package: str) -> None:
    module = importlib.import_module(package)
    holders: dict[str, tuple[str, ...]] = module._HOLDERS
    assert sorted(n for names in holders.values() for n in names) == sorted(module.__all__)
    for holder, names in holders.items():
        for name in names:
            assert getattr(module, name) is getattr(importlib.import_module(holder), name), name
    assert set(module.__all__) <= set(dir(module))


def test_a_name_spelled_like_its_module_stays_the_name_after_the_module_loads() -> None:
    code = ("import jianmu.tools.builtin as b\n"
            "import jianmu.tools.builtin.calculator\n"
            "from jianmu.tools import Tool\n"
            "assert isinstance(b.calculator, Tool), b.calculator\n")
    _modules_after(code)


def test_a_sub_module_resolves_as_an_attribute_of_its_lazy_package() -> None:
    code = ("import jianmu.tools\n"
            "assert jianmu.tools.schema.__name__ == 'jianmu.tools.schema'\n")
    assert "jianmu.tools.schema" in _modules_after(code)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        importlib.import_module("jianmu.nodes").nothing_here  # noqa: B018
