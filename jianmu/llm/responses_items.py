"""A conversation kept as OpenAI Responses API items (the OpenAI Agents SDK's
``result.to_input_list()``) read as chat `Message`s.

A Responses conversation gives each tool call and each result an item of its own
(``function_call``, ``function_call_output``) beside ``message`` items; a chat conversation
gives a turn's calls to one assistant message. `from_responses_items` joins them so, and
leaves every other entry (a `Message`, a chat dict) as it is, for the state to validate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from jianmu.llm.messages import Message
from jianmu.tools.calls import ToolCall

__all__ = ("from_responses_items",)

_SKIPPED = frozenset({"reasoning", "item_reference"})
"""Items that say nothing a chat model reads back: a reasoning item is the Responses API's own
(encrypted or summarised), and a reference names an item stored on OpenAI's side."""

_MESSAGE_KEYS = frozenset({"id", "status", "type", "role", "content"})


def from_responses_items(items: Iterable[Any]) -> list[Any]:
    """``items`` with each Responses API item made a `Message` (a turn's ``function_call``s
    joined to its assistant message); other entries as they are.

    Raises:
        ValueError: an item of a kind a chat conversation cannot hold (a hosted tool's call,
            ``computer_call``...), named.
    """
    out: list[Any] = []
    # an assistant message's place: the calls joined to it, made one message at the end (a
    # copy per call was the square of a turn's calls: 64,000 items, seconds of the loop)
    joined: dict[int, list[ToolCall]] = {}
    for place, item in enumerate(items):
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind is None or (kind == "message" and not set(item) <= _MESSAGE_KEYS):
            out.append(item)  # a Message, or a chat dict: the state validates it
        elif kind == "message":
            out.append(_message({"role": item.get("role"), "content": item.get("content")},
                                place, kind))
        elif kind == "function_call":
            call = ToolCall.from_dict({"name": item.get("name"), "call_id": item.get("call_id"),
                                       "arguments": item.get("arguments")})
            last = out[-1] if out else None
            if isinstance(last, Message) and last.role == "assistant":
                joined.setdefault(len(out) - 1, list(last.tool_calls)).append(call)
            else:
                out.append(Message.assistant(tool_calls=[call]))
        elif kind == "function_call_output":
            # text, or a list of parts (its images move to media, as a chat message's do)
            out.append(_message({"role": "tool", "content": item.get("output"),
                                 "tool_call_id": str(item.get("call_id"))}, place, kind))
        elif kind not in _SKIPPED:
            raise ValueError(
                f"history item of type {kind!r} (an OpenAI Responses API item) has no chat "
                f"message to stand for it; drop it, or keep messages, function_call and "
                f"function_call_output items"
            )
    for place, calls in joined.items():
        out[place] = out[place].model_copy(update={"tool_calls": calls})
    return out


def _message(fields: dict[str, Any], place: int, kind: str) -> Message:
    """The message of the item at ``place``, or a ValueError naming it (pydantic's own error
    named neither the item nor where it was)."""
    try:
        return Message.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(map(str, error["loc"]))
        raise ValueError(
            f"history[{place}] (a Responses API {kind!r} item) is not a chat message: "
            f"{field + ': ' if field else ''}{error['msg'].removeprefix('Value error, ')}"
        ) from None
