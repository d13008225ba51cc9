"""The ReAct loop with ScriptedLLM and with OpenAIProvider over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.llm import OpenAIProvider, ScriptedLLM
from jianmu.nodes.react import create_react_node
from jianmu.nodes.state import AgentState
from jianmu.tools.base import tool
from tests.support.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.anyio


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city.

    Args:
        city: the city's name.
    """
    return {"paris": "sunny", "oslo": "snow"}.get(city.lower(), "unknown")


@tool(category="write", effect_tags=["file_write"])
def note(text: str) -> str:
    """Write a note.

    Args:
        text: the note.
    """
    return f"noted: {text}"


@tool(category="dangerous", permission="user_confirm", effect_tags=["payment"])
def pay(amount: int) -> str:
    """Pay an amount (asks first).

    Args:
        amount: how much.
    """
    return f"paid {amount}"


def start_state(question: str = "What is the weather?") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": question}]})


async def test_full_loop_with_scripted_llm() -> None:
    llm = ScriptedLLM([
        [{"name": "lookup", "arguments": {"city": "Paris"}},
         {"name": "lookup", "arguments": {"city": "Oslo"}}],          # a parallel turn
        [{"name": "note", "arguments": {"text": "Paris sunny, Oslo snow"}}],
        "Paris is sunny and Oslo has snow.",
    ])
    tree = create_react_node(llm, [lookup, note], system_prompt="You are a weather bot.")
    state = start_state()
    result = await ReactiveRunner(tree, state).run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    assert state.get("final_answer") == "Paris is sunny and Oslo has snow."
    assert state.get("done") is True and state.get("rounds") == 3
    assert state.get("actions") == []
    assert state.get("tool_effects") == {"file_write": 1}
    roles = [m.role for m in state.get("messages")]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    tool_texts = [m.content for m in state.get("messages") if m.role == "tool"]
    assert tool_texts == ["sunny", "snow", "noted: Paris sunny, Oslo snow"]
    first = llm.requests[0]
    assert first.messages[0].role == "system" and first.tool_names == ["lookup", "note"]


async def test_max_iterations_reached() -> None:
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}]] * 5)
    tree = create_react_node(llm, [lookup], max_iterations=3)
    state = start_state()
    result = await ReactiveRunner(tree, state).run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert "max_iterations=3" in (result.error or tree.feedback_message)
    assert state.get("rounds") == 3 and llm.remaining == 2


async def test_constraints_lower_max_iterations() -> None:
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}]] * 5)
    constraints = Constraints(max_iterations=2)
    tree = create_react_node(llm, [lookup], max_iterations=10, constraints=constraints)
    result = await ReactiveRunner(tree, start_state()).run(timeout=30)
    assert result.status is RunStatus.FAILURE and llm.remaining == 3


async def test_budget_exceeded_mid_loop() -> None:
    big = "x" * 400  # ~100 tokens of estimate per turn
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": big}}]] * 10)
    constraints = Constraints.model_validate({"guard": {"budget": {"total_tokens": 300}}})
    tree = create_react_node(llm, [lookup], constraints=constraints)
    state = start_state()
    result = await ReactiveRunner(tree, state).run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert "budget" in tree.feedback_message
    assert state.get("usage").total_tokens >= 300
    assert llm.remaining > 0


async def test_confirm_tool_suspends_then_finishes_after_approval() -> None:
    llm = ScriptedLLM([[{"id": "p1", "name": "pay", "arguments": {"amount": 5}}], "Paid."])
    tree = create_react_node(llm, [pay])
    state = start_state("pay 5")
    runner = ReactiveRunner(tree, state)
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED and [r.id for r in first.pending] == ["p1"]
    runner.approve("p1")
    done = await runner.run(timeout=30)
    assert done.status is RunStatus.SUCCESS and state.get("final_answer") == "Paid."
    assert [m.content for m in state.get("messages") if m.role == "tool"] == ["paid 5"]


async def test_llm_failure_is_a_failed_node_with_event() -> None:
    llm = ScriptedLLM([])  # runs out at once
    tree = create_react_node(llm, [lookup])
    runner = ReactiveRunner(tree, start_state())
    failed: list[Any] = []
    runner.ctx.events.subscribe("llm.call.failed", failed.append)
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE and len(failed) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_loop_over_real_http(stream: bool) -> None:
    script = [
        [{"name": "lookup", "arguments": {"city": "Paris"}},
         {"name": "lookup", "arguments": {"city": "Oslo"}}],
        "Sunny in Paris, snow in Oslo.",
    ]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with FakeOpenAIServer(script) as server:
        server.fail_next(1, 429)
        llm = OpenAIProvider("fake-model", base_url=server.base_url, retry_backoff=0)
        constraints = Constraints.model_validate({"guard": {"tool_policy": {"pay": "deny"}}})
        tree = create_react_node(llm, [lookup, pay], constraints=constraints, stream=stream)
        state = start_state()
        result = await ReactiveRunner(tree, state, tracer_provider=provider).run(timeout=30)
        await llm.close()
        assert result.status is RunStatus.SUCCESS, result.error
        assert state.get("final_answer") == "Sunny in Paris, snow in Oslo."
        assert [m.content for m in state.get("messages") if m.role == "tool"] == ["sunny", "snow"]
        for i in range(len(server.requests)):
            assert server.tool_names(i) == ["lookup"]  # the denied tool is never sent
        assert server.requests[-1]["messages"][-1]["role"] == "tool"
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat fake-model"]
    assert len(chats) == 2
    assert chats[0].attributes["gen_ai.request.model"] == "fake-model"
    assert "gen_ai.usage.input_tokens" in chats[0].attributes


async def test_server_error_exhausting_retries_fails_the_loop() -> None:
    with FakeOpenAIServer(["never reached"]) as server:
        server.fail_next(5, 500)
        llm = OpenAIProvider("fake-model", base_url=server.base_url, retry_backoff=0,
                             max_retries=2)
        tree = create_react_node(llm, [lookup])
        runner = ReactiveRunner(tree, start_state())
        failed: list[Any] = []
        runner.ctx.events.subscribe("llm.call.failed", failed.append)
        result = await runner.run(timeout=30)
        await llm.close()
    assert result.status is RunStatus.FAILURE
    assert "500" in failed[0].fields["error"] or "LLMTransientError" in failed[0].fields["error"]
    assert len(server.requests) == 3  # the first try and two retries


async def test_each_round_takes_two_ticks() -> None:
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}]] * 4 + ["done"])
    state = start_state()
    result = await ReactiveRunner(create_react_node(llm, [lookup]), state).run(timeout=30)
    assert result.status is RunStatus.SUCCESS and state.get("rounds") == 5
    # the first tick asks the model; each round ends two ticks later (the model's reply
    # starts the tools, their end starts the next turn); the answer needs no tools' tick
    assert result.ticks == 2 * 4 + 2


async def test_py_trees_debug_level_ticks_the_same_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import py_trees

    monkeypatch.setattr(py_trees.logging, "level", py_trees.logging.Level.DEBUG)
    monkeypatch.setattr(py_trees.console, "logdebug", lambda _msg: None)
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Oslo"}}], "snow"])
    state = start_state()
    result = await ReactiveRunner(create_react_node(llm, [lookup]), state).run(timeout=30)
    assert result.status is RunStatus.SUCCESS and state.get("final_answer") == "snow"
    assert [m.role for m in state.get("messages")] == ["user", "assistant", "tool", "assistant"]


class _OwnComplete(ScriptedLLM):
    """A provider with its own complete(): it receives the Tool objects, as always."""

    seen: list[Any]

    async def complete(self, messages: Any, *, tools: Any = None, tool_choice: Any = None,
                       **params: Any) -> Any:
        type(self).seen = list(tools or [])
        return await super().complete(messages, tools=tools, tool_choice=tool_choice, **params)


async def test_a_provider_sees_what_complete_would_build_or_its_own_complete_gets_tools() -> None:
    from jianmu.llm.provider import tools_to_openai

    base = ScriptedLLM(["ok"])
    state = start_state()
    await ReactiveRunner(create_react_node(base, [lookup, note]), state).run(timeout=30)
    assert list(base.requests[0].tools) == tools_to_openai([lookup, note])
    assert base.requests[0].messages == tuple(state.get("messages")[:1])
    own = _OwnComplete(["ok"])
    await ReactiveRunner(create_react_node(own, [lookup, note]), start_state()).run(timeout=30)
    assert _OwnComplete.seen == [lookup, note]
    assert list(own.requests[0].tools) == tools_to_openai([lookup, note])


# -- a run stopped mid-batch, run again -------------------------------------------------------
def _sent(llm: ScriptedLLM) -> list[tuple[str, list[str], str | None]]:
    return [(m.role, [c.id for c in m.tool_calls], m.tool_call_id)
            for m in llm.requests[-1].messages]


async def _stopped_during_a_call(
    answer: str,
) -> tuple[ReactiveRunner, ScriptedLLM, StateManager, list[str]]:
    """A run whose model called ``fetch`` and that was stopped while the call ran (then the
    call let go): its runner, model, state and the urls fetched."""
    import asyncio

    started: list[str] = []
    running, release = asyncio.Event(), asyncio.Event()

    @tool
    async def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: the page.
        """
        started.append(url)
        running.set()
        await release.wait()
        return f"page {url}"

    llm = ScriptedLLM([[{"id": "c1", "name": "fetch", "arguments": {"url": "a"}}], answer])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(create_react_node(llm, [fetch]), state)
    first = asyncio.ensure_future(runner.run(timeout=30))
    await running.wait()
    runner.cancel()  # or the run's timeout, or Ctrl-C in run_sync
    assert (await first).status is RunStatus.CANCELLED
    release.set()
    return runner, llm, state, started


async def test_a_run_stopped_mid_batch_runs_the_unfinished_call_before_asking_again() -> None:
    runner, llm, state, started = await _stopped_during_a_call("Read it.")
    again = await runner.run(timeout=30)
    assert again.ok and state.get("final_answer") == "Read it."
    # the call that did not finish ran again, and the model read its result; it was not
    # asked with a call that has none (OpenAI and Anthropic answer 400 to that)
    assert started == ["a", "a"] and len(llm.requests) == 2
    assert _sent(llm) == [("user", [], None), ("assistant", ["c1"], None), ("tool", [], "c1")]


async def test_a_stopped_call_in_a_worker_thread_is_not_run_twice_and_the_model_is_told() -> None:
    import asyncio
    import threading

    started: list[str] = []
    running, release = asyncio.Event(), threading.Event()
    loop = asyncio.get_running_loop()

    @tool(category="write")  # not idempotent: a call that may have been done is never redone
    def charge(amount: int) -> str:
        """Charge a card.

        Args:
            amount: how much.
        """
        started.append(str(amount))
        loop.call_soon_threadsafe(running.set)
        release.wait(30)
        return "charged"

    llm = ScriptedLLM([[{"id": "c1", "name": "charge", "arguments": {"amount": 5}}], "Done."])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(create_react_node(llm, [charge]), state)
    first = asyncio.ensure_future(runner.run(timeout=30))
    await running.wait()
    runner.cancel()
    assert (await first).status is RunStatus.CANCELLED
    release.set()
    assert (await runner.run(timeout=30)).ok
    assert started == ["5"] and len(llm.requests) == 2
    assert _sent(llm) == [("user", [], None), ("assistant", ["c1"], None), ("tool", [], "c1")]
    assert "may or may not have taken effect" in llm.requests[-1].messages[-1].content


async def test_a_run_stopped_mid_batch_then_a_new_message_closes_the_call_as_not_run() -> None:
    """The user stops a run during a call and writes again (``send``): the call that did not
    finish is recorded as not run to its end, before the new message, and not run again; the
    model is not sent a call without its result (which providers refuse)."""
    runner, llm, state, started = await _stopped_during_a_call("Hello.")
    runner.send("never mind, just say hello")
    again = await runner.run(timeout=30)
    assert again.ok and state.get("final_answer") == "Hello."
    assert started == ["a"] and len(llm.requests) == 2
    assert _sent(llm) == [("user", [], None), ("assistant", ["c1"], None), ("tool", [], "c1"),
                          ("user", [], None)]
    closed = llm.requests[-1].messages[2].content
    assert "stopped before this call's result came" in closed, closed
    stored = state.get("messages")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant"]
    assert not state.get("actions")


def test_a_history_with_a_call_left_without_its_result_goes_on() -> None:
    """``Agent.run_sync(..., history=result.messages)`` after a stopped run, or a history
    made by hand with a call left unanswered in the middle: each such call is closed as not
    run, in its place, so the model gets a conversation every provider accepts."""
    from jianmu import Agent

    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: the key.
        """
        return key

    def call(ident: str, key: str) -> dict[str, Any]:
        return {"id": ident, "type": "function",
                "function": {"name": "lookup", "arguments": f'{{"key": "{key}"}}'}}

    history = [
        {"role": "user", "content": "look a and b up"},
        {"role": "assistant", "tool_calls": [
            call("c1", "a"),
            call("c2", "b"),
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
        {"role": "user", "content": "forget b"},
        {"role": "assistant", "content": "Forgotten."},
        {"role": "user", "content": "and c?"},
        {"role": "assistant", "tool_calls": [
            call("c3", "c"),
        ]},
    ]
    llm = ScriptedLLM(["Fine."])
    result = Agent(llm, tools=[lookup]).run_sync("thanks", history=history)
    assert result.ok, result.error
    assert _sent(llm) == [
        ("user", [], None), ("assistant", ["c1", "c2"], None), ("tool", [], "c1"),
        ("tool", [], "c2"), ("user", [], None), ("assistant", [], None), ("user", [], None),
        ("assistant", ["c3"], None), ("tool", [], "c3"), ("user", [], None),
    ]


def test_a_react_loop_over_a_state_without_agentstates_fields_says_what_to_use() -> None:
    # the run failed with "state key 'done' is not a field of Notes", a key the user never
    # wrote: it named neither the loop nor AgentState
    from pydantic import BaseModel

    from jianmu import ReactiveRunner, ScriptedLLM, StateManager
    from jianmu.nodes import create_react_node

    class Notes(BaseModel):
        topic: str = ""

    runner = ReactiveRunner(create_react_node(ScriptedLLM(["hi"]), []), StateManager(Notes))
    result = runner.run_sync(timeout=10)
    assert result.status.value == "failure"
    message = str(result.exception)
    assert "'ReAct' needs AgentState's fields" in message
    assert "Notes lacks messages, actions" in message
    assert "StateManager(AgentState)" in message
