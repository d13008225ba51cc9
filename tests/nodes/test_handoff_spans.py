"""The spans of agents that work with other agents: a hand-off is an ``execute_tool
transfer_to_<agent>`` span and the agent taking over answers in an ``invoke_agent <agent>`` span
of its own; a sub-agent (`agent_tool`) nests under the caller's ``execute_tool`` span; a run
that suspends and resumes ends every span it opened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jianmu import Agent, AppConfig, ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node, handoff
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


class Opened(SpanProcessor):
    """The ids of the spans started and of those ended: every span opened must end."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.ended: list[int] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span.context.span_id)

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span.context.span_id)

    @property
    def left_open(self) -> set[int]:
        return set(self.started) - set(self.ended)


def traced() -> tuple[TracerProvider, InMemorySpanExporter, Opened]:
    exporter, opened = InMemorySpanExporter(), Opened()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(opened)
    return provider, exporter, opened


def calls(name: str, **arguments: Any) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": arguments}]


def chat(text: str = "I want my money back for order A1.") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": text}]})


@tool
def lookup_order(order: str) -> str:
    """Look an order up.

    Args:
        order: the order's id.
    """
    return f"{order}: 30 EUR, paid"


@tool(read_only=False, confirm=True)
def refund(order: str) -> str:
    """Refund an order (a person approves first).

    Args:
        order: the order's id.
    """
    return f"{order} refunded"


def team(billing: list[Any], triage: list[Any]) -> Any:
    specialist = create_react_node(
        ScriptedLLM(billing), [lookup_order, refund, handoff("triage")], name="billing")
    return create_react_node(ScriptedLLM(triage), [handoff(specialist)], name="triage")


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        found.setdefault(span.name, []).append(span)
    return found


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_hand_off_is_a_tool_span_and_the_new_agent_answers_in_its_own_span() -> None:
    provider, exporter, opened = traced()
    root = team([calls("lookup_order", order="A1"), "A1 is paid: 30 EUR."],
                [calls("transfer_to_billing")])
    result = await ReactiveRunner(root, chat(), tracer_provider=provider).run()
    assert result.ok
    spans = by_name(exporter)
    (triage,) = spans["invoke_agent triage"]
    (billing,) = spans["invoke_agent billing"]
    (transfer,) = spans["execute_tool transfer_to_billing"]
    (lookup,) = spans["execute_tool lookup_order"]
    first_chat, *billing_chats = sorted(spans["chat scripted"], key=lambda s: s.start_time or 0)
    # the hand-off happens in triage's span; billing's span is inside it, and holds its work
    assert parent_of(first_chat) == parent_of(transfer) == triage.context.span_id
    assert parent_of(billing) == triage.context.span_id
    assert [parent_of(s) for s in billing_chats] == [billing.context.span_id] * 2
    assert parent_of(lookup) == billing.context.span_id
    assert billing.attributes is not None
    assert billing.attributes["gen_ai.agent.name"] == "billing"
    assert billing.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert transfer.attributes is not None
    assert transfer.attributes["gen_ai.operation.name"] == "execute_tool"
    assert transfer.attributes["gen_ai.tool.name"] == "transfer_to_billing"
    assert transfer.attributes["jianmu.handoff.target"] == "billing"
    assert transfer.attributes["jianmu.handoff.source"] == "triage"
    call_id = root.state.get("messages")[1].tool_calls[0].id
    assert transfer.attributes["gen_ai.tool.call.id"] == call_id
    # no content unless capture_content: a hand-off's result is a tool result
    assert "gen_ai.tool.call.result" not in transfer.attributes
    assert (transfer.end_time or 0) <= (billing.start_time or 0)
    assert opened.left_open == set()


async def test_a_hand_off_back_ends_the_specialists_span_before_triage_answers() -> None:
    provider, exporter, opened = traced()
    root = team([calls("transfer_to_triage")],
                [calls("transfer_to_billing"), "Opening hours: 9 to 5."])
    result = await ReactiveRunner(root, chat("When are you open?"),
                                  tracer_provider=provider).run()
    assert result.ok
    spans = by_name(exporter)
    (triage,) = spans["invoke_agent triage"]
    (billing,) = spans["invoke_agent billing"]
    (back,) = spans["execute_tool transfer_to_triage"]
    assert parent_of(back) == billing.context.span_id
    last_chat = max(spans["chat scripted"], key=lambda s: s.start_time or 0)
    assert parent_of(last_chat) == triage.context.span_id
    assert (billing.end_time or 0) <= (last_chat.start_time or 0)
    assert opened.left_open == set()


async def test_capture_content_puts_the_hand_offs_result_on_its_span() -> None:
    provider, exporter, _ = traced()
    root = team(["Paid."], [calls("transfer_to_billing")])
    config = AppConfig(telemetry={"capture_content": True})
    assert (await ReactiveRunner(root, chat(), config=config, tracer_provider=provider).run()).ok
    (transfer,) = by_name(exporter)["execute_tool transfer_to_billing"]
    assert transfer.attributes is not None
    assert transfer.attributes["gen_ai.tool.call.result"] == "Transferred to billing."


async def test_a_suspended_and_resumed_hand_off_ends_every_span_it_opened() -> None:
    provider, exporter, opened = traced()
    root = team([calls("refund", order="A1"), "Refunded."], [calls("transfer_to_billing")])
    runner = ReactiveRunner(root, chat(), tracer_provider=provider)
    first = await runner.run()
    assert first.status is RunStatus.SUSPENDED
    assert opened.left_open == set()  # billing's span too, although billing still answers
    suspended = by_name(exporter)
    assert len(suspended["invoke_agent billing"]) == 1
    runner.approve(first.pending[0].id)
    second = await runner.run()
    assert second.ok and root.state.get("final_answer") == "Refunded."
    assert opened.left_open == set()
    spans = by_name(exporter)
    # the resumed run opens billing's span again, in its own triage span
    assert len(spans["invoke_agent billing"]) == len(spans["invoke_agent triage"]) == 2
    resumed_triage = max(spans["invoke_agent triage"], key=lambda s: s.start_time or 0)
    resumed_billing = max(spans["invoke_agent billing"], key=lambda s: s.start_time or 0)
    assert parent_of(resumed_billing) == resumed_triage.context.span_id
    (refunded,) = spans["execute_tool refund"]
    assert parent_of(refunded) == resumed_billing.context.span_id
    assert len(spans["execute_tool transfer_to_billing"]) == 1  # the hand-off happened once


def test_a_hand_off_restored_from_a_checkpoint_ends_every_span(tmp_path: Path) -> None:
    provider, exporter, opened = traced()
    db = tmp_path / "runs.sqlite"
    first_team = team([calls("refund", order="A1")], [calls("transfer_to_billing")])
    runner = ReactiveRunner(first_team, chat(), checkpointer=SQLiteCheckpointer(db),
                            run_id="h1", tracer_provider=provider)
    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    restored = ReactiveRunner.restore(team(["Refunded."], []), SQLiteCheckpointer(db), "h1",
                                      state_manager=StateManager(AgentState),
                                      tracer_provider=provider)
    restored.approve(first.pending[0].id)
    assert restored.run_sync(timeout=30).ok
    assert opened.left_open == set()
    resumed_billing = max(by_name(exporter)["invoke_agent billing"],
                          key=lambda s: s.start_time or 0)
    (refunded,) = by_name(exporter)["execute_tool refund"]
    assert parent_of(refunded) == resumed_billing.context.span_id


async def test_a_sub_agent_that_hands_off_nests_under_the_callers_tool_span() -> None:
    provider, exporter, opened = traced()
    desk = team([calls("lookup_order", order="A1"), "A1: 30 EUR, paid."],
                [calls("transfer_to_billing")])
    lead = create_react_node(
        ScriptedLLM([calls("desk", input="Is A1 paid?"), "Yes, A1 is paid."]),
        [agent_tool(desk, name="desk", description="The support desk.")], name="lead")
    result = await ReactiveRunner(lead, chat("Is A1 paid?"), tracer_provider=provider).run()
    assert result.ok and lead.state.get("final_answer") == "Yes, A1 is paid."
    spans = by_name(exporter)
    (call,) = spans["execute_tool desk"]
    (lead_span,) = spans["invoke_agent lead"]
    (sub,) = spans["invoke_agent desk"]  # the sub-run's span is its agent's (the team's entry)
    (billing,) = spans["invoke_agent billing"]
    (transfer,) = spans["execute_tool transfer_to_billing"]
    assert parent_of(call) == lead_span.context.span_id
    assert parent_of(sub) == call.context.span_id
    assert parent_of(transfer) == parent_of(billing) == sub.context.span_id
    (lookup,) = spans["execute_tool lookup_order"]
    assert parent_of(lookup) == billing.context.span_id
    assert len({s.context.trace_id for s in exporter.get_finished_spans()}) == 1
    assert opened.left_open == set()


async def test_an_agent_sends_its_runs_spans_to_the_provider_it_was_given() -> None:
    provider, exporter, opened = traced()
    billing = Agent(ScriptedLLM(["Paid."]), name="billing")
    triage = Agent(ScriptedLLM([calls("transfer_to_billing")]), name="triage",
                   tools=[handoff(billing)], tracer_provider=provider)
    result = await triage.run("Is A1 paid?")
    assert result.ok and result.output == "Paid."
    spans = by_name(exporter)
    (triage_span,) = spans["invoke_agent triage"]
    (billing_span,) = spans["invoke_agent billing"]
    assert parent_of(billing_span) == triage_span.context.span_id
    assert "execute_tool transfer_to_billing" in spans
    assert opened.left_open == set()
