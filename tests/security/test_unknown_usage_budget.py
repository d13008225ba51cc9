"""A model server that reports no usage must not let a run escape its token budget: its
replies count as an estimate (and say so), never as 0 tokens."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, create_react_node, tool
from jianmu.config import parse_config
from jianmu.llm import AnthropicProvider, OpenAIProvider
from tests.support.model_server import ModelServer, Request, Turn


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def forever(request: Request) -> Turn:
    """Another call every turn, and never a word about usage."""
    return Turn(text="x" * 400, calls=[{"name": "ping", "arguments": {"host": "a" * 200}}],
                usage=None)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_server_without_usage_cannot_spend_past_the_budget(
    server: ModelServer, api: str,
) -> None:
    server.add(forever)
    llm: Any = (OpenAIProvider("m", base_url=server.openai_url, retry_backoff=0)
                if api == "openai" else AnthropicProvider("m", base_url=server.anthropic_url))
    config = parse_config("guard:\n  budget:\n    total_tokens: 1000\n")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "ping a"}]})
    agent = create_react_node(llm, [ping], max_iterations=50)
    runner = ReactiveRunner(agent, state, config=config)
    unknown: list[Any] = []
    runner.ctx.events.subscribe("llm.usage_unknown", unknown.append)
    result = runner.run_sync(timeout=60)
    assert result.status is RunStatus.FAILURE
    assert "token budget exhausted" in (result.error or "")
    # each turn's estimate is some 250 tokens: the budget stops the loop within a few turns
    assert len(server.requests) <= 6 and len(unknown) == len(server.requests)
    assert state.get("usage").total_tokens >= 1000


def zeros(request: Request) -> Turn:
    """Another call every turn, and a usage of 0 tokens: no count at all, in other words."""
    return Turn(text="x" * 400, calls=[{"name": "ping", "arguments": {"host": "a" * 200}}],
                usage=(0, 0))


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_server_that_counts_zero_tokens_cannot_spend_past_the_budget(
    server: ModelServer, api: str,
) -> None:
    """Fixed here (red team): a server that sent ``usage`` with 0 tokens for a prompt of
    hundreds was believed, so its run never reached the budget. A prompt is never 0 tokens:
    such a count is unknown usage, counted as the estimate."""
    server.add(zeros)
    llm: Any = (OpenAIProvider("m", base_url=server.openai_url, retry_backoff=0)
                if api == "openai" else AnthropicProvider("m", base_url=server.anthropic_url))
    config = parse_config("guard:\n  budget:\n    total_tokens: 1000\n")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "ping a"}]})
    runner = ReactiveRunner(create_react_node(llm, [ping], max_iterations=50), state,
                            config=config)
    result = runner.run_sync(timeout=60)
    assert result.status is RunStatus.FAILURE
    assert "token budget exhausted" in (result.error or "")
    assert len(server.requests) <= 6


def test_a_prompt_read_from_the_cache_is_the_servers_count() -> None:
    """Anthropic counts a prompt read from (or written to) its cache apart from
    ``input_tokens``, which may then be 0: that count is the server's, not unknown."""
    from jianmu.llm import LLMResponse, Message, Usage
    from jianmu.nodes.history import counted_usage

    prompt = [Message.user("x" * 400)]
    reply = Message.assistant("ok")
    for usage in (Usage(input_tokens=0, output_tokens=1, cache_read_tokens=500),
                  Usage(input_tokens=0, output_tokens=1, cache_creation_tokens=500)):
        response = LLMResponse(message=reply, usage=usage)
        assert counted_usage(response, prompt) is usage
    unknown = LLMResponse(message=reply, usage=Usage(input_tokens=0, output_tokens=1))
    assert counted_usage(unknown, prompt).input_tokens > 0
