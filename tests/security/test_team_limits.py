"""Red team, a team's limits (issue 34, items 5 and 6).

Item 5: under ``rate_limits: {send: 2}``, two sub-agents run in parallel, each sending twice in
one batch. Each admitted its two sends without seeing the other's, still in flight: 4 went
through, where one after another or in one batch they stop at 2. Now every limit of the guard
counts the calls in flight in every branch and sub-agent of the run.

Item 6: alone, an agent with a 300-token budget stops after a few turns; handed the
conversation, it went on until the first agent's iteration cap, because the team's loop
checked only the first agent's limits. Now each agent's own limits (budget, max_iterations)
hold while it answers, and the first agent's bound the whole team.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node, handoff
from jianmu.runtime.events import Event
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
TIMEOUT = 30.0


def two_sends(_messages: list[Any]) -> list[dict[str, Any]]:
    return [{"name": "send", "arguments": {"to": "a"}}, {"name": "send", "arguments": {"to": "b"}}]


@pytest.mark.parametrize("limits", [{"rate_limits": {"send": 2}}, {"max_tool_calls": 4}])
async def test_parallel_sub_agents_share_the_runs_limits(limits: dict[str, Any]) -> None:
    sent: list[str] = []
    decided: list[str] = []
    # every send waits until all four were decided: each sub-agent decides its batch while
    # the other's sends are still running, whatever order the two are scheduled in
    gate = anyio.Event()

    @tool(read_only=False)
    async def send(to: str) -> str:
        """Send a message.

        Args:
            to: the recipient.
        """
        await gate.wait()
        sent.append(to)
        return "sent"

    def helper() -> Any:
        return create_react_node(ScriptedLLM([two_sends, "done"]), [send], name="helper")

    team = agent_tool(helper, name="helper", description="Sends two messages.")
    calls = [{"name": "helper", "arguments": {"input": f"job {i}"}} for i in range(2)]
    lead = create_react_node(ScriptedLLM([lambda _m: calls, "all done"]), [team], name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    # max_tool_calls: the lead's two helper calls are in flight too, so 2 sends fit under 4
    policy = {"send": "allow", "helper": "allow"}
    constraints = Constraints.model_validate({"guard": {"tool_policy": policy, **limits}})
    runner = ReactiveRunner(lead, state, constraints=constraints)

    def count(event: Event) -> None:
        if event.fields.get("tool") == "send":
            decided.append(event.fields["decision"])
            if len(decided) == 4:
                gate.set()

    runner.ctx.events.subscribe("guard.decision", count)
    result = await runner.run(timeout=TIMEOUT)
    assert result.ok, result
    assert len(sent) == 2, (sent, decided)
    assert sorted(decided) == ["allow", "allow", "deny", "deny"]


def note_again(_messages: list[Any]) -> list[dict[str, Any]]:
    return [{"name": "note", "arguments": {"text": "still working on it " * 8}}]


@tool
def note(text: str) -> str:
    """Take a note.

    Args:
        text: the note.
    """
    return "noted"


def worker(llm: ScriptedLLM, **limits: Any) -> Any:
    layer = Constraints.model_validate({"guard": {"budget": {"total_tokens": 300}}}) if (
        limits.pop("budget", True)) else None
    return create_react_node(llm, [note], name="worker", constraints=layer, **limits)


def start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})


async def team_run(work: ScriptedLLM, lead_limits: dict[str, Any], **limits: Any) -> Any:
    handed = worker(work, **limits)
    lead = create_react_node(ScriptedLLM([[{"name": "transfer_to_worker", "arguments": {}}]]),
                             [handoff(handed)], name="lead", **lead_limits)
    state = start()
    result = await ReactiveRunner(lead, state).run(timeout=TIMEOUT)
    assert state.get("active_agent") == "worker"
    return result


async def test_a_hand_off_target_stops_at_its_own_budget() -> None:
    alone_llm = ScriptedLLM([note_again] * 100)
    alone = await ReactiveRunner(worker(alone_llm), start()).run(timeout=TIMEOUT)
    assert not alone.ok and "token budget exhausted" in str(alone.error)
    assert 2 <= len(alone_llm.requests) < 10
    handed_llm = ScriptedLLM([note_again] * 100)
    result = await team_run(handed_llm, {"max_iterations": 50})
    assert not result.ok and "token budget exhausted" in str(result.error), result
    # the first agent's turn spent tokens too: the worker gets no more turns than alone
    assert len(handed_llm.requests) <= len(alone_llm.requests)


async def test_a_hand_off_target_stops_at_its_own_iteration_cap() -> None:
    handed_llm = ScriptedLLM([note_again] * 100)
    result = await team_run(handed_llm, {"max_iterations": 50}, max_iterations=3, budget=False)
    assert not result.ok and "max_iterations=3" in str(result.error), result
    assert len(handed_llm.requests) == 3


async def test_the_first_agents_limits_bound_the_whole_team() -> None:
    handed_llm = ScriptedLLM([note_again] * 100)
    result = await team_run(handed_llm, {"max_iterations": 4}, max_iterations=50, budget=False)
    assert not result.ok and "max_iterations=4" in str(result.error), result
    assert len(handed_llm.requests) == 3  # the first agent's turn was one of the four
