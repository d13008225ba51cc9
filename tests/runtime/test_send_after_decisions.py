"""`send()` on a run that stands suspended with every request decided (found by the team fuzz,
`tests/nodes/test_team_fuzz.py`, seed 1317).

The message was added at once: it stood between the model's call and its result (a
conversation OpenAI refuses), the calls the decisions let go on (a sub-agent's turn, the rest
of a batch) ran for a conversation that had moved on, asked a person more, and a cancel then
closed the sub-agent's call as not run, its approved calls never run. The message now waits
for the run that acts on the decisions, as one sent while a run stops does, and the run after
it answers it; in a runner restored from the checkpoint too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


def _tree(paid: list[int], *, nested: bool) -> Any:
    @tool(category="write", permission="user_confirm")
    def pay(amount: int) -> str:
        """Pay (a person approves first).

        Args:
            amount: how much.
        """
        paid.append(amount)
        return f"paid {amount}"

    def payer_reply(messages: list[Any]) -> Any:
        done = [m.content for m in messages if m.role == "tool"]
        if not done:
            return [{"id": "p1", "name": "pay", "arguments": {"amount": 5}}]
        return f"payer: {done[-1]}"

    def payer() -> Any:
        return create_react_node(ScriptedLLM([payer_reply] * 4), [pay], name="payer")

    def lead_reply(messages: list[Any]) -> Any:
        if messages[-1].role == "user":
            if messages[-1].content == "go":
                return [{"id": "c1", "name": "payer" if nested else "pay",
                         "arguments": {"input": "pay"} if nested else {"amount": 5}}]
            return f"answered {messages[-1].content}"
        return f"lead: {messages[-1].content}"

    tools = [agent_tool(payer, name="payer", description="Pays.")] if nested else [pay]
    return create_react_node(ScriptedLLM([lead_reply] * 4), tools, name="lead")


def _unanswered(messages: list[Any]) -> list[str]:
    """Calls whose result does not come right after them (OpenAI's rule)."""
    wrong, i = [], 0
    while i < len(messages):
        calls = messages[i].tool_calls if messages[i].role == "assistant" else None
        i += 1
        if not calls:
            continue
        got = []
        while i < len(messages) and messages[i].role == "tool":
            got.append(messages[i].tool_call_id)
            i += 1
        if sorted(got) != sorted(c.id for c in calls):
            wrong.append(f"{[c.id for c in calls]} answered by {got}")
    return wrong


async def _decide_send_and_run(runner: ReactiveRunner, paid: list[int]) -> None:
    (request,) = runner.pending
    runner.approve(request.id)
    runner.send("and one more thing")
    first = await runner.run(timeout=60)
    assert first.status is RunStatus.SUCCESS, first.error
    assert paid == [5]
    messages = runner.state.get("messages")
    assert not _unanswered(messages), _unanswered(messages)
    assert messages[-1].role == "user" and messages[-1].content == "and one more thing"
    assert (await runner.run(timeout=60)).ok
    assert runner.state.get("final_answer") == "answered and one more thing"
    assert paid == [5]


@pytest.mark.parametrize("nested", [False, True], ids=["own call", "sub-agent's call"])
async def test_a_message_sent_after_the_decisions_waits_for_the_calls(nested: bool) -> None:
    paid: list[int] = []
    runner = ReactiveRunner(_tree(paid, nested=nested), StateManager(
        AgentState, {"messages": [{"role": "user", "content": "go"}]}))
    assert (await runner.run(timeout=60)).status is RunStatus.SUSPENDED
    await _decide_send_and_run(runner, paid)


@pytest.mark.parametrize("nested", [False, True], ids=["own call", "sub-agent's call"])
async def test_a_restored_run_keeps_the_message_for_after_its_calls(
    nested: bool, tmp_path: Path,
) -> None:
    paid: list[int] = []
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    first = ReactiveRunner(_tree(paid, nested=nested), StateManager(
        AgentState, {"messages": [{"role": "user", "content": "go"}]}),
        checkpointer=store, run_id="r1")
    assert (await first.run(timeout=60)).status is RunStatus.SUSPENDED
    await first.aclose()
    runner = ReactiveRunner.restore(_tree(paid, nested=nested), store, "r1",
                                    state_manager=StateManager(AgentState))
    await _decide_send_and_run(runner, paid)
    await runner.aclose()
    store.close()
