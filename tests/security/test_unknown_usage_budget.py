"""A model server that reports no usage must not let a run escape its token budget: its
replies count as an estimate (and say so), never as 0 tokens; nor does an Anthropic stream
whose ``message_delta`` carries no usage count as ``message_start``'s placeholder of one
output token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, create_react_node, tool
from jianmu.config import parse_config
from jianmu.llm import AnthropicProvider, OpenAIProvider
from tests.support.model_server import ModelServer, Request, Turn
from tests.support.raw_http import SSE, RawServer, Recorded, Reply, anthropic_sse, message


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


def _spend(llm: Any, *, stream: bool = False) -> tuple[StateManager, list[Any]]:
    """A run of ``llm`` calling ``ping`` for ever under a budget of 1,000 tokens, stopped by
    it: its state and its ``llm.usage_unknown`` events."""
    config = parse_config("guard:\n  budget:\n    total_tokens: 1000\n")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "ping a"}]})
    agent = create_react_node(llm, [ping], max_iterations=50, stream=stream)
    runner = ReactiveRunner(agent, state, config=config)
    unknown: list[Any] = []
    runner.ctx.events.subscribe("llm.usage_unknown", unknown.append)
    result = runner.run_sync(timeout=60)
    assert result.status is RunStatus.FAILURE
    assert "token budget exhausted" in (result.error or "")
    return state, unknown


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
    state, unknown = _spend(llm)
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
    _spend(llm)
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


def _long_turn(request: Recorded) -> Reply:
    """400 characters and another call every turn; the usage only in ``message_start``."""
    start = {**message([], usage={"input_tokens": 50, "output_tokens": 1}), "stop_reason": None}
    arguments = json.dumps({"host": "a" * 200})
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "x" * 400}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": f"t{len(request.body['messages'])}", "name": "ping",
            "input": {}}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": arguments}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},  # no usage
        {"type": "message_stop"},
    ]
    return Reply(pieces=anthropic_sse(events), chunked=True, headers=SSE)



def test_a_stream_without_its_final_count_cannot_spend_past_the_budget() -> None:
    """Fixed here (red team): the reply's usage was message_start's (50 in, 1 out) for 400
    characters and a call of 200, so a run spent some 51 tokens a turn against its budget."""
    with RawServer(_long_turn) as server:
        _, unknown = _spend(AnthropicProvider("claude", base_url=server.url, max_retries=0),
                               stream=True)
    assert len(server.requests) <= 6 and len(unknown) == len(server.requests)
