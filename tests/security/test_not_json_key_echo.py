"""A server (or a proxy) whose unparseable answer (not JSON, not UTF-8) echoes the API key: the
error shows the text around the spot, and never the key or a part of it, wherever the window
cuts it."""

from __future__ import annotations

import asyncio

import pytest

from jianmu.errors import LLMError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import ChatRequest
from tests.support.raw_http import RawServer, Reply

KEY = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"
REQUEST = ChatRequest.build([{"role": "user", "content": "hi"}], None, None, {})


def _ask(server: RawServer, *, anthropic: bool, stream: bool) -> None:
    async def ask() -> None:
        llm: OpenAIProvider | AnthropicProvider = (
            AnthropicProvider("claude", base_url=server.url, api_key=KEY) if anthropic else
            OpenAIProvider("m", base_url=server.url + "/v1", api_key=KEY))
        try:
            if stream:
                async for _ in llm.send_stream(REQUEST):
                    pass
            else:
                await llm.send(REQUEST)
        finally:
            await llm.close()

    asyncio.run(ask())


def _shows_no_part_of_the_key(said: str) -> None:
    for size in range(8, len(KEY) + 1):  # no run of 8 characters of the key, from anywhere
        for start in range(len(KEY) - size + 1):
            assert KEY[start:start + size] not in said, said


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
@pytest.mark.parametrize("after", [30, 60, 75, 90, 96])
def test_a_key_echoed_in_text_that_is_not_json_is_never_shown(anthropic: bool,
                                                              after: int) -> None:
    # the parse fails at the end of the body, and the error shows the 100 characters before
    # it: with ``after`` characters after the key, that window holds the whole key, or cuts
    # it and starts inside it
    body = ('{"echo": "Authorization: Bearer ' + KEY + "y" * after + '", ').encode()
    server = RawServer(lambda request: Reply(pieces=[body]))
    with server, pytest.raises(LLMError) as caught:
        _ask(server, anthropic=anthropic, stream=False)
    said = str(caught.value)
    assert "not JSON" in said and "yyy" in said  # the text is shown
    _shows_no_part_of_the_key(said)


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream-ignored"])
@pytest.mark.parametrize("after", [30, 60, 75, 90, 96])
def test_a_key_echoed_in_a_body_that_is_not_utf8_is_never_shown(
        anthropic: bool, stream: bool, after: int) -> None:
    # the error shows the 100 characters before the byte that is not UTF-8: with ``after``
    # characters between the key and it, that window holds the whole key, or starts inside it
    body = ('{"echo": "Authorization: Bearer ' + KEY + "y" * after).encode() + b'\xe6\x97"}'
    server = RawServer(lambda request: Reply(pieces=[body]))
    with server, pytest.raises(LLMError) as caught:
        _ask(server, anthropic=anthropic, stream=stream)
    said = str(caught.value)
    assert "not UTF-8" in said and "yyy" in said  # the text is shown
    _shows_no_part_of_the_key(said)


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
def test_a_key_echoed_in_a_page_instead_of_an_event_stream_is_never_shown(
        anthropic: bool) -> None:
    page = ("<html>" + "z" * 170 + f"Bearer {KEY} rejected</html>").encode()
    server = RawServer(lambda request: Reply(pieces=[page], headers={
        "content-type": "text/html"}))
    with server, pytest.raises(LLMError, match="without") as caught:
        _ask(server, anthropic=anthropic, stream=True)
    _shows_no_part_of_the_key(str(caught.value))

