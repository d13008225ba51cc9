"""A model call stopped after its request went out was billed: the run's usage counts it (the
prompt as the server said it or as estimated, the reply so far, one request), and says so in
an ``llm.usage_unknown`` event; a call stopped before its request went out counts nothing."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import py_trees
import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, create_react_node, tool
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.messages import Usage, coerce_messages
from jianmu.nodes.history import estimate_message_tokens
from jianmu.runtime.events import Event
from tests.support.raw_http import (
    SSE,
    USAGE,
    RawServer,
    Recorded,
    Reply,
    anthropic_sse,
    chunk,
    message,
    openai_sse,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


FIRST = {"role": "assistant", "content": "Hello, world", "tool_calls": [
    {"index": 0, "id": "c1", "type": "function",
     "function": {"name": "ping", "arguments": '{"host": "a'}}]}
"""The one event sent before the server waits: 12 characters of text, a call's name and the
start of its arguments (27 characters, 7 tokens)."""


def _openai_held(hold: threading.Event) -> Callable[[Recorded], Reply]:
    def answer(request: Recorded) -> Reply:
        first = b"".join(openai_sse([chunk(FIRST)], done=False))
        rest = openai_sse([chunk({"tool_calls": [{"index": 0, "function": {
            "arguments": '"}'}}]}, finish="tool_calls"), chunk(choices=False, usage=USAGE)])
        return Reply(headers=SSE, pieces=[first, *rest], chunked=True, hold=hold)
    return answer


@contextmanager
def _server(handler: Callable[[Recorded], Reply], hold: threading.Event) -> Iterator[RawServer]:
    with RawServer(handler) as server:
        try:
            yield server
        finally:
            hold.set()  # the held answers go on, and the server can stop


def _estimated_prompt(request: Recorded) -> int:
    """The offline estimate of what ``request`` sent: its messages, then its tools."""
    body = request.body
    messages = coerce_messages(body["messages"])
    return sum(estimate_message_tokens(m) for m in messages) + (
        len(json.dumps(body["tools"], sort_keys=True)) + 3) // 4


def _runner(llm: Any, root: Any = None, config: Any = None,
            ) -> tuple[ReactiveRunner, StateManager, list[Event], asyncio.Event]:
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Ping a."}]})
    runner = ReactiveRunner(root or create_react_node(llm, [ping], stream=True), state,
                            config=config)
    unknown: list[Event] = []
    runner.ctx.events.subscribe("llm.usage_unknown", unknown.append)
    came = asyncio.Event()
    runner.ctx.events.subscribe("llm.call.delta", lambda event: came.set())
    return runner, state, unknown, came


async def test_a_run_cancelled_while_the_model_streams_counts_what_it_spent() -> None:
    hold = threading.Event()
    with _server(_openai_held(hold), hold) as server:
        llm = OpenAIProvider("m", base_url=server.url + "/v1", api_key="k", retry_backoff=0)
        runner, state, unknown, came = _runner(llm)
        run = asyncio.create_task(runner.run())
        await came.wait()  # the answer began, and waits
        runner.cancel()
        result = await run
        [request] = server.requests
        await llm.close()
    assert result.status is RunStatus.CANCELLED
    usage = state.get("usage")
    assert usage == Usage(input_tokens=_estimated_prompt(request), output_tokens=7, requests=1,
                          estimated_requests=1)
    [said] = unknown
    assert said.fields["stopped"] is True
    assert said.fields["estimated_input_tokens"] == usage.input_tokens
    assert said.fields["estimated_output_tokens"] == 7


async def test_a_timeout_that_stops_an_agent_node_counts_the_servers_prompt_count() -> None:
    """Anthropic says the prompt's tokens in ``message_start``: that count, not the estimate;
    the node is stopped by a py_trees ``Timeout`` (its deadline moved once the answer began)."""
    hold = threading.Event()
    start = {**message([], usage={"input_tokens": 1234, "output_tokens": 1}),
             "stop_reason": None}
    events = [{"type": "message_start", "message": start},
              {"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "Hello, world"}}]

    def answer(request: Recorded) -> Reply:
        rest = anthropic_sse([{"type": "content_block_stop", "index": 0},
                              {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                               "usage": {"output_tokens": 3}},
                              {"type": "message_stop"}])
        return Reply(headers=SSE, pieces=[b"".join(anthropic_sse(events)), *rest],
                     chunked=True, hold=hold)

    with _server(answer, hold) as server:
        llm = AnthropicProvider("m", base_url=server.url, api_key="k")
        agent = create_react_node(llm, [ping], stream=True)
        timeout = py_trees.decorators.Timeout("deadline", agent, duration=1e6)
        runner, state, unknown, came = _runner(llm, timeout)
        run = asyncio.create_task(runner.run())
        await came.wait()
        timeout.finish_time = 0.0  # past: the next tick stops the agent
        runner.wake()
        result = await run
        await llm.close()
    assert result.status is RunStatus.FAILURE  # the Timeout's
    assert state.get("usage") == Usage(input_tokens=1234, output_tokens=3, requests=1)
    [said] = unknown
    assert said.fields["stopped"] is True


async def test_a_call_stopped_before_its_request_went_out_counts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused with a 503 (which bills nothing), then stopped while it waits to ask again."""
    from jianmu.llm import openai as openai_module

    waiting = asyncio.Event()

    async def backoff(delay: float) -> None:
        waiting.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(openai_module, "_backoff", backoff)
    hold = threading.Event()
    with _server(lambda r: Reply(status=503, pieces=[b'{"error": {"message": "busy"}}']),
                 hold) as server:
        llm = OpenAIProvider("m", base_url=server.url + "/v1", api_key="k", max_retries=3)
        runner, state, unknown, _ = _runner(
            llm, create_react_node(llm, [ping], stream=False))
        run = asyncio.create_task(runner.run())
        await waiting.wait()
        runner.cancel()
        result = await run
        await llm.close()
        assert len(server.requests) == 1
    assert result.status is RunStatus.CANCELLED
    assert state.get("usage") == Usage()
    assert unknown == []


class HostModel:
    """A provider of the host's own (no HTTP client of ours): its first reply is cut off at
    the token limit, and it never answers the request to go on."""

    model = "host"

    def __init__(self) -> None:
        self.asked: list[list[Any]] = []
        self.waiting = asyncio.Event()

    async def complete(self, messages: Any, *, tools: Any = None, **params: Any) -> Any:
        from jianmu.llm import LLMResponse, Message

        self.asked.append(list(messages))
        if len(self.asked) == 1:
            return LLMResponse(message=Message.assistant("Once upon a"), finish_reason="length",
                               usage=Usage(input_tokens=40, output_tokens=30))
        self.waiting.set()
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    async def close(self) -> None:
        pass


async def test_a_continued_answer_stopped_counts_its_parts_and_the_call_in_flight() -> None:
    """The part that came counts as the server said it; the call to go on, stopped, as the
    estimate of what it sent (a provider that says nothing of its requests: sent)."""
    llm = HostModel()
    runner, state, unknown, _ = _runner(llm, create_react_node(llm, [], on_cut_off="continue"))
    run = asyncio.create_task(runner.run())
    await llm.waiting.wait()
    runner.cancel()
    result = await run
    assert result.status is RunStatus.CANCELLED
    prompt = sum(estimate_message_tokens(m) for m in llm.asked[1])
    assert state.get("usage") == Usage(input_tokens=40 + prompt, output_tokens=30, requests=2,
                                       estimated_requests=1)
    [said] = unknown
    assert said.fields["stopped"] is True and said.fields["estimated_input_tokens"] == prompt


async def test_a_sub_agent_stopped_mid_answer_counts_in_the_callers_run() -> None:
    """The caller's run is cancelled while its agent tool's sub-agent streams: the sub-agent's
    stopped call adds to the run's usage (the root's, which every budget reads)."""
    from jianmu import ScriptedLLM
    from jianmu.nodes.agents import agent_tool

    hold = threading.Event()
    with _server(_openai_held(hold), hold) as server:
        llm = OpenAIProvider("m", base_url=server.url + "/v1", api_key="k", retry_backoff=0)
        sub = create_react_node(llm, [ping], stream=True, name="researcher")
        lead = ScriptedLLM([[{"name": "researcher", "arguments": {"input": "Ping a."}}], "ok"])
        tree = create_react_node(
            lead, [agent_tool(sub, name="researcher", description="Researches.")])
        runner, state, unknown, came = _runner(lead, tree)
        answered: list[Event] = []
        runner.ctx.events.subscribe("llm.call.completed", answered.append)
        run = asyncio.create_task(runner.run())
        await came.wait()
        runner.cancel()
        result = await run
        [request] = server.requests
        await llm.close()
    assert result.status is RunStatus.CANCELLED
    [lead_turn] = answered  # the lead's own turn, counted as its reply said
    stopped = Usage(input_tokens=_estimated_prompt(request), output_tokens=7, requests=1,
                    estimated_requests=1)
    assert state.get("usage") == stopped + Usage(
        input_tokens=lead_turn.fields["input_tokens"],
        output_tokens=lead_turn.fields["output_tokens"], requests=1)
    assert [e.fields["estimated_input_tokens"] for e in unknown] == [stopped.input_tokens]


class SlowStore:
    """A durable run's step recorder whose store is slow: each step is recorded, then its
    write waits (for ever), so a cancel comes after the reply came and was recorded."""

    def __init__(self) -> None:
        self.recorded: dict[str, Any] = {}
        self.writing = asyncio.Event()

    async def run(self, key: str, factory: Callable[[], Any]) -> Any:
        if key in self.recorded:
            return self.recorded.pop(key)
        value = await factory()
        self.recorded[key] = value
        self.writing.set()
        await asyncio.Event().wait()
        raise AssertionError("never written")

    async def mark_started(self, keys: Any) -> None:
        pass

    def maybe_repeated(self, key: str) -> bool:
        return False


async def test_a_durable_turn_stopped_once_its_reply_was_recorded_counts_it_once() -> None:
    """The reply came and its step was recorded: the replay counts it, the stopped call does
    not (it would be counted twice)."""
    from jianmu import ScriptedLLM

    store = SlowStore()
    llm = ScriptedLLM(["Hello."])
    runner, state, unknown, _ = _runner(llm, create_react_node(llm, []))
    runner.ctx.steps = store
    run = asyncio.create_task(runner.run())
    await store.writing.wait()
    runner.cancel()
    assert (await run).status is RunStatus.CANCELLED
    assert state.get("usage") == Usage() and unknown == []
    [(_, reply)] = store.recorded.items()
    again = ReactiveRunner(create_react_node(ScriptedLLM([]), []), state)
    again.ctx.steps = store  # the recorded reply, replayed
    assert (await again.run()).status is RunStatus.SUCCESS
    assert state.get("usage") == Usage(input_tokens=reply.usage.input_tokens,
                                       output_tokens=reply.usage.output_tokens, requests=1)


class Waiting:
    """A provider of the host's own that never answers."""

    model = "waiting"

    def __init__(self) -> None:
        self.asked: list[list[Any]] = []
        self.waiting = asyncio.Event()

    async def complete(self, messages: Any, *, tools: Any = None, **params: Any) -> Any:
        self.asked.append(list(messages))
        self.waiting.set()
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    async def close(self) -> None:
        pass


async def test_a_fallback_stopped_on_its_next_model_counts_that_call_once() -> None:
    """The first model refused (a 503 bills nothing), the next was asked and stopped: one
    request, the next model's prompt, estimated (its provider says nothing of its requests)."""
    from jianmu.llm import FallbackLLM

    hold = threading.Event()
    with _server(lambda r: Reply(status=503, pieces=[b'{"error": {"message": "busy"}}']),
                 hold) as server:
        first = OpenAIProvider("m", base_url=server.url + "/v1", api_key="k", max_retries=0)
        second = Waiting()
        llm = FallbackLLM([first, second])
        runner, state, unknown, _ = _runner(llm, create_react_node(llm, [], stream=False))
        run = asyncio.create_task(runner.run())
        await second.waiting.wait()
        runner.cancel()
        result = await run
        await first.close()
        assert len(server.requests) == 1
    assert result.status is RunStatus.CANCELLED
    prompt = sum(estimate_message_tokens(m) for m in second.asked[0])
    assert state.get("usage") == Usage(input_tokens=prompt, requests=1, estimated_requests=1)
    assert len(unknown) == 1


async def test_a_call_that_an_input_guardrail_stops_counts_what_it_sent() -> None:
    """The guardrail trips while the model is asked: the call it cancels was billed."""
    from jianmu import Tripwire
    from jianmu.errors import GuardrailTripped

    llm = Waiting()

    async def refuse(ctx: Any, text: str) -> Tripwire:
        await llm.waiting.wait()  # the model has the request
        return Tripwire("no")

    runner, state, unknown, _ = _runner(
        llm, create_react_node(llm, [ping], input_guardrails=[refuse]))
    result = await runner.run()
    assert isinstance(result.exception, GuardrailTripped)
    usage = state.get("usage")
    assert usage.requests == 1 and usage.output_tokens == 0
    assert usage.input_tokens > sum(estimate_message_tokens(m) for m in llm.asked[0])  # tools
    assert [e.fields["estimated_input_tokens"] for e in unknown] == [usage.input_tokens]
