"""Red team, tool names and call shapes (these held; kept so that they keep holding).

A hostile model sends calls through `ToolExecutor` under ``write_file: deny``: prefixed,
punctuated, JSON-ish and glob-like names, two names in one call, a name that is not a
string, duplicate ids, a batch past ``max_tool_calls``; and ``jianmu mcp serve`` clients
call a denied tool by name and by case variants.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

WRITE = {"path": "x.txt", "content": "PWN"}


async def send(ws: Path, actions: list[Any], guard: dict[str, Any]) -> list[str]:
    constraints = Constraints.model_validate({"guard": guard, "execution": {"workdir": str(ws)}})
    state = StateManager(AgentState, {"actions": actions})
    tools = ToolSet.resolve(["write_file", "read_file", "bash"])
    runner = ReactiveRunner(ToolExecutor(tools=tools, constraints=constraints), state,
                            interactive=False)  # fmt: skip
    await runner.run(timeout=60)
    return [m.content or "" for m in runner.state.get("messages")]


@pytest.mark.parametrize(
    "name",
    ["functions.write_file", "write_file.", "write_file/", "write_file:", "tools/write_file",
     "default_api:write_file", '{"name":"write_file"}', "write-file", "WRITE-FILE",
     "writefile", "write_file()", "write_file(path:x)", "write_file*", "write_*", "*",
     "write_file\t", "write_file\r", "write_file#", "mcp__write_file", "builtin__write_file",
     "Write_File", "WRITE_FILE", "w" * 10_000],
)  # fmt: skip
async def test_no_spelling_of_a_denied_tool_writes(tmp_path: Path, name: str) -> None:
    said = await send(tmp_path, [{"id": "a", "name": name, "arguments": WRITE}],
                      {"tool_policy": {"write_file": "deny"}})  # fmt: skip
    assert not (tmp_path / "x.txt").exists()
    assert "unknown tool" in said[0] or "denied" in said[0], said


async def test_odd_call_shapes_never_run_the_denied_tool(tmp_path: Path) -> None:
    shapes = [
        {"id": "b", "function": {"name": "write_file", "arguments": json.dumps(WRITE)}},
        {"id": "c", "name": "read_file", "function": {"name": "write_file", "arguments": WRITE}},
        {"id": "d", "name": "read_file", "tool": "write_file", "arguments": WRITE},
        {"id": "e", "tool": "write_file", "args": WRITE},
        {"id": "f", "name": ["write_file"], "arguments": WRITE},
        {"id": "g", "name": {"name": "write_file"}, "arguments": WRITE},
        {"id": "h", "name": "write_file", "arguments": json.dumps(json.dumps(WRITE))},
        {"id": "i", "name": "write_file", "arguments": [WRITE]},
        ["write_file", WRITE],
        "write_file",
    ]
    said = await send(tmp_path, shapes, {"tool_policy": {"write_file": "deny"}})
    assert len(said) == len(shapes)
    assert not (tmp_path / "x.txt").exists()


async def test_a_batch_past_max_tool_calls_runs_only_the_limit(tmp_path: Path) -> None:
    actions = [{"id": f"i{i}", "name": "write_file",
                "arguments": {"path": f"f{i}.txt", "content": "x"}} for i in range(40)]
    actions += [{"id": "i0", "name": "WRITE_FILE",
                 "arguments": {"path": "dup.txt", "content": "x"}}] * 5  # fmt: skip
    said = await send(tmp_path, actions, {"max_tool_calls": 3})
    assert len(list(tmp_path.iterdir())) == 3
    assert sum("max_tool_calls" in s for s in said) == len(actions) - 3


async def test_a_rate_limit_written_in_upper_case_counts_every_spelling(tmp_path: Path) -> None:
    actions = [{"id": f"i{i}", "name": name, "arguments": {"path": f"f{i}.txt", "content": "x"}}
               for i, name in enumerate(["write_file", "WRITE_FILE", "Write_File"])]
    await send(tmp_path, actions, {"rate_limits": {"WRITE_FILE": 2}})
    assert len(list(tmp_path.iterdir())) == 2


async def test_an_unknown_tool_error_names_only_the_tools_the_model_may_see(
    tmp_path: Path,
) -> None:
    """The observation for an unknown name lists the tools available: a tool the policy hides
    from the model (denied here) is not among them, as it is not among the tools offered
    (it was listed, telling the model of a tool it must not know)."""
    said = await send(tmp_path, [{"id": "a", "name": "delete_everything", "arguments": {}}],
                      {"tool_policy": {"write_file": "deny"}})  # fmt: skip
    assert "unknown tool" in said[0], said
    assert "read_file" in said[0] and "write_file" not in said[0], said
