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


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize(("status", "said", "too_long"), [
    (400, "This model's maximum context length is 32768 tokens. However, you requested 40000 "
          "tokens (39000 in the messages, 1000 in the completion).", True),  # vLLM
    (400, "prompt is too long: 210443 tokens > 200000 maximum", True),  # Anthropic
    (400, "the request exceeds the available context size, try increasing it", True),  # llama
    (413, "Request exceeds the maximum allowed number of bytes.", True),
    (400, "tools.0.custom.name: String should match pattern", False),
    (422, "maximum context length is 8192 tokens", False),
])
def test_a_request_past_the_models_context_is_its_own_error(
    api: str, status: int, said: str, too_long: bool,
) -> None:
    from jianmu.errors import ContextTooLongError

    def refuse(request: Recorded) -> Reply:
        body = {"error": {"message": said, "type": "invalid_request_error"}}
        return Reply(status=status, pieces=[json.dumps(body).encode()],
                     headers={"content-type": "application/json"})

    with RawServer(refuse) as server:
        error = _fail(_provider(api, server.url))
    assert isinstance(error, ContextTooLongError) is too_long, error
    assert error.status_code == status and said[:20] in str(error)
    assert ("trim_history" in str(error)) is too_long
