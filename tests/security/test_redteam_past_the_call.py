"""Red team of the guard past the call: what a run does after the guard's first word (a
workflow's own steps, edited approvals, guardrails, questions)."""

from __future__ import annotations

import pytest
from py_trees.composites import Sequence

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import create_react_node
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_node import ToolNode
from jianmu.tools import tool

pytestmark = pytest.mark.anyio

PAID: list[str] = []


@tool
def pay(to: str) -> str:
    """Send money.

    Args:
        to: to whom.
    """
    PAID.append(to)
    return f"paid {to}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    PAID.clear()


async def test_a_workflow_step_after_an_agent_spent_the_budget_does_not_run() -> None:
    # the agent's answer spends the run's tokens past the budget; the author's step that
    # follows is a tool call like the agent's, under the same guard.budget.total_tokens
    limits = Constraints.model_validate({"guard": {"budget": {"total_tokens": 5}}})
    agent = create_react_node(ScriptedLLM(["a long answer " * 20]), [pay], constraints=limits)
    step = ToolNode("pay", pay, input_key="who", output_key=None)
    state = StateManager(AgentState, {
        "messages": [{"role": "user", "content": "hi"}], "who": "bob"})
    runner = ReactiveRunner(Sequence("root", memory=True, children=[agent, step]), state,
                            constraints=limits)

    result = await runner.run(timeout=30)

    assert state.get("usage").total_tokens > 5
    assert result.status is RunStatus.FAILURE
    assert "token budget exhausted" in (result.error or "")
    assert PAID == []
