"""What a trace backend receives: with ``telemetry.capture_content`` off (the default) no
content of a call (its arguments, its result, the words of its failure, which may quote a
secret) is on any span; ``error.type`` names a kind of failure, never its text."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from jianmu import ReactiveRunner, RunStatus, ScriptedLLM, StateManager, Tripwire, tool
from jianmu.nodes import AgentState, create_react_node

pytestmark = pytest.mark.anyio

SECRET = "sk-live-5p4nS3cr3t"


@tool
def login(user: str) -> Any:
    """Log a user in.

    Args:
        user: who.
    """
    if user == "raises":
        raise PermissionError(f"token {SECRET} was refused for {user}")
    if user == "says":
        return {"ok": False, "error": f"{SECRET}: refused"}
    return f"Error: password={SECRET} is wrong"


def text_of(exporter: InMemorySpanExporter) -> str:
    return repr([(s.name, dict(s.attributes or {}), s.status.description, s.events)
                 for s in exporter.get_finished_spans()])


async def test_the_words_of_a_failed_call_stay_off_its_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    llm = ScriptedLLM([[{"name": "login", "arguments": {"user": who}}
                        for who in ("raises", "says", "returns")], "Refused."])
    tree = create_react_node(llm, [login])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "log in"}]})
    result = await ReactiveRunner(tree, state, tracer_provider=provider).run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    # the model read why each call failed; the trace backend did not
    assert sum(SECRET in (m.content or "") for m in state.get("messages")) == 3
    assert SECRET not in text_of(exporter)
    calls = [s for s in exporter.get_finished_spans() if s.name == "execute_tool login"]
    assert len(calls) == 3
    assert {s.status.status_code for s in calls} == {StatusCode.ERROR}
    assert sorted(str(s.attributes["error.type"]) for s in calls) == [
        "PermissionError", "_OTHER", "_OTHER"]


async def test_a_withheld_result_is_a_failed_call_whose_words_stay_off_its_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    @tool
    def read_env() -> str:
        """Read the environment."""
        return f"API_KEY={SECRET}"

    def no_keys(ctx: Any, result: Any) -> Tripwire | None:
        return Tripwire(f"holds {SECRET}") if SECRET in result.text else None

    llm = ScriptedLLM([[{"name": "read_env", "arguments": {}}], "done"])
    tree = create_react_node(llm, [read_env], tool_output_guardrails=[no_keys])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "env?"}]})
    assert (await ReactiveRunner(tree, state, tracer_provider=provider).run(timeout=30)).ok
    assert SECRET not in text_of(exporter)
    (call,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool read_env"]
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes["error.type"] == "withheld"


@tool(permission="user_confirm")
def pay(amount: int) -> str:
    """Pay an amount (asks first).

    Args:
        amount: how much.
    """
    return f"paid {amount}"


@pytest.mark.parametrize("approved", [True, False])
async def test_what_a_person_wrote_when_deciding_stays_off_the_spans(approved: bool) -> None:
    """The guard's reason for a decision quotes the person's message ("approved by a person:
    ..."): it went on the call's span as ``jianmu.guard.reason`` with capture_content off."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    llm = ScriptedLLM([[{"id": "p1", "name": "pay", "arguments": {"amount": 5}}], "Done."])
    tree = create_react_node(llm, [pay])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pay 5"}]})
    runner = ReactiveRunner(tree, state, tracer_provider=provider)
    assert (await runner.run(timeout=30)).status is RunStatus.SUSPENDED
    message = f"ok, the card's PIN is {SECRET}"
    if approved:
        runner.approve("p1", message)
    else:
        runner.reject("p1", message)
    assert (await runner.run(timeout=30)).ok
    assert SECRET not in text_of(exporter)
    (call,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool pay"]
    assert call.attributes["jianmu.guard.decision"] == ("allow" if approved else "deny")
    if not approved:  # a denied call never ran: its span says so, as an error
        assert call.status.status_code is StatusCode.ERROR
        assert call.attributes["error.type"] == "denied"


async def test_the_words_of_a_failed_summary_model_call_stay_off_its_span() -> None:
    """The summary's span (`summarize_history`) took the error's message as its status
    description: what the model's server said, which may quote what it was sent."""
    from jianmu.nodes import summarize_history

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def refuses(messages: Any) -> Any:
        raise RuntimeError(f"upstream said: {SECRET}")

    tree = create_react_node(
        ScriptedLLM(["answer"]), [], name="chat",
        history=[summarize_history(ScriptedLLM([refuses]), max_tokens=20, keep_last=1)])
    state = StateManager(AgentState, {"messages": [
        {"role": "user", "content": "count " + "y" * 200},
        {"role": "assistant", "content": "z" * 200}, {"role": "user", "content": "again"}]})
    result = await ReactiveRunner(tree, state, tracer_provider=provider).run(timeout=30)
    assert result.status is RunStatus.FAILURE
    (summary,) = [s for s in exporter.get_finished_spans()
                  if s.name.startswith("summarize_history")]
    assert summary.status.status_code is StatusCode.ERROR
    assert summary.attributes["error.type"] == "RuntimeError"
    assert SECRET not in text_of(exporter)
