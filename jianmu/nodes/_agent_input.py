"""What an `Agent` run is given: its prompt and ``history=`` checked, each mistake named where
it was made (``history[2]``, the prompt), not as a state key of the run that never started."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from jianmu.llm.messages import Message
from jianmu.llm.responses_items import from_responses_items

__all__ = ("conversation",)

_TAKES = ("history= takes Messages (a result's .messages), OpenAI chat dicts and the OpenAI "
          "Agents SDK's to_input_list() items")


def conversation(prompt: str | Message | Mapping[str, Any], history: Any) -> list[Any]:
    """The messages a run starts from: ``history``, then ``prompt`` as the user's message.

    Raises:
        TypeError: ``history`` is not a list of messages, or one of its items is no message.
        ValueError: a dict of ``history`` (or the prompt) is no chat message, or the prompt is
            not the user's.
    """
    messages: list[Any] = from_responses_items(_history_items(history))
    if isinstance(prompt, str):
        messages.append(Message.user(prompt))
        return messages
    given = prompt if isinstance(prompt, Message) else _message(prompt, "the prompt")
    if given.role != "user":
        raise ValueError(
            f"the prompt is the user's message, got one of role {given.role!r}: pass it in "
            "history=[...], with the user's message as the prompt"
        )
    messages.append(given)
    return messages


def _history_items(history: Any) -> list[Any]:
    if history is None:
        return []
    if isinstance(history, (str, bytes, Mapping, Message)) or not isinstance(history, Iterable):
        raise TypeError(
            f"history= is the conversation so far, a list of messages, got "
            f"{type(history).__name__}: pass result.messages, or one message in a list"
        )
    items = list(history)
    for i, item in enumerate(items):
        if isinstance(item, Message):
            continue
        if not isinstance(item, Mapping):
            raise TypeError(f"history[{i}] is a {type(item).__name__}, not a message: {_TAKES}")
        if item.get("type") is None:  # a chat dict (a Responses item has a type): read here,
            items[i] = _message(item, f"history[{i}]")  # where its place is known
    return items


def _message(data: Mapping[str, Any], where: str) -> Message:
    try:
        return Message.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(map(str, error["loc"]))
        problem = error["msg"].removeprefix("Value error, ")
        raise ValueError(
            f"{where} is not a chat message: {field + ': ' if field else ''}{problem}"
            + _anthropic_hint(data)
        ) from None


def _anthropic_hint(data: Mapping[str, Any]) -> str:
    content = data.get("content")
    blocks = content if isinstance(content, list) else ()
    if any(isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result")
           for b in blocks):
        return ("; this is an Anthropic message: convert the conversation with "
                "jianmu.llm.messages_from_anthropic(None, messages)")
    return ""
