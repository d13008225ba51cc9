"""Replies stopped before their end: by the token limit (a tool call never run, an answer
continued), or by a content filter before they said anything (the run fails).

A model stopped by its output limit (OpenAI's ``finish_reason: "length"``, Anthropic's
``stop_reason: "max_tokens"``, which providers report as ``length``) left its reply unfinished.

*A tool call* it was writing has arguments broken off mid-string, a partial object that a
server parsed anyway, or none at all (``""``, which reads as ``{}`` and would run the tool with
its defaults). Whatever they parse to, they are not what the model meant. The agent's model
node answers that call itself, telling the model its reply was cut off at the token limit (so
that it can write a shorter one), and emits ``llm.call.cut_off``; the calls written whole
before it run.

*An answer* (text, no tool call) ends in half a sentence. The node's ``on_cut_off`` decides:
``continue`` (the default) asks the model to go on exactly where it stopped, with the text so
far as its turn and a note after it, up to ``max_continuations`` times, and joins the parts
into one answer, one assistant message; ``fail`` fails the run with `OutputTruncatedError`
(the text so far kept); ``accept`` keeps the partial answer. Each cut is an
``llm.call.cut_off`` event whose ``outcome`` says which (``continued``, ``failed``,
``accepted``). A note rather than Anthropic's prefill (the text as the last, assistant turn):
Claude 4.6 and later refuse a request that ends with an assistant turn, and so does a request
with extended thinking on.

*A reply a content filter stopped* (finish reason ``content_filter``; Anthropic's ``refusal``)
with no text and no tool call fails the run with `ContentFilterError`: asking again would be
filtered again, and an empty answer is no answer. One that still holds text is the answer. One
that holds tool calls was stopped while it wrote the last: that call is answered as not run,
as a call the token limit cut off is (its arguments may be cut short, whatever they parse to),
and the calls written whole before it run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from jianmu.errors import ContentFilterError, OutputTruncatedError
from jianmu.llm.messages import Message, Usage
from jianmu.llm.provider import LIMIT_REASONS, LLMResponse
from jianmu.tools.calls import ToolCall

__all__ = (
    "CONTINUE_NOTE",
    "CUT_OFF_POLICIES",
    "LIMIT_REASONS",
    "CutOffPolicy",
    "answer_cut_off",
    "continue_messages",
    "cut_off_answers",
    "cut_off_calls",
    "filtered_error",
    "joined_reply",
    "text_cut_off_event",
    "truncated_error",
)

CutOffPolicy = Literal["continue", "fail", "accept"]
"""What an answer cut off at the token limit becomes (see the module)."""
CUT_OFF_POLICIES: tuple[str, ...] = get_args(CutOffPolicy)

FILTERED = "content_filter"
"""The finish reason of a reply a content filter stopped (Anthropic's ``refusal`` too)."""

CONTINUE_NOTE = (
    "Your reply was cut off at the token limit. Continue it exactly where it stopped, "
    "mid-word or mid-sentence if need be: write only what comes next, without repeating "
    "anything or starting over."
)
"""The note that asks the model to go on with its answer."""


def cut_off_calls(finish_reason: str | None, calls: Sequence[ToolCall]) -> list[ToolCall]:
    """The calls of a reply that the token limit (or a content filter) cut off: its last one
    when it ended at the limit (only the last call can have been in writing), else none.

    The last call is cut off even when its arguments parse: a server may parse what was
    written so far (keys written whole, a value cut short), and a model that had finished its
    call would have ended the reply for it (``tool_calls``), not at the limit.
    """
    if not calls or (finish_reason not in LIMIT_REASONS and finish_reason != FILTERED):
        return []
    return [calls[-1]]


def cut_off_answers(calls: Sequence[ToolCall], finish_reason: str) -> list[Message]:
    """The tool message for each cut-off call: why it did not run, and what to do."""
    return [Message.tool(_not_run(call.name, finish_reason), tool_call_id=call.id,
                         name=call.name) for call in calls]


def _not_run(name: str, finish_reason: str) -> str:
    if finish_reason == FILTERED:
        return (f"Error: not run. Your reply was stopped by the provider's content filter "
                f"(finish reason 'content_filter') while you wrote this call to {name!r}, so "
                "its arguments may be incomplete. Do not repeat what was filtered; if the call "
                "is still needed, write it again without it.")
    return (f"Error: not run. Your reply was cut off at the token limit (finish reason "
            f"{finish_reason!r}) while you wrote this call to {name!r}, so its arguments "
            "are incomplete. Write a shorter reply: call the tool again with less in its "
            "arguments, or split the work into smaller calls.")


def answer_cut_off(response: LLMResponse) -> bool:
    """Whether ``response`` is an answer (no tool call) that the token limit cut off."""
    return response.cut_off and not response.tool_calls


def continue_messages(messages: Sequence[Message], text: str) -> list[Message]:
    """The request that asks the model to go on: the turn's ``messages``, the answer so far
    as the assistant's turn (none while it is empty), then `CONTINUE_NOTE`."""
    out = list(messages)
    if text:
        out.append(Message.assistant(text))
    out.append(Message.user(CONTINUE_NOTE))
    return out


def joined_reply(parts: Sequence[LLMResponse]) -> LLMResponse:
    """One reply of an answer's parts (each continuing the one before): their text joined,
    their reasoning in order, the last one's calls, finish reason and id; usage summed
    (unknown if any part's is)."""
    if len(parts) == 1:
        return parts[0]
    last = parts[-1]
    text = "".join(part.text for part in parts)
    usages = [part.usage for part in parts]
    total = Usage()
    for usage in usages:
        total = total + usage if usage is not None else total
    message = last.message.model_copy(update={
        "content": text or None,
        "reasoning": [block for part in parts for block in part.message.reasoning],
    })
    return LLMResponse(
        message=message, usage=None if any(u is None for u in usages) else total,
        finish_reason=last.finish_reason, model=last.model, response_id=last.response_id,
    )


def text_cut_off_event(model: str, reason: str, policy: str, continuations: int, text: str,
                       outcome: str) -> dict[str, Any]:
    """The fields of the ``llm.call.cut_off`` event of an answer cut off at the limit."""
    return {"model": model, "finish_reason": reason, "tool_calls": [], "call_ids": [],
            "on_cut_off": policy, "outcome": outcome, "continuations": continuations,
            "text_chars": len(text)}


def truncated_error(text: str, reason: str, policy: str, continuations: int, bound: int,
                    budget: tuple[int, int] | None = None) -> OutputTruncatedError:
    """The error of an answer that stayed cut off at the token limit (``budget``: the tokens
    spent and the budget, when that stopped the continuations)."""
    if policy == "fail":
        how = "on_cut_off='fail'"
    elif budget is not None:
        how = (f"not continued after {continuations} continuation(s): the token budget is "
               f"spent, {budget[0]} of {budget[1]} tokens")
    else:
        how = f"still cut off after {continuations} continuation(s), max_continuations={bound}"
    return OutputTruncatedError(
        f"the model's answer was cut off at the token limit (finish reason {reason!r}; "
        f"{how}); raise the model's max_tokens, ask for a shorter answer, or allow more "
        f"continuations; the {len(text)} characters written so far are in the error's .text",
        text=text, finish_reason=reason, continuations=continuations,
    )


def filtered_error(response: LLMResponse, model: str) -> ContentFilterError | None:
    """The error of a reply a content filter stopped before it said anything (no text but
    whitespace, no tool call), else None."""
    if response.finish_reason != FILTERED or response.tool_calls or response.text.strip():
        return None
    return ContentFilterError(
        f"the provider's content filter stopped the answer of model {model!r} before it said "
        "anything (finish reason 'content_filter'); asking the same again would be filtered "
        "again: rephrase the request",
        "content_filter", model,
    )
