"""A Claude reply whose text is only whitespace (``"\\n\\n"`` before its tool use), on a real
keep-alive server that refuses, as Anthropic does, a text block of whitespace sent back: the
turn goes back without it, and the run goes on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, ToolSet, create_react_node
from jianmu.llm import AnthropicProvider
from tests.support.raw_http import (
    SSE,
    RawServer,
    Recorded,
    Reply,
    anthropic_sse,
    json_reply,
    message,
)

_REFUSED = {"type": "error", "error": {
    "type": "invalid_request_error",
    "message": "messages: text content blocks must contain non-whitespace text"}}
_USAGE = {"input_tokens": 3, "output_tokens": 4}


def _streamed(blocks: list[dict[str, Any]], stop: str) -> Reply:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        **message([], usage={"input_tokens": 3, "output_tokens": 1}), "stop_reason": None}}]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events += [{"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}},
                       {"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": block["text"]}}]
        else:
            events += [{"type": "content_block_start", "index": index,
                        "content_block": {**block, "input": {}}},
                       {"type": "content_block_delta", "index": index, "delta": {
                           "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}]
        events.append({"type": "content_block_stop", "index": index})
    events += [{"type": "message_delta", "delta": {"stop_reason": stop},
                "usage": {"output_tokens": 4}}, {"type": "message_stop"}]
    return Reply(pieces=anthropic_sse(events), chunked=True, headers=SSE)


def _claude(request: Recorded) -> Reply:
    """Whitespace before a tool use, a whitespace-only answer, then a real one; a request
    that sends a text block of whitespace back is refused (HTTP 400), as Anthropic does."""
    sent = [block for turn in request.body["messages"] if isinstance(turn["content"], list)
            for block in turn["content"]]
    if any(b.get("type") == "text" and not b["text"].strip() for b in sent):
        return json_reply(_REFUSED, status=400)
    last = request.body["messages"][-1]["content"]
    if isinstance(last, str):
        blocks: list[dict[str, Any]] = [
            {"type": "text", "text": "\n\n"},
            {"type": "tool_use", "id": "t1", "name": "calculator", "input": {"expression": "1+1"}}]
        stop = "tool_use"
    else:
        again = any(b.get("text") == "and again?" for b in last)
        blocks, stop = [{"type": "text", "text": "Two." if again else " \n"}], "end_turn"
    if request.body.get("stream"):
        return _streamed(blocks, stop)
    return json_reply(message(blocks, stop=stop, usage=_USAGE))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_whitespace_text_block_is_not_sent_back(stream: bool) -> None:
    with RawServer(_claude) as server:
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "1+1?"}]})
        llm = AnthropicProvider("claude", base_url=server.url, max_retries=0)
        runner = ReactiveRunner(create_react_node(
            llm, ToolSet.resolve(["calculator"]), stream=stream), state)
        first = runner.run_sync()
        assert first.ok, first.error
        runner.send("and again?")
        second = runner.run_sync()
        assert second.ok, second.error
        assert state.get("final_answer") == "Two."
        assert server.connections == 1
    *_, last = server.bodies()
    assert last["messages"][1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "calculator", "input": {"expression": "1+1"}}]
