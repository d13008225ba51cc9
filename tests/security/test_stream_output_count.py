"""An Anthropic-compatible stream whose ``message_delta`` carries no usage must not let a run
escape its token budget: ``message_start`` counts the output so far (a token), not the reply's,
so the reply's usage is unknown (estimated, and said so), not that placeholder."""

from __future__ import annotations

import json
from typing import Any

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, create_react_node, tool
from jianmu.config import parse_config
from jianmu.llm import AnthropicProvider
from tests.support.raw_http import RawServer, Recorded, Reply, anthropic_sse, message


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


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
    return Reply(pieces=anthropic_sse(events), chunked=True,
                 headers={"content-type": "text/event-stream"})


def test_a_stream_without_its_final_count_cannot_spend_past_the_budget() -> None:
    """Fixed here (red team): the reply's usage was message_start's (50 in, 1 out) for 400
    characters and a call of 200, so a run spent some 51 tokens a turn against its budget."""
    with RawServer(_long_turn) as server:
        llm = AnthropicProvider("claude", base_url=server.url, max_retries=0)
        config = parse_config("guard:\n  budget:\n    total_tokens: 1000\n")
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "ping a"}]})
        agent = create_react_node(llm, [ping], max_iterations=50, stream=True)
        runner = ReactiveRunner(agent, state, config=config)
        unknown: list[Any] = []
        runner.ctx.events.subscribe("llm.usage_unknown", unknown.append)
        result = runner.run_sync(timeout=60)
    assert result.status is RunStatus.FAILURE
    assert "token budget exhausted" in (result.error or "")
    assert len(server.requests) <= 6 and len(unknown) == len(server.requests)
