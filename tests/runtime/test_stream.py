"""`ReactiveRunner.stream()`: a run's own events, in order, ending with one ``run.finished`` that
carries the `RunResult`; the model's text as deltas; an early ``break`` that cancels cleanly; a
slow reader that loses nothing; a suspended run streamed again after approval; a sub-agent's
events in its caller's stream. And the errors a run ends with, as objects."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from jianmu import Agent, ReactiveRunner, RunFailed, ScriptedLLM, SQLiteCheckpointer, StateManager
from jianmu.errors import OutputValidationError, StateValidationError
from jianmu.llm import LLMResponse, Message, Usage
from jianmu.nodes import AgentState, agent_tool, create_react_node
from jianmu.runtime import RunStatus
from jianmu.runtime.events import Event
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


@tool
def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def start(question: str = "Weather in Oslo?") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": question}]})


def three_turns() -> ScriptedLLM:
    return ScriptedLLM([
        [{"name": "lookup", "arguments": {"city": "Oslo"}}],
        [{"name": "lookup", "arguments": {"city": "Bergen"}}],
        "Oslo and Bergen are both sunny today.",
    ])


async def collect(runner: ReactiveRunner, **kwargs: Any) -> list[Event]:
    return [event async for event in runner.stream(**kwargs)]


async def test_the_stream_is_the_buses_events_in_order_ending_with_the_result() -> None:
    runner = ReactiveRunner(create_react_node(three_turns(), [lookup]), start())
    seen: list[Event] = []
    runner.ctx.events.subscribe("*", seen.append)
    events = await collect(runner, timeout=30)
    assert events == seen and all(a is b for a, b in zip(events, seen, strict=True))
    names = [e.name for e in events]
    assert names.count("run.finished") == 1 and names[-1] == "run.finished"
    result = events[-1].fields["result"]
    assert result.ok and result.run_id == runner.run_id
    assert result.output is None and runner.state.get("final_answer").startswith("Oslo and")
    steps = [n for n in names if n in (
        "llm.call.started", "llm.call.completed", "tool.call.started", "tool.call.completed")]
    assert steps == [
        "llm.call.started", "llm.call.completed", "tool.call.started", "tool.call.completed",
        "llm.call.started", "llm.call.completed", "tool.call.started", "tool.call.completed",
        "llm.call.started", "llm.call.completed",
    ]
    done = [e for e in events if e.name == "tool.call.completed"]
    assert [(e.fields["tool"], e.fields["call_id"], e.fields["result_preview"]) for e in done] \
        == [("lookup", "call_1", "sunny in Oslo"), ("lookup", "call_2", "sunny in Bergen")]
    started = [e for e in events if e.name == "tool.call.started"]
    assert [e.fields["call_id"] for e in started] == ["call_1", "call_2"]


async def test_deltas_arrive_while_the_model_answers_and_join_back_to_the_answer() -> None:
    runner = ReactiveRunner(create_react_node(three_turns(), [lookup]), start())
    events = await collect(runner, timeout=30)
    names = [e.name for e in events]
    last_start = len(names) - 1 - names[::-1].index("llm.call.started")
    deltas = [e for e in events if e.name == "llm.call.delta"]
    assert len(deltas) > 3  # word by word, not the whole answer at once
    assert all(last_start < events.index(d) < names.index("run.finished") for d in deltas)
    assert all(d.node == "ReAct/ReAct.round/ReAct.llm" for d in deltas)
    assert "".join(d.fields["text"] for d in deltas) == runner.state.get("final_answer")
    completed = max(i for i, n in enumerate(names) if n == "llm.call.completed")
    assert events.index(deltas[-1]) < completed


async def test_a_run_without_a_reader_does_not_stream() -> None:
    class Counting(ScriptedLLM):
        streamed = 0

        async def send_stream(self, request: Any) -> Any:
            self.streamed += 1
            async for event in super().send_stream(request):
                yield event

    llm = Counting(["a short answer"])
    assert (await ReactiveRunner(create_react_node(llm, []), start()).run()).ok
    assert llm.streamed == 0
    llm = Counting(["a short answer"])
    recorder = ReactiveRunner(create_react_node(llm, []), start())
    everything: list[Event] = []
    recorder.ctx.events.subscribe("*", everything.append)  # records all, asks for no kind
    recorder.ctx.events.subscribe("llm.call.*", everything.append)  # as the CLI's progress
    assert (await recorder.run()).ok and llm.streamed == 0 and everything
    llm = Counting(["a short answer"])
    listener = ReactiveRunner(create_react_node(llm, []), start())
    deltas: list[Event] = []
    listener.ctx.events.subscribe("llm.call.delta", deltas.append)  # the old way still streams
    assert (await listener.run()).ok and llm.streamed == 1 and len(deltas) == 3
    llm = Counting(["a short answer"])
    events = await collect(ReactiveRunner(create_react_node(llm, []), start()))
    assert llm.streamed == 1 and [e.fields["text"] for e in events
                                  if e.name == "llm.call.delta"] == ["a ", "short ", "answer"]


async def test_a_provider_that_cannot_stream_gives_its_answer_as_one_delta() -> None:
    """A provider of ``complete()`` alone gave no delta at all: a reader that prints the
    deltas, as README's chat loop does, printed nothing; a base provider's reply is replayed
    as deltas, and so is this one's, whole."""
    class OnlyComplete:
        model = "plain"

        async def complete(self, messages: Any, **kwargs: Any) -> LLMResponse:
            return LLMResponse(message=Message.assistant("plain answer"))

        async def close(self) -> None:
            pass

    runner = ReactiveRunner(create_react_node(OnlyComplete(), []), start())  # type: ignore[arg-type]
    events = await collect(runner)
    assert events[-1].fields["result"].ok and runner.state.get("final_answer") == "plain answer"
    assert [e.fields["text"] for e in events if e.name == "llm.call.delta"] == ["plain answer"]


async def test_an_openai_compatible_server_streams_the_run() -> None:
    from jianmu.llm import OpenAIProvider
    from tests.support.fake_openai import FakeOpenAIServer, FakeReply

    with FakeOpenAIServer([
        FakeReply(tool_calls=[{"name": "lookup", "arguments": {"city": "Oslo"}}]),
        FakeReply(text="Oslo is sunny all day.", chunk_size=4),
    ]) as server:
        async with OpenAIProvider("m", base_url=server.base_url) as llm:
            runner = ReactiveRunner(create_react_node(llm, [lookup]), start())
            events = await collect(runner, timeout=30)
    assert events[-1].fields["result"].ok
    deltas = [e.fields["text"] for e in events if e.name == "llm.call.delta"]
    assert deltas[:2] == ["Oslo", " is "] and "".join(deltas) == "Oslo is sunny all day."
    assert all(body.get("stream") is True for body in server.requests)
    assert [e.fields["result_preview"] for e in events if e.name == "tool.call.completed"] \
        == ["sunny in Oslo"]


def slow_tool() -> tuple[Any, asyncio.Event, asyncio.Event]:
    running, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def wait_forever(what: str) -> str:
        """Wait for something that never comes.

        Args:
            what: the thing.
        """
        running.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return what

    return wait_forever, running, cancelled


def waiting_run() -> tuple[ReactiveRunner, asyncio.Event, asyncio.Event, list[Event]]:
    wait_forever, running, cancelled = slow_tool()
    llm = ScriptedLLM([[{"name": "wait_forever", "arguments": {"what": "rain"}}], "never"])
    runner = ReactiveRunner(create_react_node(llm, [wait_forever]), start())
    finished: list[Event] = []
    runner.ctx.events.subscribe("run.finished", finished.append)
    return runner, running, cancelled, finished


async def test_a_plain_break_with_a_tool_running_cancels_the_run_cleanly() -> None:
    runner, running, cancelled, finished = waiting_run()
    before = asyncio.all_tasks()
    async for event in runner.stream():
        if event.name == "tool.call.started":
            await running.wait()
            break
    await cancelled.wait()  # the tool saw CancelledError
    for _ in range(200):  # the generator closes in a task of its own once dropped
        if finished and asyncio.all_tasks() == before:
            break
        await asyncio.sleep(0)
    assert [e.fields["status"] for e in finished] == ["cancelled"]
    assert asyncio.all_tasks() == before


def once_slow_run() -> tuple[ReactiveRunner, asyncio.Event, asyncio.Event]:
    """A run whose one tool waits for ever on its first call and answers on the next."""
    running, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def fetch(what: str) -> str:
        """Fetch a thing.

        Args:
            what: the thing.
        """
        if not cancelled.is_set():
            running.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return f"got {what}"

    llm = ScriptedLLM([[{"name": "fetch", "arguments": {"what": "rain"}}], "Got the rain."])
    return ReactiveRunner(create_react_node(llm, [fetch]), start()), running, cancelled


async def _break_at_the_tool(runner: ReactiveRunner, running: asyncio.Event) -> None:
    async for event in runner.stream(timeout=30):
        if event.name == "tool.call.started":
            await running.wait()
            break  # the generator is dropped here; the loop closes it a step later


@pytest.mark.parametrize("again", ["run", "stream"])
async def test_the_runner_is_free_right_after_a_plain_break(again: str) -> None:
    """``run()`` or ``stream()`` at once after a ``break`` (no ``aclosing``) does not find the
    runner running: it waits for the left run to stop, then goes on with it."""
    runner, running, cancelled = once_slow_run()
    before = asyncio.all_tasks()
    await _break_at_the_tool(runner, running)
    if again == "run":
        result = await runner.run(timeout=30)
    else:
        result = [event async for event in runner.stream(timeout=30)][-1].fields["result"]
    assert cancelled.is_set() and result.ok, result.error
    assert runner.state.get("final_answer") == "Got the rain."
    for _ in range(200):  # the dropped generator's own close, a task the loop made
        if asyncio.all_tasks() == before:
            break
        await asyncio.sleep(0)
    assert asyncio.all_tasks() == before


async def test_send_right_after_a_plain_break_is_the_next_turn() -> None:
    """A chat's stop button, then its next message: ``send()`` at once after a ``break`` (the
    left run still stopping) is not refused; the message is added as that run ends, after
    its stopped call's result, and the next run answers it."""
    runner, running, cancelled = once_slow_run()
    await _break_at_the_tool(runner, running)
    with pytest.raises(StateValidationError):  # checked at once: nothing is kept of it
        runner.send({"role": "user", "content": ["not", "text"], "tool_calls": 3})
    runner.send("Forget the rain. Snow?")
    result = await runner.run(timeout=30)
    assert cancelled.is_set() and result.ok, result.error
    said = [(m.role, m.content) for m in runner.state.get("messages")]
    assert [role for role, _ in said] == ["user", "assistant", "tool", "user", "assistant"]
    assert said[3] == ("user", "Forget the rain. Snow?") and said[4][1] == "Got the rain."


async def test_send_while_a_run_goes_on_is_still_refused_and_after_cancel_waits() -> None:
    """Only a run told to stop takes the next message early: one going on refuses it (its
    end would answer another turn); after ``cancel()`` it is added once the run has ended."""
    runner, running, cancelled = once_slow_run()
    task = asyncio.create_task(runner.run(timeout=30))
    await running.wait()
    with pytest.raises(RuntimeError, match="while the run is going"):
        runner.send("Snow?")
    runner.cancel()
    runner.send("Snow?")
    assert [m.role for m in runner.state.get("messages")] == ["user", "assistant"]  # not yet
    stopped = await task
    assert stopped.status is RunStatus.CANCELLED and cancelled.is_set()
    assert [m.content for m in stopped.messages][-1] != "Snow?"  # the stopped run's own
    assert runner.state.get("messages")[-1].content == "Snow?"
    assert (await runner.run(timeout=30)).ok


async def test_a_stream_still_held_keeps_the_runner_running() -> None:
    """A reader that stopped reading but holds its stream has not left: ``run()`` is refused
    and the run goes on for that reader."""
    runner, running, cancelled = once_slow_run()
    events = runner.stream(timeout=30)
    while (await anext(events)).name != "tool.call.started":
        pass
    await running.wait()
    with pytest.raises(RuntimeError, match="already running"):
        await runner.run()
    assert not cancelled.is_set()
    await events.aclose()
    assert cancelled.is_set()


async def test_closing_the_stream_returns_once_the_run_has_stopped() -> None:
    runner, running, cancelled, finished = waiting_run()
    before = asyncio.all_tasks()
    async with contextlib.aclosing(runner.stream()) as events:
        async for event in events:
            if event.name == "tool.call.started":
                await running.wait()
                break
    assert cancelled.is_set() and [e.fields["status"] for e in finished] == ["cancelled"]
    assert asyncio.all_tasks() == before
    # the runner is free again: the stopped run can be run once more
    assert runner.interaction.pending == []


async def test_async_with_closes_the_stream_on_leaving_the_block() -> None:
    """pydantic-ai's ``async with agent.run_stream(...) as result:``, ported to Jianmu's
    spelling, works as `contextlib.aclosing` does: leaving the block waits for the stopped
    run (it raised "'async_generator' object does not support the asynchronous context
    manager protocol")."""
    runner, running, cancelled, finished = waiting_run()
    before = asyncio.all_tasks()
    async with runner.stream() as events:
        assert isinstance(events, AsyncGenerator)
        async for event in events:
            if event.name == "tool.call.started":
                await running.wait()
                break
        assert not cancelled.is_set()  # held by the block: the run goes on until it ends
    assert cancelled.is_set() and [e.fields["status"] for e in finished] == ["cancelled"]
    assert asyncio.all_tasks() == before

    agent = Agent(three_turns(), tools=[lookup])
    async with agent.stream("Weather in Oslo?", timeout=30) as events:
        seen = [await anext(events)] + [event async for event in events]
    assert [e.name for e in seen].count("run.finished") == 1
    assert seen[-1].fields["result"].output == "Oslo and Bergen are both sunny today."


async def test_a_reader_that_is_cancelled_cancels_the_run() -> None:
    runner, running, cancelled, finished = waiting_run()
    before = asyncio.all_tasks()

    async def read() -> None:
        async for _event in runner.stream():
            pass

    reader = asyncio.ensure_future(read())
    await running.wait()
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert cancelled.is_set() and [e.fields["status"] for e in finished] == ["cancelled"]
    assert asyncio.all_tasks() == before


@pytest.mark.parametrize("by", ["runner", "agent"])
async def test_a_reader_in_a_cancelled_anyio_scope_stops_the_run_as_cancel_does(by: str) -> None:
    """anyio's scopes (``fail_after``, a Starlette response whose client left) cancel the
    reader again at every turn of the loop: the run still stops as ``cancel()`` stops it, its
    tool's clean-up whole and its ``run.finished`` told. The reader cancelled twice used to
    cancel the run's task: the clean-up was cut short and the run ended with no event."""
    running, cleaned = asyncio.Event(), asyncio.Event()

    @tool
    async def fetch(what: str) -> str:
        """Fetch a thing slowly.

        Args:
            what: the thing.
        """
        running.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            for _ in range(20):  # a clean-up that awaits: the loop turns meanwhile
                await asyncio.sleep(0)
            cleaned.set()
            raise
        return what

    llm = ScriptedLLM([[{"name": "fetch", "arguments": {"what": "rain"}}], "never"])
    runner = ReactiveRunner(create_react_node(llm, [fetch]), start())
    agent = Agent(llm, tools=[fetch])
    finished: list[Event] = []
    before = asyncio.all_tasks()
    with anyio.CancelScope() as scope:
        events = runner.stream(timeout=30) if by == "runner" else agent.stream("Rain?")
        async for event in events:
            if event.name == "tool.call.started":
                run = runner if by == "runner" else next(iter(agent._runs))
                run.ctx.events.subscribe("run.finished", finished.append)
                await running.wait()
                scope.cancel()
    assert scope.cancelled_caught and cleaned.is_set()
    assert [event.fields["status"] for event in finished] == ["cancelled"]
    assert asyncio.all_tasks() == before


async def test_a_second_stream_of_a_running_runner_is_refused_before_any_event() -> None:
    runner = ReactiveRunner(create_react_node(three_turns(), [lookup]), start())
    first = runner.stream(timeout=30)
    second = runner.stream(timeout=30)
    # both readers start before the first run's task has taken a step
    opening = await asyncio.gather(anext(first), anext(second), return_exceptions=True)
    assert isinstance(opening[1], RuntimeError) and "already running" in str(opening[1])
    rest = [event async for event in first]
    assert rest[-1].name == "run.finished" and rest[-1].fields["result"].ok
    assert [event async for event in second] == []  # it ended: it read nothing of the run


async def test_a_slow_reader_loses_no_event() -> None:
    runner = ReactiveRunner(create_react_node(three_turns(), [lookup]), start())
    seen: list[Event] = []
    ended = asyncio.Event()

    def record(event: Event) -> None:
        seen.append(event)
        if event.name == "run.finished":
            ended.set()

    runner.ctx.events.subscribe("*", record)
    got: list[Event] = []
    async for event in runner.stream(timeout=30):
        got.append(event)
        if len(got) == 1:
            await ended.wait()  # read nothing more until the whole run is over
    assert len(got) > 20 and got == seen and got[-1].name == "run.finished"


async def test_a_suspended_run_streams_up_to_the_suspend_and_goes_on_after_approval() -> None:
    @tool(confirm=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        return f"deployed to {target}"

    llm = ScriptedLLM([[{"name": "deploy", "arguments": {"target": "prod"}}], "Deployed it."])
    runner = ReactiveRunner(create_react_node(llm, [deploy]), start("ship it"))
    first = await collect(runner, timeout=30)
    names = [e.name for e in first]
    assert names.count("run.finished") == 1 and names[-1] == "run.finished"
    assert "run.suspended" in names and "tool.call.completed" not in names
    paused = first[-1].fields["result"]
    assert paused.status is RunStatus.SUSPENDED and paused.raise_for_status() is paused
    runner.approve(paused.pending[0].id)
    second = await collect(runner, timeout=30)
    names = [e.name for e in second]
    assert names.count("run.finished") == 1 and names[-1] == "run.finished"
    assert "tool.call.completed" in names
    assert second[-1].fields["result"].ok
    assert "".join(e.fields["text"] for e in second if e.name == "llm.call.delta") \
        == "Deployed it."


async def test_a_sub_agents_deltas_and_tool_calls_stream_under_its_path() -> None:
    def researcher() -> Any:
        llm = ScriptedLLM([
            [{"name": "lookup", "arguments": {"city": "Oslo"}}], "It is sunny in Oslo.",
        ])
        return create_react_node(llm, [lookup], name="researcher")

    ask = agent_tool(researcher, name="research", description="Ask the researcher.")
    lead = ScriptedLLM([
        [{"name": "research", "arguments": {"input": "Oslo weather?"}, "id": "r1"}],
        "The researcher says: sunny.",
    ])
    runner = ReactiveRunner(create_react_node(lead, [ask], name="lead"), start())
    events = await collect(runner, timeout=30)
    names = [e.name for e in events]
    assert names.count("run.finished") == 1 and names[-1] == "run.finished"
    assert events[-1].fields["result"].ok
    sub = "lead/lead.round/lead.tools/research[r1]/researcher"
    deltas = [e for e in events if e.name == "llm.call.delta"]
    inner = [e for e in deltas if (e.node or "").startswith(sub)]
    outer = [e for e in deltas if e.node == "lead/lead.round/lead.llm"]
    assert "".join(e.fields["text"] for e in inner) == "It is sunny in Oslo."
    assert "".join(e.fields["text"] for e in outer) == "The researcher says: sunny."
    inner_tools = [e for e in events if e.name == "tool.call.completed"
                   and (e.node or "").startswith(sub)]
    assert [(e.fields["tool"], e.fields["result_preview"]) for e in inner_tools] == [
        ("lookup", "sunny in Oslo")]
    # the sub-run's end is its own event, before the caller's tool call completes
    assert names.index("agent.finished") < max(
        i for i, e in enumerate(events) if e.name == "tool.call.completed"
        and e.fields["tool"] == "research")


# -- errors as objects ----------------------------------------------------------------------


class Invoice(BaseModel):
    customer: str
    total: float


async def test_a_failed_typed_answer_is_the_results_exception() -> None:
    llm = ScriptedLLM([[{"name": "final_result", "arguments": {"customer": 7}}]] * 3)
    runner = ReactiveRunner(create_react_node(llm, [], output_type=Invoice), start())
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE
    error = result.exception
    assert isinstance(error, OutputValidationError)
    assert {path for path, _ in error.problems} >= {"$.customer", "$.total"}
    assert '"customer": 7' in error.raw or '"customer":7' in error.raw
    with pytest.raises(OutputValidationError) as raised:
        result.raise_for_status()
    assert raised.value is error
    assert [m.role for m in result.messages][:2] == ["user", "assistant"]
    assert len(result.messages) == len(runner.state.get("messages"))


async def test_success_has_no_exception_and_returns_itself() -> None:
    result = await ReactiveRunner(create_react_node(three_turns(), [lookup]), start()).run()
    assert result.exception is None and result.raise_for_status() is result
    assert result.messages[-1].content == "Oslo and Bergen are both sunny today."


async def test_a_failure_without_an_exception_raises_run_failed() -> None:
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Oslo"}}]] * 3)
    result = await ReactiveRunner(
        create_react_node(llm, [lookup], max_iterations=2), start()).run()
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, RunFailed)
    with pytest.raises(RunFailed, match="max_iterations=2"):
        result.raise_for_status()


async def test_a_spent_token_budget_is_the_results_exception_by_its_type() -> None:
    """The loop that stops after a round for the budget fails with the guard's own error, as
    the model node does when it refuses a call for it: ``except TokenBudgetExhausted`` holds
    whichever saw it first (it was a bare `RunFailed`)."""
    from jianmu import Constraints
    from jianmu.errors import TokenBudgetExhausted

    budget = Constraints.model_validate({"guard": {"budget": {"total_tokens": 10}}})
    runner = ReactiveRunner(create_react_node(three_turns(), [lookup], constraints=budget),
                            start())
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, TokenBudgetExhausted)
    assert "token budget exhausted" in str(result.exception)
    assert "TokenBudgetExhausted: token budget exhausted" in (result.error or "")
    with pytest.raises(TokenBudgetExhausted) as raised:
        result.raise_for_status()
    assert raised.value is result.exception


async def test_timeout_and_cancel_raise_run_failed_saying_which() -> None:
    runner, running, _cancelled, _finished = waiting_run()
    result = await runner.run(timeout=0.05)  # the tool never ends: the deadline must come
    assert result.status is RunStatus.TIMEOUT and result.exception is None
    with pytest.raises(RunFailed, match="timed out") as raised:
        result.raise_for_status()
    assert raised.value.status == "timeout" and raised.value.result is result

    runner, running, _cancelled, _finished = waiting_run()
    task = asyncio.ensure_future(runner.run())
    await running.wait()
    runner.cancel()
    result = await task
    assert result.status is RunStatus.CANCELLED
    with pytest.raises(RunFailed, match="was cancelled"):
        result.raise_for_status()


# -- usage counts -----------------------------------------------------------------------------


async def test_usage_counts_model_requests_and_executed_tool_calls() -> None:
    state = start()
    result = await ReactiveRunner(create_react_node(three_turns(), [lookup]), state).run()
    usage = result.usage
    assert isinstance(usage, Usage) and usage == state.get("usage")
    assert (usage.requests, usage.tool_calls) == (3, 2) and usage.total_tokens > 0
    both = usage + Usage(requests=1, tool_calls=4, input_tokens=1)
    assert (both.requests, both.tool_calls) == (4, 6)
    assert sum([usage, usage]).requests == 6
    copy = StateManager(AgentState)
    copy.restore(state.snapshot())  # checkpointed with the state
    assert copy.get("usage") == usage


async def test_a_sub_agents_requests_and_calls_add_to_the_runs_usage() -> None:
    def researcher() -> Any:
        return create_react_node(ScriptedLLM([
            [{"name": "lookup", "arguments": {"city": "Oslo"}}], "sunny",
        ]), [lookup], name="researcher")

    ask = agent_tool(researcher, name="research", description="Ask the researcher.")
    lead = ScriptedLLM([[{"name": "research", "arguments": {"input": "Oslo?"}}], "sunny."])
    result = await ReactiveRunner(create_react_node(lead, [ask], name="lead"), start()).run()
    assert result.ok
    # the lead: 2 requests and 1 call (research); the researcher: 2 requests, 1 call (lookup)
    assert (result.usage.requests, result.usage.tool_calls) == (4, 2)


async def test_denied_calls_are_not_counted_as_executed() -> None:
    from jianmu import Constraints

    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Oslo"}}], "no weather"])
    deny = Constraints.model_validate({"guard": {"tool_policy": {"lookup": "deny"}}})
    result = await ReactiveRunner(
        create_react_node(llm, [lookup], constraints=deny), start()).run()
    assert result.ok and (result.usage.requests, result.usage.tool_calls) == (2, 0)


async def test_a_reader_that_stops_at_the_runs_end_finds_the_run_given_up(tmp_path: Path) -> None:
    """The run's ``run.finished`` comes once `run()` has returned: a reader that stops there
    (a ``break``) may restore, approve or resume the run elsewhere at once. Found by the
    scenario fuzz: on a run that had ended (streamed again), the lease was still held there, and
    another owner was refused ("that owner is deciding or continuing it now")."""
    def agent() -> Any:
        return create_react_node(ScriptedLLM(["Hello."]), [], name="chat")

    with SQLiteCheckpointer(tmp_path / "runs.sqlite") as store:
        runner = ReactiveRunner(agent(), StateManager(AgentState, {
            "messages": [{"role": "user", "content": "Hi."}]}), checkpointer=store, run_id="r1")
        assert (await runner.run()).ok
        async for event in runner.stream():  # the ended run, streamed again
            if event.name == "run.finished":
                assert event.fields["result"].ok
                break
        again = ReactiveRunner.restore(agent(), store, "r1",
                                       state_manager=StateManager(AgentState))
        assert (await again.run()).ok
