"""An event stream whose body ends cleanly on its last event with no blank line after it (no
``data: [DONE]``, the server or proxy just closes or ends the chunks), on the raw keep-alive
server. The SDKs' decoders dropped that event, and it is the one that ends the reply (its
finish reason, ``message_stop``): a whole reply, answered and billed, failed as incomplete.
An event cut off mid-data still is no answer."""

from __future__ import annotations

import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, create_react_node
from jianmu.errors import LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from tests.support.raw_http import SSE, RawServer, Reply, anthropic_sse, chunk, message, openai_sse


def _events(api: str, text: str) -> list[bytes]:
    """A reply's events, each a piece, in CRLF framing, without ``[DONE]``."""
    if api == "openai":
        return openai_sse([chunk({"role": "assistant", "content": text[:3]}),
                           chunk({"content": text[3:]}), chunk(finish="stop")],
                          crlf=True, done=False)
    start = {**message([], usage={"input_tokens": 3, "output_tokens": 1}), "stop_reason": None}
    return anthropic_sse([
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 5}},
        {"type": "message_stop"}], crlf=True)


def _ending(pieces: list[bytes], end: bytes) -> list[bytes]:
    """``pieces`` with the last one's blank line (and line end) replaced by ``end``."""
    return [*pieces[:-1], pieces[-1].removesuffix(b"\r\n\r\n") + end]


def _llm(server: RawServer, api: str) -> OpenAIProvider | AnthropicProvider:
    if api == "openai":
        return OpenAIProvider("m", base_url=server.url + "/v1", max_retries=2, retry_backoff=0)
    return AnthropicProvider("claude", base_url=server.url, max_retries=2)


@pytest.mark.parametrize("close", [False, True], ids=["chunked", "closed"])
@pytest.mark.parametrize("end", [b"", b"\r\n", b"\r", b"\n"], ids=["none", "crlf", "cr", "lf"])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_last_event_without_a_blank_line_after_it_is_the_replys_end(
        api: str, end: bytes, close: bool) -> None:
    def reply(text: str) -> Reply:
        pieces = _ending(_events(api, text), end)
        if close:  # a body that ends with the connection
            return Reply(pieces=pieces, no_length=True, headers=SSE)
        return Reply(pieces=pieces, chunked=True, headers=SSE)

    replies = iter([reply("第一 answer 🎉"), reply("second")])
    with RawServer(lambda request: next(replies)) as server:
        llm = _llm(server, api)
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        runner = ReactiveRunner(create_react_node(llm, [], stream=True), state)
        first = runner.run_sync(timeout=30)
        assert first.ok, first.error
        assert state.get("final_answer") == "第一 answer 🎉"
        runner.send("again")
        second = runner.run_sync(timeout=30)
        assert second.ok, second.error
        assert state.get("final_answer") == "second"
    assert len(server.requests) == 2 and server.errors == []


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_last_event_cut_off_mid_data_is_still_no_answer(api: str) -> None:
    pieces = _events(api, "half")
    cut = [*pieces[:-1], pieces[-1][: len(pieces[-1]) // 2]]
    with RawServer(lambda request: Reply(pieces=cut, chunked=True, headers=SSE)) as server:
        llm = _llm(server, api)
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        result = ReactiveRunner(create_react_node(llm, [], stream=True), state).run_sync(
            timeout=30)
    assert not result.ok
    assert isinstance(result.exception, LLMTransientError)
    assert "ended before the reply did" in str(result.exception)
    assert len(server.requests) == 1  # answered and billed: not asked again
    assert [m.role for m in state.get("messages")] == ["user"]  # nothing lost, nothing added
