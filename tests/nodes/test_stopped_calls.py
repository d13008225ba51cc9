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
    assert usage == Usage(input_tokens=_estimated_prompt(request), output_tokens=7, requests=1)
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
