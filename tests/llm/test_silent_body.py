"""A streamed request whose answer's head came and whose body then went silent or closed
before its first byte, on the raw keep-alive server: an `LLMTransientError` that says so, as
for any answer that broke off, not the HTTP client's own ``ReadTimeout`` or
``RemoteProtocolError`` (the body's first bytes are read ahead, to tell a whole reply from an
event stream, outside the SDK that would have mapped them). Not asked again: it was answered."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jianmu.errors import LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import ChatRequest
from tests.support.raw_http import RawServer, Reply

REQUEST = ChatRequest.build([{"role": "user", "content": "hi"}], None, None, {})


@pytest.mark.parametrize("kind", ["text/event-stream", "application/json", "text/plain"],
                         ids=["event-stream", "json", "text"])
@pytest.mark.parametrize("silent", [True, False], ids=["silent", "closed"])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_body_that_never_begins_is_a_clear_transient_error(
        api: str, silent: bool, kind: str) -> None:
    later = threading.Event()  # a silent body's bytes, let go once the client gave up
    rest = b'data: {"never": "read"}\n\n'
    reply = (Reply(pieces=[b"", rest], headers={"content-type": kind}, hold=later) if silent
             else Reply(pieces=[b"", rest], headers={"content-type": kind}, break_after=1))
    with RawServer(lambda request: reply) as server:
        llm: OpenAIProvider | AnthropicProvider = (
            OpenAIProvider("m", base_url=server.url + "/v1", max_retries=2, retry_backoff=0,
                           timeout=0.3) if api == "openai" else
            AnthropicProvider("claude", base_url=server.url, max_retries=2, timeout=0.3))

        async def ask() -> None:
            try:
                async for _ in llm.send_stream(REQUEST):
                    pass
            finally:
                later.set()
                await llm.close()

        with pytest.raises(LLMTransientError) as failed:
            asyncio.run(ask())
    said = str(failed.value)
    assert "not asked again" in said and "127.0.0.1" in said
    assert ("no byte came" in said) if silent else ("broke off midway" in said)
    assert len(server.requests) == 1
