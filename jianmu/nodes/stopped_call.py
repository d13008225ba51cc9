"""What a model call stopped before its reply came spent (`jianmu.llm.in_flight`).

A call cancelled after its request went out (the run stopped or timed out, the node
pre-empted, a guardrail's trip) was billed: its prompt, and what the model wrote before the
connection closed. It counts as the server said it (a stream's usage so far, Anthropic's
``message_start``), else as the offline estimate of the messages and tools sent and of the
text and tool-call arguments received, one request; a call stopped before its request went
out counts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jianmu.errors import TokenBudgetExhausted
from jianmu.llm.in_flight import InFlight
from jianmu.llm.messages import Usage
from jianmu.nodes.history import counts_prompt, estimate_message_tokens
from jianmu.nodes.state import tokens_spent

if TYPE_CHECKING:
    from jianmu.runtime.async_node import RuntimeNode

__all__ = ("budget_spent", "stopped_usage")


def budget_spent(node: RuntimeNode, budget: int) -> TokenBudgetExhausted:
    """The error of a model call not made: the run's ``budget`` is spent (turns stopped
    before their reply count too, and no loop saw them end)."""
    return TokenBudgetExhausted(f"token budget exhausted: {tokens_spent(node)} of {budget} "
                                "tokens used "
                                "(guard.budget.total_tokens); the model was not asked")


def stopped_usage(call: InFlight | None,
                  request_tools: Callable[[Any], tuple[dict[str, Any], ...]],
                  emit: Callable[..., Any], model: str) -> Usage | None:
    """What ``call`` spent, stopped before its reply came, said by an ``llm.usage_unknown``
    event (``stopped``); ``None`` when its request never went out (or no call was in
    flight). ``request_tools`` gives a toolset's export."""
    if call is None or call.sent is False:
        return None
    usage = _spent(call, request_tools)
    emit("llm.usage_unknown", model=model, stopped=True,
         estimated_input_tokens=usage.input_tokens, estimated_output_tokens=usage.output_tokens)
    return usage


def _spent(call: InFlight, request_tools: Callable[[Any], tuple[dict[str, Any], ...]]) -> Usage:
    said, chars = call.stream.received() if call.stream is not None else (None, 0)
    output = (max(chars, call.text_chars) + 3) // 4
    if said is not None and counts_prompt(said):
        return Usage(input_tokens=said.input_tokens,
                     output_tokens=max(output, said.output_tokens),
                     cache_read_tokens=said.cache_read_tokens,
                     cache_creation_tokens=said.cache_creation_tokens, requests=1)
    prompt = sum(estimate_message_tokens(m) for m in call.messages or ())
    if call.tools is not None:
        tools = request_tools(call.tools)
        if tools:
            prompt += (len(json.dumps(list(tools), sort_keys=True)) + 3) // 4
    return Usage(input_tokens=prompt, output_tokens=output, requests=1, estimated_requests=1)
