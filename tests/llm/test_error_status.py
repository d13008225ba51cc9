"""A provider's failure says the HTTP status its server answered with (`LLMError.status_code`),
so a caller can tell a refused key from a rate limit without reading the message; a failure
without a status (a connection refused) has none."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from jianmu.errors import LLMError, LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from tests.support.raw_http import RawServer, Recorded, Reply


def _provider(api: str, url: str) -> Any:
    if api == "openai":
        return OpenAIProvider("m", base_url=url + "/v1", max_retries=0, api_key="sk-test-key")
    return AnthropicProvider("m", base_url=url, max_retries=0, api_key="sk-test-key")


def _fail(llm: Any) -> LLMError:
    async def ask() -> None:
        try:
            await llm.complete([{"role": "user", "content": "hi"}])
        finally:
            await llm.close()

    with pytest.raises(LLMError) as caught:
        asyncio.run(ask())
    return caught.value


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize(("status", "transient"), [(401, False), (404, False), (503, True)])
def test_a_failure_of_an_error_status_carries_it(api: str, status: int, transient: bool) -> None:
    def refuse(request: Recorded) -> Reply:
        body = {"error": {"message": "no", "type": "error"}}
        return Reply(status=status, pieces=[json.dumps(body).encode()],
                     headers={"content-type": "application/json"})

    with RawServer(refuse) as server:
        error = _fail(_provider(api, server.url))
    assert error.status_code == status, error
    assert isinstance(error, LLMTransientError) is transient


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_failure_with_no_answer_has_no_status(api: str) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = _fail(_provider(api, f"http://127.0.0.1:{port}"))
    assert isinstance(error, LLMTransientError) and error.status_code is None


def test_a_provider_of_ones_own_gives_the_status_as_it_raises() -> None:
    """``LLMTransientError("...", status_code=503)``, as a fake provider for a fallback test
    writes it, was a TypeError ("takes no keyword arguments"); the status is still kept
    through a pickle (a durable run's failure) and the fallback passes the model over."""
    import pickle

    from jianmu import Agent, FallbackLLM, ScriptedLLM

    class Down(ScriptedLLM):
        async def send(self, request: Any) -> Any:
            raise LLMTransientError("HTTP 503: overloaded", status_code=503)

    error = pickle.loads(pickle.dumps(LLMTransientError("HTTP 503", status_code=503)))
    assert (str(error), error.status_code) == ("HTTP 503", 503)
    assert LLMError("no status").status_code is None
    llm = FallbackLLM([Down([], model="primary"), ScriptedLLM(["Hello."], model="backup")])
    assert Agent(llm).run_sync("Hi").output == "Hello."
    failed = Agent(FallbackLLM([Down([], model="a"), Down([], model="b")])).run_sync("Hi")
    assert [e.status_code for e in failed.exception.failures] == [503, 503]  # type: ignore[union-attr]
