"""What a provider's ``timeout`` is, on the real keep-alive server: a read timeout (the longest
wait for a byte), never a limit on the whole call, so a proxy that keeps a long generation
alive with whitespace is not cut off; the whole call is bounded by the agent node's timeout
(``timeout=``, ``llm.timeout``), streamed or not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jianmu import Agent
from jianmu.errors import LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from tests.support.model_server import MODES, ModelServer, Stall


def _llm(server: ModelServer, api: str, timeout: float) -> Any:
    if api == "openai":
        return OpenAIProvider("m", base_url=server.openai_url, max_retries=0, timeout=timeout)
    return AnthropicProvider("m", base_url=server.anthropic_url, max_retries=0, timeout=timeout)


async def _ask(llm: Any, stream: bool) -> Any:
    messages = [{"role": "user", "content": "q"}]
    if stream:
        return [e async for e in llm.stream(messages)][-1].response
    return await llm.complete(messages)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_silent_server_fails_the_request_on_the_read_timeout_and_says_so(
    server: ModelServer, api: str, stream: bool,
) -> None:
    server.add(Stall())
    with pytest.raises(LLMTransientError) as caught:
        asyncio.run(_ask(_llm(server, api, 0.2), stream))
    said = str(caught.value)
    # the limit is on the wait for a byte, not on the whole call: the message says which
    assert "no byte" in said and "0.2" in said, said


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_the_agent_nodes_timeout_ends_a_call_kept_alive_byte_by_byte(
    server: ModelServer, api: str, stream: bool,
) -> None:
    """A byte every 0.05 s keeps a request with a read timeout of 30 s alive for ever: the
    agent node's timeout is the limit on the whole call."""
    server.add(Stall(every=0.05))
    agent = Agent(_llm(server, api, 30), stream=stream, llm_timeout=0.5)
    result = agent.run_sync("q")
    assert not result.ok
    assert "did not answer within 0.5 s" in (result.error or ""), result.error


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_call_that_times_out_waiting_to_retry_a_429_says_the_server_refused_it(
    server: ModelServer, api: str, stream: bool,
) -> None:
    """The server said 429 and asked for 30 s; the agent node's limit came first. The error
    said only that the model did not answer, as if it had been silent: a user looked for a
    slow model instead of the rate limit."""
    from tests.support.model_server import Raw

    refused = Raw(status=429, headers={"retry-after": "30"}, body={
        "type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
    server.add(refused, refused)
    llm = (OpenAIProvider("m", base_url=server.openai_url, max_retries=1) if api == "openai"
           else AnthropicProvider("m", base_url=server.anthropic_url, max_retries=1))
    result = Agent(llm, stream=stream, llm_timeout=0.5).run_sync("q")
    assert not result.ok and len(server.requests) == 1
    said = str(result.exception)
    assert "did not answer within 0.5 s" in said and "HTTP 429" in said, said
    assert result.usage.requests == 0  # refused: nothing billed
