"""Anthropic's ``pause_turn``, on the real keep-alive server: a long turn (server tools such as
web search) that the API paused is no answer yet. As Anthropic documents, the reply goes back
as it came, as the assistant's turn, and the model continues it; the run's answer is the whole
turn, its usage both requests' (counted as two)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, create_react_node
from jianmu.errors import LLMError
from jianmu.llm import AnthropicProvider
from tests.support.model_server import ModelServer, Raw

SEARCH = [
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
     "input": {"query": "jianmu weather"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
     "content": [{"type": "web_search_result", "title": "Weather", "url": "https://example.org",
                  "encrypted_content": "abc", "page_age": None}]},
]


def _message(content: list[dict[str, Any]], stop: str, usage: tuple[int, int]) -> dict[str, Any]:
    return {"id": f"msg_{stop}", "type": "message", "role": "assistant", "model": "m",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}


def _events(content: list[dict[str, Any]], stop: str, usage: tuple[int, int]) -> list[Any]:
    """The message's events as Anthropic streams them (server tool blocks come whole)."""
    start = _message([], "", usage)
    start["stop_reason"] = None
    out: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(content):
        if block["type"] == "text":
            out += [{"type": "content_block_start", "index": index,
                     "content_block": {"type": "text", "text": ""}},
                    {"type": "content_block_delta", "index": index,
                     "delta": {"type": "text_delta", "text": block["text"]}}]
        elif block["type"] == "server_tool_use":
            out += [{"type": "content_block_start", "index": index,
                     "content_block": {**block, "input": {}}},
                    {"type": "content_block_delta", "index": index,
                     "delta": {"type": "input_json_delta", "partial_json": '{"query": '}},
                    {"type": "content_block_delta", "index": index,
                     "delta": {"type": "input_json_delta", "partial_json": '"jianmu weather"}'}}]
        else:
            out.append({"type": "content_block_start", "index": index, "content_block": block})
        out.append({"type": "content_block_stop", "index": index})
    return [*out, {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                   "usage": {"output_tokens": usage[1]}}, {"type": "message_stop"}]


def _reply(content: list[dict[str, Any]], stop: str, usage: tuple[int, int]) -> Raw:
    return Raw(body=_message(content, stop, usage), events=_events(content, stop, usage))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_paused_turn_is_continued_to_its_answer(server: ModelServer, stream: bool) -> None:
    paused = [{"type": "text", "text": "Let me look that up."}, *SEARCH]
    server.add(_reply(paused, "pause_turn", (20, 5)),
               _reply([{"type": "text", "text": " It is sunny."}], "end_turn", (30, 4)))
    llm = AnthropicProvider("m", base_url=server.anthropic_url, max_retries=0)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "weather?"}]})
    runner = ReactiveRunner(create_react_node(llm, [], stream=stream), state)
    result = runner.run_sync(timeout=30)
    assert result.ok, result.error
    assert state.get("final_answer") == "Let me look that up. It is sunny."
    first, second = server.requests
    # the paused reply went back as it came, as the assistant's turn, to be continued
    assert second.body["messages"][:-1] == first.body["messages"]
    sent = second.body["messages"][-1]
    assert sent["role"] == "assistant"
    assert [b["type"] for b in sent["content"]] == ["text", "server_tool_use",
                                                    "web_search_tool_result"]
    assert sent["content"][1]["input"] == {"query": "jianmu weather"}
    assert sent["content"][2]["content"][0]["encrypted_content"] == "abc"
    usage = state.get("usage")
    # two requests answered, each billed: counted as two model requests, not one
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (50, 9, 2)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_turn_paused_for_ever_is_a_clear_error(server: ModelServer, stream: bool) -> None:
    server.add(lambda request: _reply([{"type": "text", "text": "Still looking."}],
                                      "pause_turn", (5, 1)))
    llm = AnthropicProvider("m", base_url=server.anthropic_url, max_retries=0)

    async def ask() -> Any:
        messages = [{"role": "user", "content": "weather?"}]
        if stream:
            return [e async for e in llm.stream(messages)][-1].response
        return await llm.complete(messages)

    with pytest.raises(LLMError, match="paused"):
        asyncio.run(ask())
    assert 1 < len(server.requests) <= 20  # continued, but not for ever
