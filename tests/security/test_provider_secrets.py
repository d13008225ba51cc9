"""A provider's key and its URL's password stay out of what a failure shows: the run's error,
the exception and its chain as a traceback prints them, the provider's ``repr`` and Jianmu's
log lines, even when a server echoes the key in its error (as some do on a 401) or a proxy in
its page, and whether the reply was whole or streamed."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from jianmu import Agent
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import SDKProvider
from tests.support.model_server import ModelServer, Raw

KEY = "sk-live-Th1s-1s-Th3-K3y-0123456789"
PASSWORD = "pr0xy-Pa55w0rd-s3cret"


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def provider(server: ModelServer, api: str) -> SDKProvider:
    url = server.openai_url if api == "openai" else server.anthropic_url
    url = url.replace("http://", f"http://proxy:{PASSWORD}@")
    if api == "openai":
        return OpenAIProvider("m", base_url=url, api_key=KEY, max_retries=1, retry_backoff=0)
    return AnthropicProvider("m", base_url=url, api_key=KEY, max_retries=0)


ECHOES = [
    pytest.param(Raw(status=401, body={"type": "error", "error": {
        "type": "authentication_error", "message": f"Incorrect API key provided: {KEY}"}}),
        id="401"),
    pytest.param(Raw(status=503, content_type="text/html",
                     body=f"<html>upstream refused Authorization: Bearer {KEY}</html>"), id="503"),
    pytest.param(Raw(body=f"<html>Bearer {KEY} is not allowed here</html>",
                     content_type="text/html"), id="html-200"),
    # where an error shows the reply cut short, the key at the cut
    pytest.param(Raw(body=f"<html>{'x' * 180}{KEY}</html>", content_type="text/html"),
                 id="html-200-cut"),
    pytest.param(Raw(status=500, body=f"<html>{'x' * 490}{KEY}</html>",
                     content_type="text/html"), id="500-cut"),
    pytest.param(Raw(body={"error": {"message": f"bad key {KEY}", "type": "server_error"}},
                     events=[{"type": "error", "error": {"type": "overloaded_error",
                                                         "message": f"bad key {KEY}"}}]),
                 id="error-body"),
]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("reply", ECHOES)
def test_a_failure_never_shows_the_key_or_the_urls_password(
    server: ModelServer, api: str, stream: bool, reply: Raw, caplog: pytest.LogCaptureFixture,
) -> None:
    server.add(reply, reply)  # the same for a retry
    llm = provider(server, api)
    agent = Agent(llm)
    with caplog.at_level(logging.DEBUG, logger="jianmu"):
        if stream:
            async def read() -> Any:
                events = [e async for e in agent.stream("hi", timeout=30)]
                return events[-1].fields["result"]

            result = asyncio.run(read())
        else:
            result = agent.run_sync("hi", timeout=30)
    server._script.clear()
    assert not result.ok
    shown = [result.error or "", repr(llm), str(llm), caplog.text,
             "".join(traceback.format_exception(result.exception))]
    for text in shown:
        assert KEY[:12] not in text and PASSWORD not in text, text
    assert "127.0.0.1" in (result.error or "")  # the server is still named
