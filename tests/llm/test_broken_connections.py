"""Connections that break, on the real keep-alive server: a kept-alive connection the server
closed between turns is sent on again at once (nothing was answered), whatever the retries;
an answer that broke off midway is never asked again (the server answered, and billed it); an
error status whose body broke off, stalled or could not be decoded is the refusal it said
(nothing billed), retried as any."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, create_react_node
from jianmu.errors import LLMError, LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import SDKProvider
from tests.support.model_server import MODES, Drop, ModelServer, Raw, Stall


def provider(server: ModelServer, api: str, retries: int) -> SDKProvider:
    if api == "openai":
        return OpenAIProvider("m", base_url=server.openai_url, max_retries=retries,
                              retry_backoff=0)
    return AnthropicProvider("m", base_url=server.anthropic_url, max_retries=retries)


@pytest.mark.parametrize("retries", [0, 2])
@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_kept_alive_connection_closed_between_turns_is_sent_on_again(
    server: ModelServer, api: str, stream: bool, retries: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.add("First.", Drop(), "Second.")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    runner = ReactiveRunner(create_react_node(provider(server, api, retries), [],
                                              stream=stream), state)
    assert runner.run_sync(timeout=30).ok
    runner.send("again")
    with caplog.at_level(logging.WARNING):
        result = runner.run_sync(timeout=30)
    assert result.ok, result.error
    assert state.get("final_answer") == "Second."
    first, dropped, again = server.requests
    assert dropped.connection == first.connection  # the kept-alive one, closed by the server
    assert again.connection != first.connection and again.body == dropped.body
    assert not [r for r in caplog.records if "retry" in r.getMessage()]  # no backoff, no noise


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_server_that_drops_every_request_fails_clearly(
    server: ModelServer, api: str, stream: bool,
) -> None:
    server.add("First.", Drop(), Drop(), "Never.")
    llm = provider(server, api, 0)

    async def ask() -> Any:
        messages = [{"role": "user", "content": "hi"}]
        if stream:
            return [e async for e in llm.stream(messages)][-1].response
        return await llm.complete(messages)

    async def twice() -> None:
        assert (await ask()).text == "First."
        with pytest.raises(LLMTransientError, match=r"127\.0\.0\.1"):
            await ask()

    asyncio.run(twice())
    # sent again once, on a new connection that the server dropped too: not for ever
    assert len(server.requests) == 3 and len(server.connections) == 2


def _whole(api: str) -> dict[str, Any]:
    text = "A long answer that the server sends, and bills, whether or not it all arrives."
    if api == "openai":
        return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 20}}
    return {"id": "m", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 20}}


def _events(api: str) -> list[dict[str, Any]]:
    if api == "openai":
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        return [{**chunk, "choices": [{"index": 0, "delta": {"content": f"part {i} "},
                                       "finish_reason": None}]} for i in range(6)]
    message = {**_whole(api), "content": [], "stop_reason": None}
    return [{"type": "message_start", "message": message},
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}},
            *({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": f"part {i} "}} for i in range(6))]


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_an_answer_that_broke_off_is_never_asked_again(
    server: ModelServer, api: str, stream: bool,
) -> None:
    server.add(Raw(body=_whole(api), events=_events(api), cut=120), "Back again.")
    llm = provider(server, api, 2)

    async def ask() -> Any:
        messages = [{"role": "user", "content": "hi"}]
        if stream:
            return [e async for e in llm.stream(messages)][-1].response
        return await llm.complete(messages)

    with pytest.raises(LLMError) as failed:
        asyncio.run(ask())
    assert "127.0.0.1" in str(failed.value)
    assert len(server.requests) == 1  # answered once: not asked (and billed) again
    assert asyncio.run(ask()).text == "Back again."  # the next request goes on as usual


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_answer_that_cannot_be_decoded_is_never_asked_again(
    server: ModelServer, api: str,
) -> None:
    """A body that says gzip and is not: the server answered (and billed); a clear error."""
    server.add(Raw(body="this is not gzip", headers={"content-encoding": "gzip"}), "Back again.")
    llm = provider(server, api, 2)
    with pytest.raises(LLMError, match=r"127\.0\.0\.1"):
        asyncio.run(llm.complete([{"role": "user", "content": "hi"}]))
    assert len(server.requests) == 1
    assert asyncio.run(llm.complete([{"role": "user", "content": "hi"}])).text == "Back again."


async def _asked(llm: SDKProvider, stream: bool) -> Any:
    messages = [{"role": "user", "content": "hi"}]
    if stream:
        return [e async for e in llm.stream(messages)][-1].response
    return await llm.complete(messages)


_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error",
                                          "message": "Overloaded, please try again"}}


@pytest.mark.parametrize("body", ["cut", "not-gzip"])
@pytest.mark.parametrize(("api", "stream"), MODES)
def test_an_error_status_whose_body_broke_off_is_retried(
    server: ModelServer, api: str, stream: bool, body: str,
) -> None:
    """A 503 whose body was cut short (a proxy that drops the connection after the status
    line) or is not the gzip it says is a refusal, which billed nothing: asked again as any
    503 is. A stream's failed with the HTTP client's bare error (no retry, no fallback), and
    OpenAI took a whole reply's for an answer that broke off, billed: not asked again."""
    refused = (Raw(status=503, body=_OVERLOADED, cut=20) if body == "cut" else
               Raw(status=503, body="this is not gzip", headers={"content-encoding": "gzip"}))
    server.add(refused, "Back again.")
    assert asyncio.run(_asked(provider(server, api, 2), stream)).text == "Back again."
    assert len(server.requests) == 2


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_an_error_status_whose_body_stalled_or_broke_off_fails_with_its_status(
    server: ModelServer, api: str, stream: bool,
) -> None:
    """With no retry left, the error is the refusal's: its status, and what became of its
    body, not the HTTP client's ``ReadTimeout`` or ``RemoteProtocolError``."""
    server.add(Stall(status=503), Raw(status=429, body=_OVERLOADED, cut=20))
    llm: SDKProvider = (
        OpenAIProvider("m", base_url=server.openai_url, max_retries=0, timeout=0.2)
        if api == "openai" else
        AnthropicProvider("m", base_url=server.anthropic_url, max_retries=0, timeout=0.2))
    for status, said in ((503, "no byte of its body came for 0.2s"),
                         (429, "its body broke off: RemoteProtocolError")):
        with pytest.raises(LLMTransientError) as failed:
            asyncio.run(_asked(llm, stream))
        assert failed.value.status_code == status
        assert f"HTTP {status} from http://127.0.0.1" in str(failed.value)
        assert said in str(failed.value), failed.value
    assert len(server.requests) == 2
