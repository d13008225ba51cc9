"""Red team, call ids across an agent tool: a sub-agent's request is named
``<agent>/<call>/<its call id>`` on the caller's channel, so a lead model that picks its own
call id to read like one could have a person's approval of its call also approve the
sub-agent's; and a model's very long ids name state namespaces, requests and steps.

Fixed here: the lead called ``deploy`` with the id ``helper/c2/call_1`` beside a call to the
helper (id ``c2``) whose own ``deploy`` had the id ``call_1``; one approval ran both. Now a
'/' in a model's call id is escaped, so no id of the caller reads as a sub-agent's, and ids
longer than `MAX_CALL_ID` are cut and given a digest.
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node
from jianmu.nodes.tool_executor import MAX_CALL_ID
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
RAN: list[str] = []


@tool(read_only=False, confirm=True)
def deploy(target: str) -> str:
    """Deploy (a person approves first).

    Args:
        target: where.
    """
    RAN.append(target)
    return f"deployed to {target}"


def start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})


async def test_one_approval_never_runs_a_sub_agents_call_named_like_it() -> None:
    RAN.clear()
    sub = create_react_node(ScriptedLLM([[{"id": "call_1", "name": "deploy",
                                           "arguments": {"target": "prod"}}], "done"]),
                            [deploy], name="helper")
    helper = agent_tool(sub, name="helper", description="Helps.")
    lead = create_react_node(ScriptedLLM([[
        {"id": "c2", "name": "helper", "arguments": {"input": "x"}},
        {"id": "helper/c2/call_1", "name": "deploy", "arguments": {"target": "prod"}},
    ], "ok"]), [deploy, helper], name="lead")
    runner = ReactiveRunner(lead, start())
    first = await runner.run()
    [asked] = first.pending
    assert asked.summary == 'deploy({"target": "prod"})'  # the lead's own call
    runner.approve(asked.id)
    second = await runner.run()
    # the sub-agent's deploy is asked for on its own, and rejected: only one deploy ran
    assert second.status is RunStatus.SUSPENDED and RAN == []
    assert [r.id for r in second.pending] == ["helper/c2/call_1"] != [asked.id]
    runner.reject("helper/c2/call_1", "no")
    assert (await runner.run()).ok and RAN == ["prod"]


async def test_very_long_call_ids_are_cut_and_stay_distinct() -> None:
    def fresh() -> Any:
        return create_react_node(ScriptedLLM([lambda m: f"answer to {m[-1].content}"]), [],
                                 name="helper")

    ids = ["x" * 200_000, "x" * 200_001, "../..", "%2F"]
    calls = [{"id": i, "name": "helper", "arguments": {"input": str(n)}}
             for n, i in enumerate(ids)]
    state = start()
    lead = create_react_node(ScriptedLLM([calls, "ok"]),
                             [agent_tool(fresh, name="helper", description="Helps.")],
                             name="lead")
    assert (await ReactiveRunner(lead, state).run()).ok
    results = [m for m in state.get("messages") if m.role == "tool"]
    assert [m.content for m in results] == [f"answer to {n}" for n in range(4)]
    assert all(len(m.tool_call_id or "") <= MAX_CALL_ID for m in results)
    assert len({m.tool_call_id for m in results}) == 4 == len(set(state.namespaces()))
    assert all(len(ns) < 2 * MAX_CALL_ID for ns in state.namespaces())
