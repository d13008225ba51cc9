"""Red team, agents that call themselves: a sub-agent built by a factory that offers itself
again, so a hostile model nests calls without end.

Fixed here: an agent tool's call counts as made only when it ends, which for a chain of
nested calls is never, so ``max_tool_calls`` held nothing and the nesting had no floor. Now
the calls of enclosing runs still running count against the sub-agent's guard, and agent
tools nest at most `MAX_AGENT_DEPTH` deep. The depth cap alone bounds the work only by each
level's iterations multiplied together (exponential), so a run also starts at most
`MAX_AGENT_RUNS` sub-agent runs, at every depth together.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, agents, create_react_node
from jianmu.nodes.agents import MAX_AGENT_DEPTH
from jianmu.runtime import SQLiteCheckpointer
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
TURNS: list[int] = []
RAN: list[str] = []


@tool(read_only=False)
def deploy(target: str) -> str:
    """Deploy.

    Args:
        target: where.
    """
    RAN.append(target)
    return "deployed"


def again(_messages: list[Any]) -> list[dict[str, Any]]:
    TURNS.append(1)
    return [{"name": "me", "arguments": {"input": "again"}},
            {"name": "deploy", "arguments": {"target": "prod"}}]


def myself() -> Any:
    me = agent_tool(myself, name="me", description="Asks myself.")
    return create_react_node(ScriptedLLM([again] * 10_000), [me, deploy], name="me",
                             max_iterations=1)


async def run(constraints: dict[str, Any], checkpoints: Path | None = None) -> Any:
    TURNS.clear()
    RAN.clear()
    me = agent_tool(myself, name="me", description="Asks myself.")
    lead = create_react_node(ScriptedLLM([again, "done"]), [me, deploy], name="lead",
                             constraints=Constraints.model_validate(constraints))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    if checkpoints is None:
        return await ReactiveRunner(lead, state).run(), state
    with SQLiteCheckpointer(checkpoints) as store:  # each call is saved as it ends
        return await ReactiveRunner(lead, state, checkpointer=store).run(), state


@pytest.mark.parametrize("saved", [False, True])
async def test_max_tool_calls_holds_across_nested_agent_calls(saved: bool, tmp_path: Path) -> None:
    result, state = await run({"guard": {"max_tool_calls": 3}},
                              tmp_path / "runs.sqlite" if saved else None)
    assert result.ok
    # the lead's two calls and the first level's call to itself use the three; the second
    # level's calls are all denied, so it is the last
    assert len(TURNS) == 3 and RAN == ["prod"]
    assert state.get("guard_ledger").calls_made == 3


async def test_agent_tools_nest_only_so_deep() -> None:
    result, _state = await run({})
    assert result.ok
    # one turn per level (max_iterations=1), the deepest level refused, each level deploys
    assert len(TURNS) == MAX_AGENT_DEPTH + 1
    assert len(RAN) == MAX_AGENT_DEPTH + 1


def fan_out(_messages: list[Any]) -> list[dict[str, Any]]:
    TURNS.append(1)
    return [{"name": "me", "arguments": {"input": f"again {i}"}} for i in range(3)]


def fanning() -> Any:
    me = agent_tool(fanning, name="me", description="Asks myself, three times at once.")
    return create_react_node(ScriptedLLM([fan_out] * 10_000), [me], name="me", max_iterations=1)


async def test_a_run_starts_only_so_many_sub_agent_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three calls to itself per level would be 3**8 runs under the depth cap alone."""
    monkeypatch.setattr(agents, "MAX_AGENT_RUNS", 20)
    TURNS.clear()
    me = agent_tool(fanning, name="me", description="Asks myself, three times at once.")
    lead = create_react_node(ScriptedLLM([fan_out, "done", fan_out, "done"]), [me], name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(lead, state)
    assert (await runner.run()).ok
    assert len(TURNS) == 1 + 20  # the lead's turn and one per sub-agent run
    # the refusals are observations of the sub-agents that asked for one run too many
    assert "already started 20 agent runs" in json.dumps(state.snapshot(), default=str)
    # the next turn of the conversation is a new run of the tree, with a count of its own
    TURNS.clear()
    runner.send("again")
    assert (await runner.run()).ok
    assert len(TURNS) == 1 + 20
