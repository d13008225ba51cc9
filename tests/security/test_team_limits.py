"""Red team, a team's limits (issue 34, items 5 and 6).

Item 5: under ``rate_limits: {send: 2}``, two sub-agents run in parallel, each sending twice in
one batch. Each admitted its two sends without seeing the other's, still in flight: 4 went
through, where one after another or in one batch they stop at 2. Now every limit of the guard
counts the calls in flight in every branch and sub-agent of the run.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node
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
