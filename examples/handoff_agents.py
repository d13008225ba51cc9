"""A triage agent hands the customer to a billing specialist, who answers with a typed refund.

Two ReAct agents joined by a hand-off: triage's model sees ``transfer_to_billing``; calling it
ends triage's turn, and billing answers on the same conversation with its own prompt, tools
and output type (a `Refund`). The customer's next message goes on with billing, the agent that
answered last.

It talks to a real model when ``llm:`` in ``configs/jianmu.yaml`` points to one (set
``JIANMU_LLM_BASE_URL`` and ``JIANMU_LLM_MODEL``, or ``OPENAI_API_KEY``); otherwise (and always
under ``make demo``) both agents run against the scripted stand-in and it says so on its first
line.

Run it with ``python examples/handoff_agents.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field

from jianmu import ReactiveRunner, StateManager, load_config
from jianmu.llm import LLMProvider, ScriptedLLM, from_config
from jianmu.nodes import AgentState, ReActLoop, create_react_node, handoff
from jianmu.tools import tool

ORDERS = {"A1": "A1: 30.00 EUR, charged twice on 2 May", "B7": "B7: 12.00 EUR, charged once"}
FIRST = "I was charged twice for order A1. Can I get one charge back?"
SECOND = "And order B7, was that charged twice too?"


class Refund(BaseModel):
    """What billing decides for one order."""

    order: str = Field(description="The order's id.")
    amount: float = Field(description="The amount to pay back in EUR; 0 when nothing is owed.")
    reason: str = Field(description="One sentence for the customer.")


@tool
def lookup_order(order: str) -> str:
    """Look up an order's charges.

    Args:
        order: the order's id, such as A1.
    """
    return ORDERS.get(order.upper(), f"no order {order!r}")


def scripted_billing() -> ScriptedLLM:
    """What a billing model might say: look the order up, then decide."""
    return ScriptedLLM([
        [{"name": "lookup_order", "arguments": {"order": "A1"}}],
        [{"name": "final_result", "arguments": {
            "order": "A1", "amount": 30.0, "reason": "A1 was charged twice; one charge is back."}}],
        [{"name": "lookup_order", "arguments": {"order": "B7"}}],
        [{"name": "final_result", "arguments": {
            "order": "B7", "amount": 0.0, "reason": "B7 was charged once; nothing is owed."}}],
    ])


def scripted_triage() -> ScriptedLLM:
    """What a triage model might say: this is a billing question."""
    return ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}]])


def pick_llm(offline: bool = False) -> tuple[LLMProvider | None, str]:
    """The configured model, or None (each agent gets its scripted stand-in)."""
    if offline:  # `make demo`: offline whatever the environment says
        return None, "the scripted stand-in (the demo runs offline)"
    config = load_config()
    if config.llm.endpoint_configured:
        return from_config(config), f"model {config.llm.model!r} at {config.llm.base_url}"
    return None, "the scripted stand-in (no llm.base_url or API key is configured)"


def build_tree(model: LLMProvider | None = None) -> ReActLoop:
    """Triage, which may hand over to billing (which may hand back)."""
    billing = create_react_node(
        model or scripted_billing(), [lookup_order, handoff("triage", description="Not billing.")],
        name="billing", output_type=Refund, max_iterations=6,
        system_prompt="You handle refunds. Look the order up, then give your decision.",
    )
    return create_react_node(
        model or scripted_triage(),
        [handoff(billing, description="Refunds, invoices, double charges.")],
        name="triage", max_iterations=8,
        system_prompt="You route customers: hand billing questions to billing.",
    )


def build_state() -> StateManager:
    """The conversation so far: the first message (what `jianmu run` starts from)."""
    return StateManager(AgentState, {"messages": [{"role": "user", "content": FIRST}]})


def show(event: Any) -> None:
    fields = event.fields
    if event.name == "agent.handoff":
        print(f"  ⇢ {fields['source']} hands the conversation to {fields['target']}")
    elif event.name == "tool.call.started":
        print(f"  → {fields['tool']}({fields['args_preview']})")


async def main(offline: bool = False) -> None:
    llm, label = pick_llm(offline)
    print(f"LLM: {label}")
    state = build_state()
    runner = ReactiveRunner(build_tree(llm), state)
    runner.ctx.events.subscribe("agent.handoff", show)
    runner.ctx.events.subscribe("tool.call.started", show)
    print(f"customer: {FIRST}")
    result = await runner.run(timeout=120)
    print(f"{state.get('active_agent')}: {result.output!r}")
    runner.send(SECOND)
    print(f"customer: {SECOND}")
    result = await runner.run(timeout=120)
    print(f"{state.get('active_agent')}: {result.output!r}")
    print(f"result: {result.status.value}, {len(state.get('messages'))} messages kept")
    if llm is not None:
        await llm.close()


if __name__ == "__main__":
    asyncio.run(main())
