"""A model that a `FallbackLLM` passes over after the server took its request and began to
answer was billed, as the same failure is when no fallback follows: its spend counts in the
run's usage and against the token budget. Fixed here (red team): the backup's answer was all
the run counted, so a primary that billed 5,000 prompt tokens before breaking off (Anthropic's
``overloaded_error`` after ``message_start``, a stall past the timeout) went unseen, and a run
under a budget of 1,000 tokens went on."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import Agent, FallbackLLM
from jianmu.config import parse_config
from jianmu.llm import AnthropicProvider, OpenAIProvider
from tests.support.model_server import ModelServer, Raw, Stall

pytestmark = pytest.mark.timeout(60)

_START = {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [],
    "stop_reason": None, "stop_sequence": None,
    "usage": {"input_tokens": 5000, "output_tokens": 1}}}
_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def _run(primary_reply: Any, *, stream: bool, **options: Any) -> tuple[Any, ModelServer]:
    with ModelServer(primary_reply) as primary, ModelServer("Backup answer.") as backup:
        first = AnthropicProvider("claude", base_url=primary.anthropic_url, max_retries=0)
        second = OpenAIProvider("gpt", base_url=backup.openai_url, max_retries=0)
        agent = Agent(FallbackLLM([first, second]), stream=stream, **options)
        result = agent.run_sync("Hi.", timeout=30)
        assert len(primary.requests) == len(backup.requests) == 1
    return result, backup


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_primary_that_broke_off_after_billing_counts_beside_the_backup(stream: bool) -> None:
    reply = Raw(events=[_START, _OVERLOADED], body={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
        "content": [{"type": "text", "text": "Hello"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 5000, "output_tokens": 40}}, cut=None if stream else 60)
    result, _ = _run(reply, stream=stream)
    assert result.ok and result.output == "Backup answer."
    # the backup's 10 + 5 and the primary's: as the server said it, else the estimate
    assert result.usage.requests == 2
    if stream:
        assert result.usage.input_tokens == 5010
    else:  # the body broke before its count: the prompt's estimate
        assert result.usage.input_tokens > 10 and result.usage.estimated_requests == 1


def test_a_primary_that_stalled_past_the_timeout_counts_beside_the_backup() -> None:
    result, _ = _run(Stall(every=0.05), stream=True, llm_timeout=1)
    assert result.ok and result.output == "Backup answer."
    assert result.usage.requests == 2 and result.usage.estimated_requests == 1


def test_a_budget_sees_what_a_passed_over_primary_spent() -> None:
    config = parse_config("guard:\n  budget:\n    total_tokens: 1000\n")
    with ModelServer(Raw(events=[_START, _OVERLOADED])) as primary, \
            ModelServer("Let me look.", "never asked") as backup:
        first = AnthropicProvider("claude", base_url=primary.anthropic_url, max_retries=0)
        second = OpenAIProvider("gpt", base_url=backup.openai_url, max_retries=0)
        # a typed answer: the backup's text is refused and the loop would ask again
        agent = Agent(FallbackLLM([first, second]), stream=True, config=config,
                      output_type=int, output_mode="text")
        result = agent.run_sync("How many?", timeout=30)
        assert len(backup.requests) == 1  # the budget (5,015 of 1,000) stopped the next turn
    assert result.status.value == "failure"
    assert "token budget exhausted" in str(result.exception)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_primary_that_refused_with_an_error_status_counts_nothing(stream: bool) -> None:
    """An error status bills nothing: the backup's answer is all the run spent."""
    overloaded = Raw(status=529, body={"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}})
    result, _ = _run(overloaded, stream=stream)
    assert result.ok and result.output == "Backup answer."
    assert (result.usage.requests, result.usage.input_tokens, result.usage.output_tokens) \
        == (1, 10, 5)
