"""Reasoning tokens that an OpenAI-compatible gateway reports beside ``completion_tokens``
rather than inside it (Gemini through several gateways: ``completion_tokens`` the visible
answer's, ``completion_tokens_details.reasoning_tokens`` apart, ``total_tokens`` all of them)
are billed output: they count, and a token budget stops the run on them. Counted as the
answer's alone, a run of a thinking model spent many times its budget."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, create_react_node, tool
from jianmu.config import parse_config
from jianmu.llm import OpenAIProvider
from tests.support.raw_http import (
    SSE,
    RawServer,
    Recorded,
    Reply,
    chunk,
    completion,
    json_reply,
    openai_sse,
)

pytestmark = pytest.mark.timeout(60)

# a gateway's count: 20 + 5 + 300 = 325 tokens billed, completion_tokens the answer's 5
_APART = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 325,
          "completion_tokens_details": {"reasoning_tokens": 300}}
# the same without a total: a completion smaller than its reasoning part leaves it out
_APART_NO_TOTAL = {"prompt_tokens": 20, "completion_tokens": 5,
                   "completion_tokens_details": {"reasoning_tokens": 300}}
# OpenAI's own: the reasoning inside completion_tokens (305), not to be counted twice
_INSIDE = {"prompt_tokens": 20, "completion_tokens": 305, "total_tokens": 325,
           "completion_tokens_details": {"reasoning_tokens": 300}}


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


def _thinker(usage: dict[str, Any]) -> Any:
    """A model that thinks at length and pings again, every turn."""

    def answer(request: Recorded) -> Reply:
        turn = len(request.body["messages"])
        call = {"id": f"c{turn}", "type": "function",
                "function": {"name": "ping", "arguments": json.dumps({"host": f"h{turn}"})}}
        if not request.body.get("stream"):
            return json_reply(completion(None, tool_calls=[call], usage=usage))
        return Reply(pieces=openai_sse([chunk({"tool_calls": [{**call, "index": 0}]}),
                                        chunk(finish="tool_calls"),
                                        chunk(choices=False, usage=usage)]),
                     chunked=True, headers=SSE)

    return answer


@pytest.mark.parametrize("usage", [_APART, _APART_NO_TOTAL], ids=["total", "no-total"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_reasoning_reported_apart_counts_and_the_budget_stops_the_run(
        stream: bool, usage: dict[str, Any]) -> None:
    # 325 tokens a call: the fourth passes 1,000, and no fifth is asked
    _spends_four_calls_of_325(usage, stream)


def _spends_four_calls_of_325(usage: dict[str, Any], stream: bool) -> None:
    """A run under a budget of 1,000 tokens against `_thinker` stops after its fourth call,
    each counted as 20 in and 305 out."""
    with RawServer(_thinker(usage)) as server:
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
        config = parse_config("guard:\n  budget:\n    total_tokens: 1000\n")
        llm = OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0)
        runner = ReactiveRunner(create_react_node(llm, [ping], stream=stream), state,
                                config=config)
        result = runner.run_sync()
    assert result.status is RunStatus.FAILURE, result
    assert "token budget exhausted" in (result.error or ""), result.error
    spent = state.get("usage")
    assert len(server.requests) == spent.requests == 4
    assert (spent.input_tokens, spent.output_tokens) == (80, 1220)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_reasoning_inside_the_completion_count_is_counted_once(stream: bool) -> None:
    _spends_four_calls_of_325(_INSIDE, stream)
