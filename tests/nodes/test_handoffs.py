"""Hand-offs: a triage agent passes the conversation to a specialist, through `ReactiveRunner`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from jianmu import ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.errors import HandoffError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node, handoff
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


class Refund(BaseModel):
    order: str
    amount: float


@tool
def lookup_order(order: str) -> str:
    """Look an order up.

    Args:
        order: the order's id.
    """
    return f"{order}: 30 EUR, paid"


def start(text: str = "I want my money back for order A1.") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": text}]})


def calls(name: str, **arguments: Any) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": arguments}]


def team(billing_script: list[Any], triage_script: list[Any]) -> tuple[Any, ScriptedLLM,
                                                                        ScriptedLLM]:
    billing_llm = ScriptedLLM(billing_script)
    billing = create_react_node(
        billing_llm, [lookup_order, handoff("triage", description="Anything but billing.")],
        name="billing", system_prompt="You handle refunds.", output_type=Refund,
    )
    triage_llm = ScriptedLLM(triage_script)
    triage = create_react_node(
        triage_llm, [handoff(billing, description="Refunds and invoices.")],
        name="triage", system_prompt="You route customers.",
    )
    return triage, triage_llm, billing_llm


BILLING = [calls("lookup_order", order="A1"), calls("final_result", order="A1", amount=30)]
TRIAGE = [calls("transfer_to_billing")]


async def test_triage_hands_the_conversation_to_billing() -> None:
    triage, triage_llm, billing_llm = team(BILLING, TRIAGE)
    state = start()
    events: list[Any] = []
    runner = ReactiveRunner(triage, state)
    runner.ctx.events.subscribe("agent.*", events.append)
    result = await runner.run()
    assert result.ok and result.output == Refund(order="A1", amount=30)
    assert state.get("active_agent") == "billing"
    offered = triage_llm.requests[0].tools
    assert [t["function"]["name"] for t in offered] == ["transfer_to_billing"]
    assert "Refunds and invoices." in offered[0]["function"]["description"]
    # billing answers with its own prompt, tools and output type, on the same conversation
    first = billing_llm.requests[0]
    assert first.messages[0].content == "You handle refunds."
    assert first.messages[1].content == "I want my money back for order A1."
    assert sorted(first.tool_names) == ["final_result", "lookup_order", "transfer_to_triage"]
    # the hand-off is one message in the history, and the transfer call has its result
    history = state.get("messages")
    assert [(m.role, m.content) for m in history[1:3]] == [
        ("assistant", None), ("tool", "Transferred to billing.")]
    assert history[2].tool_call_id == history[1].tool_calls[0].id
    assert [(e.fields["source"], e.fields["target"]) for e in events
            if e.name == "agent.handoff"] == [("triage", "billing")]


async def test_the_next_user_turn_continues_with_the_agent_that_answered_last() -> None:
    billing_more = [*BILLING, calls("final_result", order="A2", amount=5)]
    triage, triage_llm, billing_llm = team(billing_more, TRIAGE)
    state = start()
    runner = ReactiveRunner(triage, state)
    assert (await runner.run()).ok
    runner.send("And order A2?")
    second = await runner.run()
    assert second.ok and second.output == Refund(order="A2", amount=5)
    assert len(triage_llm.requests) == 1  # triage was not asked again
    assert billing_llm.requests[-1].messages[-1].content == "And order A2?"


def test_the_last_agent_is_kept_across_a_restore(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    triage, _, _ = team(BILLING, TRIAGE)
    runner = ReactiveRunner(triage, start(), checkpointer=SQLiteCheckpointer(db), run_id="h1")
    assert runner.run_sync(timeout=30).ok
    triage2, triage_llm, billing_llm = team([calls("final_result", order="A9", amount=1)], [])
    restored = ReactiveRunner.restore(triage2, SQLiteCheckpointer(db), "h1",
                                      state_manager=StateManager(AgentState))
    assert restored.state.get("active_agent") == "billing"
    assert restored.state.get("final_output") == Refund(order="A1", amount=30)  # its type
    restored.send("One more: A9.")
    result = restored.run_sync(timeout=30)
    assert result.ok and result.output == Refund(order="A9", amount=1)
    assert triage_llm.requests == [] and len(billing_llm.requests) == 1


async def test_a_specialist_hands_back_and_triage_answers() -> None:
    triage, _triage_llm, _billing_llm = team(
        [calls("transfer_to_triage")], [*TRIAGE, "Happy to help with anything else."])
    state = start("Billing? No, I have a question about opening hours.")
    result = await ReactiveRunner(triage, state).run()
    assert result.ok and state.get("final_answer") == "Happy to help with anything else."
    assert state.get("active_agent") == "triage" and result.output is None


async def test_a_hand_off_cycle_is_bounded_by_the_iteration_cap() -> None:
    loop_billing = [calls("transfer_to_triage")] * 10
    loop_triage = [calls("transfer_to_billing")] * 10
    billing = create_react_node(ScriptedLLM(loop_billing), [handoff("triage")], name="billing")
    triage_llm = ScriptedLLM(loop_triage)
    triage = create_react_node(triage_llm, [handoff(billing)], name="triage", max_iterations=5)
    result = await ReactiveRunner(triage, start()).run()
    assert result.status is RunStatus.FAILURE and "max_iterations=5" in (result.error or "")
    billing_llm = billing.llm_node.llm  # type: ignore[union-attr]
    assert len(triage_llm.requests) + len(billing_llm.requests) == 5  # type: ignore[attr-defined]


async def test_other_calls_in_the_handing_turn_are_not_run() -> None:
    triage, _, _ = team(BILLING, [[{"name": "transfer_to_billing", "arguments": {}},
                                   {"name": "transfer_to_billing", "arguments": {}}]])
    state = start()
    assert (await ReactiveRunner(triage, state).run()).ok
    replies = [m for m in state.get("messages")[:4] if m.role == "tool"]
    assert [m.content for m in replies] == [
        "Transferred to billing.", "Not run: the conversation was handed to billing."]


async def test_a_hand_off_the_model_invents_is_an_unknown_tool() -> None:
    triage, _, _ = team(BILLING, [calls("transfer_to_sales"), *TRIAGE])
    state = start()
    assert (await ReactiveRunner(triage, state).run()).ok
    said = state.get("messages")[2].content or ""
    assert "unknown tool 'transfer_to_sales'" in said
    assert state.get("active_agent") == "billing"  # the next turn's real hand-off went on


def test_a_hand_off_to_an_agent_outside_the_team_is_refused() -> None:
    alone = create_react_node(ScriptedLLM(["x"]), [handoff("nobody")], name="solo")
    runner = ReactiveRunner(alone, start())
    with pytest.raises(HandoffError, match=r"'solo' hands off to 'nobody'.*\(solo\)"):
        runner.run_sync(timeout=30)
    assert runner.state.get("messages")[0].role == "user"  # nothing lost


def test_bad_hand_offs_are_refused_when_built() -> None:
    with pytest.raises(TypeError, match="takes an agent built by create_react_node"):
        handoff(object())
    one = create_react_node(ScriptedLLM([]), [], name="twin")
    two = create_react_node(ScriptedLLM([]), [], name="twin")
    with pytest.raises(HandoffError, match="two agents of one team are named 'twin'"):
        create_react_node(ScriptedLLM([]), [handoff(one), handoff(two, name="other")],
                          name="lead")
