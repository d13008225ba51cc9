"""The request side of the Anthropic format: tool definitions, ``tool_choice`` and turns, from
the OpenAI shapes a `jianmu.llm.provider.ChatRequest` holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ("anthropic_tool", "anthropic_tool_choice", "merge_turns")


def anthropic_tool(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic tool definition (``Tool.to_anthropic()``'s shape) from a `ChatRequest`
    entry in the OpenAI shape."""
    function = entry.get("function") if isinstance(entry.get("function"), Mapping) else entry
    assert isinstance(function, Mapping)
    out: dict[str, Any] = {"name": function.get("name", "")}
    if function.get("description"):
        out["description"] = function["description"]
    schema = function.get("parameters", function.get("input_schema"))
    out["input_schema"] = dict(schema) if schema else {"type": "object", "properties": {}}
    return out


def anthropic_tool_choice(choice: Any) -> dict[str, Any] | None:
    """Anthropic's ``tool_choice`` from the OpenAI shape a `ChatRequest` holds."""
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    if isinstance(choice, Mapping):
        function = choice.get("function")
        if isinstance(function, Mapping) and function.get("name"):
            return {"type": "tool", "name": function["name"]}
        if choice.get("type") in ("auto", "any", "tool", "none"):
            return dict(choice)
    raise ValueError(f"tool_choice {choice!r} has no Anthropic equivalent")


def merge_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive turns of one role (tool results then a user note, for one), and drop
    empty assistant turns: the Messages API wants alternating, non-empty turns."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message["role"] == "assistant" and not blocks:
            continue
        if out and out[-1]["role"] == message["role"]:
            previous = out[-1]["content"]
            if isinstance(previous, str):
                previous = out[-1]["content"] = [{"type": "text", "text": previous}]
            previous.extend(blocks)
        else:
            out.append({"role": message["role"], "content": content})
    return out
