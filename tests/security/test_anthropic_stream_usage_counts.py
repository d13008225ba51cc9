"""The counts of an Anthropic stream's ``message_delta`` are cumulative: a compatible server
that puts a placeholder there (SGLang's ``input_tokens: 0`` beside the real count it gave in
``message_start``) must not take the prompt's tokens out of the count, and a server that
gives them only there (GLM's ``message_start`` says 0) must have them counted. Counted as 0,
a run's prompts were free, and a token budget never stopped a long run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, create_react_node, tool
from jianmu.config import parse_config
from jianmu.llm import AnthropicProvider
from tests.support.raw_http import SSE, RawServer, Recorded, Reply, anthropic_sse, message

pytestmark = pytest.mark.timeout(60)

# (message_start's usage, message_delta's usage): 300 prompt tokens (100 of them read from the
# cache) and 5 output tokens a call, as each server says it
_SERVERS = {
    "sglang": ({"input_tokens": 200, "cache_read_input_tokens": 100, "output_tokens": 1},
               {"input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 5}),
    "glm": ({"input_tokens": 0, "output_tokens": 0},
            {"input_tokens": 200, "cache_read_input_tokens": 100, "output_tokens": 5}),
    "anthropic": ({"input_tokens": 200, "cache_read_input_tokens": 100, "output_tokens": 1},
                  {"input_tokens": 200, "cache_read_input_tokens": 100, "output_tokens": 5}),
}


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


def _pinger(start: dict[str, Any], delta: dict[str, Any]) -> Any:
    """A model that pings again, every turn, streamed."""

    def answer(request: Recorded) -> Reply:
        turn = len(request.body["messages"])
        use = {"type": "tool_use", "id": f"t{turn}", "name": "ping", "input": {}}
        events = [
            {"type": "message_start", "message": {**message([], usage=start),
                                                  "stop_reason": None}},
            {"type": "content_block_start", "index": 0, "content_block": use},
            {"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps({"host": f"h{turn}"})}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": delta},
            {"type": "message_stop"},
        ]
        return Reply(pieces=anthropic_sse(events), chunked=True, headers=SSE)

    return answer


@pytest.mark.parametrize("server_kind", list(_SERVERS))
def test_a_streamed_prompt_counts_whichever_event_gives_it(server_kind: str) -> None:
    with RawServer(_pinger(*_SERVERS[server_kind])) as server:
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
        config = parse_config("guard:\n  budget:\n    total_tokens: 1000\n")
        llm = AnthropicProvider("claude", base_url=server.url, max_retries=0)
        runner = ReactiveRunner(create_react_node(llm, [ping], stream=True), state,
                                config=config)
        result = runner.run_sync()
    assert result.status is RunStatus.FAILURE, result
    assert "token budget exhausted" in (result.error or ""), result.error
    spent = state.get("usage")
    # 305 tokens a call: the fourth passes 1,000, and no fifth is asked
    assert len(server.requests) == spent.requests == 4
    assert (spent.input_tokens, spent.cache_read_tokens, spent.output_tokens) == (1200, 400, 20)
