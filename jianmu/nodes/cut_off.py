"""A reply the token limit cut off while it wrote a tool call: that call is never run.

A model stopped by its output limit (OpenAI's ``finish_reason: "length"``, Anthropic's
``stop_reason: "max_tokens"``, which providers report as ``length``) left its last call
unfinished: arguments broken off mid-string, a partial object that a server parsed anyway, or
none at all (``""``, which reads as ``{}`` and would run the tool with its defaults). Whatever
they parse to, they are not what the model meant. The agent's model node answers that call
itself, telling the model its reply was cut off at the token limit (so that it can write a
shorter one), and emits ``llm.call.cut_off``; the calls written whole before it run.
"""

from __future__ import annotations

from collections.abc import Sequence

from jianmu.llm.messages import Message
from jianmu.tools.calls import ToolCall

__all__ = ("LIMIT_REASONS", "cut_off_answers", "cut_off_calls")

LIMIT_REASONS = frozenset({"length", "max_tokens", "model_context_window_exceeded"})
"""Finish reasons that say the token limit ended the reply (the raw Anthropic ones too, for a
provider that passes them on as they came)."""


def cut_off_calls(finish_reason: str | None, calls: Sequence[ToolCall]) -> list[ToolCall]:
    """The calls of a reply that the token limit cut off: its last one when it ended at the
    limit (only the last call can have been in writing), else none.

    The last call is cut off even when its arguments parse: a server may parse what was
    written so far (keys written whole, a value cut short), and a model that had finished its
    call would have ended the reply for it (``tool_calls``), not at the limit.
    """
    if not calls or finish_reason not in LIMIT_REASONS:
        return []
    return [calls[-1]]


def cut_off_answers(calls: Sequence[ToolCall], finish_reason: str) -> list[Message]:
    """The tool message for each cut-off call: why it did not run, and what to do."""
    return [
        Message.tool(
            f"Error: not run. Your reply was cut off at the token limit (finish reason "
            f"{finish_reason!r}) while you wrote this call to {call.name!r}, so its arguments "
            "are incomplete. Write a shorter reply: call the tool again with less in its "
            "arguments, or split the work into smaller calls.",
            tool_call_id=call.id, name=call.name,
        )
        for call in calls
    ]
