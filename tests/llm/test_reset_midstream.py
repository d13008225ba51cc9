"""A connection the server resets (RST) while a stream is being read, on the raw keep-alive
server: a clear, catchable error that says the answer broke off and why (the reset, not an
empty ``ReadError: ``), the request not asked again (it was answered), and the next request
goes on, on a new connection."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jianmu.errors import LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import ChatRequest, StreamDone, TextDelta
from tests.support.raw_http import SSE, RawServer, Reply, anthropic_sse, chunk, message, openai_sse

REQUEST = ChatRequest.build([{"role": "user", "content": "hi"}], None, None, {})


def _events(api: str) -> list[bytes]:
    """A reply's events, each a piece, the first piece holding its first text."""
    if api == "openai":
        return openai_sse([chunk({"role": "assistant", "content": "one "}),
                           chunk({"content": "two "}), chunk({"content": "three"}),
                           chunk(finish="stop")])
    start = {**message([], usage={"input_tokens": 3, "output_tokens": 1}), "stop_reason": None}
    events = anthropic_sse([
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "b"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 5}},
        {"type": "message_stop"}])
    return [b"".join(events[:3]), *events[3:]]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_stream_reset_midway_says_so_and_the_next_request_goes_on(api: str) -> None:
    read = threading.Event()  # the client has read the answer's start: then the reset
    pieces = _events(api)
    replies = iter([
        Reply(pieces=pieces, chunked=True, headers=SSE, hold=read, break_after=2, reset=True),
        Reply(pieces=pieces, chunked=True, headers=SSE)])
    with RawServer(lambda request: next(replies)) as server:
        llm: OpenAIProvider | AnthropicProvider = (
            OpenAIProvider("m", base_url=server.url + "/v1", max_retries=2, retry_backoff=0)
            if api == "openai" else
            AnthropicProvider("claude", base_url=server.url, max_retries=2))

        async def twice() -> tuple[BaseException, StreamDone]:
            with pytest.raises(LLMTransientError) as failed:
                async for event in llm.send_stream(REQUEST):
                    if isinstance(event, TextDelta):
                        read.set()
            events = [event async for event in llm.send_stream(REQUEST)]
            await llm.close()
            assert isinstance(events[-1], StreamDone)
            return failed.value, events[-1]

        error, done = asyncio.run(twice())
    assert "broke off midway" in str(error) or "failed midway" in str(error)
    assert "reset" in str(error).lower(), str(error)
    assert done.response.text in ("one two three", "ab")
    assert len(server.requests) == 2 and server.connections == 2
