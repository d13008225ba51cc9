"""A guardrail that raises a ``BaseException`` of its own trips, as one that raises an
``Exception`` does: the run's word is "a guardrail that raises trips (fail closed)".

Before the fix, a guardrail raising a ``BaseException`` that is not an ``Exception`` nor
``SystemExit``/``GeneratorExit``/``CancelledError`` (pytest's ``Failed``, gevent's ``Timeout``,
trio's ``Cancelled``, a group of them) escaped the run raw: ``run()`` raised, no `RunResult`,
and a tool-output guardrail's raise left the payment it was reading unrecorded, so the next
``run()`` paid again. A tool raising one was already the call's failure
(`test_base_exception_from_tool.py`); a ``KeyboardInterrupt`` still stops the run.
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import AgentState, GuardrailTripped, ReactiveRunner, RunStatus, StateManager, tool
from jianmu.llm import ScriptedLLM
from jianmu.nodes import create_react_node

pytestmark = pytest.mark.anyio


class Failed(BaseException):
    """As pytest's ``Failed`` and gevent's ``Timeout`` are."""


def failing(kind: str, how: str) -> Any:
    def raises() -> None:
        if how == "group":
            raise BaseExceptionGroup("checks", [Failed("moderation down")])
        raise Failed("moderation down")

    if how == "async":
        async def moderation(ctx: Any, value: Any) -> None:
            raises()
        return moderation

    def moderation_sync(ctx: Any, value: Any) -> None:
        raises()
    return moderation_sync


@pytest.mark.parametrize("how", ["sync", "async", "group"])
@pytest.mark.parametrize("kind", ["input", "output", "tool_output"])
async def test_a_guardrail_raising_a_base_exception_trips_and_pays_once(
    kind: str, how: str
) -> None:
    paid: list[int] = []

    @tool(read_only=False)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        paid.append(amount)
        return f"paid {amount}"

    llm = ScriptedLLM([[{"name": "pay", "arguments": {"amount": 5}}], "done", "done again"])
    node = create_react_node(llm, [pay], **{f"{kind}_guardrails": [failing(kind, how)]})
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pay"}]})
    runner = ReactiveRunner(node, state)
    result = await runner.run(timeout=30)
    again = await runner.run(timeout=30)

    if kind == "tool_output":  # the result is withheld and the run goes on
        assert result.status is RunStatus.SUCCESS, result.error
        [seen] = [m.content or "" for m in state.get("messages") if m.role == "tool"]
        assert "withheld" in seen and "the guardrail failed" in seen and "paid 5" not in seen
    else:
        assert result.status is RunStatus.FAILURE
        assert isinstance(result.exception, GuardrailTripped), result.exception
        assert "the guardrail failed" in str(result.exception)
    assert again.status in (RunStatus.SUCCESS, RunStatus.FAILURE)
    assert paid == ([] if kind == "input" else [5])
