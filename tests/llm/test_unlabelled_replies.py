"""A streamed request that a server answers with the whole JSON reply (it ignores ``stream``)
labelled something other than JSON (an event stream too), or with a type it sniffed (Go's
servers call JSON whose type they do not set ``text/plain``), on the raw keep-alive server:
read as the reply, as one labelled JSON is; it failed as "without any chunk", the billed reply
lost. An event stream however labelled is still read as a stream."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, create_react_node, tool
from jianmu.llm import AnthropicProvider, OpenAIProvider
from tests.support.raw_http import (
    RawServer,
    Reply,
    chunk,
    completion,
    json_reply,
    message,
    openai_sse,
)

_TYPES = ["text/plain; charset=utf-8", "application/octet-stream", "", "text/event-stream"]
_IDS = ["text", "octets", "empty", "event-stream"]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def _replies(api: str) -> list[dict[str, Any]]:
    """A whole tool call, then a whole answer."""
    if api == "openai":
        call = {"id": "c1", "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
        return [completion(None, tool_calls=[call]), completion("三 🎉")]
    return [message([{"type": "tool_use", "id": "c1", "name": "add", "input": {"a": 1, "b": 2}}],
                    stop="tool_use"), message([{"type": "text", "text": "三 🎉"}])]


def _llm(server: RawServer, api: str) -> OpenAIProvider | AnthropicProvider:
    if api == "openai":
        return OpenAIProvider("m", base_url=server.url + "/v1", max_retries=2, retry_backoff=0)
    return AnthropicProvider("claude", base_url=server.url, max_retries=2)


@pytest.mark.parametrize("kind", _TYPES, ids=_IDS)
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_whole_reply_not_labelled_json_answers_a_streamed_request(api: str, kind: str) -> None:
    replies = iter([json_reply(body, headers={"content-type": kind}) for body in _replies(api)])
    with RawServer(lambda request: next(replies)) as server:
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "1+2?"}]})
        runner = ReactiveRunner(create_react_node(_llm(server, api), [add], stream=True), state)
        result = runner.run_sync(timeout=30)
    assert result.ok, result.error
    assert state.get("final_answer") == "三 🎉"
    assert [r.body["stream"] for r in server.requests] == [True, True]
    assert server.errors == []


@pytest.mark.parametrize("kind", _TYPES, ids=_IDS)
def test_an_event_stream_not_labelled_one_is_still_a_stream(kind: str) -> None:
    pieces = openai_sse([chunk({"role": "assistant", "content": "fi"}), chunk({"content": "ne"}),
                         chunk(finish="stop")])
    reply = Reply(pieces=pieces, chunked=True, headers={"content-type": kind})
    with RawServer(lambda request: reply) as server:
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        runner = ReactiveRunner(create_react_node(_llm(server, "openai"), [], stream=True), state)
        result = runner.run_sync(timeout=30)
    assert result.ok, result.error
    assert state.get("final_answer") == "fine"
