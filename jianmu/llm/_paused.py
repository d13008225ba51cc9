"""Anthropic's ``pause_turn``: a long turn (server tools such as web search) that the API
paused is no answer yet. As Anthropic documents, the paused reply goes back as it came, as
the assistant's turn, and the model continues it (`continued`); the parts join into one
reply (`joined`). A stream's paused reply is rebuilt from its events (`RawBlocks`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from jianmu.llm.messages import Message, Usage
from jianmu.llm.provider import LLMResponse

__all__ = ("MAX_PAUSES", "RawBlocks", "blocks_of", "continued", "joined")

MAX_PAUSES = 10
"""How often one turn may be paused and continued before it is a failure: a server that
pauses for ever must not be asked (and billed) for ever."""

_INPUT_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_DELTA_FIELDS = {"text_delta": "text", "thinking_delta": "thinking",
                 "signature_delta": "signature", "input_json_delta": "partial_json"}
"""The field of each delta kind that carries a piece of its block."""


def _plain(block: Any) -> dict[str, Any]:
    """A content block as the JSON to send back, its unset fields left out."""
    if isinstance(block, BaseModel):
        # warnings off: a compatible server may send a field in another type than the SDK's
        # model declares (a tool_use ``input`` as a JSON string); it goes back as it came
        return block.model_dump(mode="json", exclude_none=True, warnings=False)
    return dict(block) if isinstance(block, Mapping) else {"type": "text", "text": str(block)}


def blocks_of(reply: Any) -> list[dict[str, Any]]:
    """A whole reply's content blocks, every kind (server tool use and results too)."""
    return [_plain(block) for block in getattr(reply, "content", None) or []]


def continued(body: dict[str, Any], blocks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The request that continues a paused turn: ``body`` with the paused reply's ``blocks``
    as the assistant's turn (joined to a last assistant turn, a prefill, if there is one)."""
    messages = list(body["messages"])
    if messages and messages[-1].get("role") == "assistant":
        last = messages[-1]
        content = last["content"]
        before = [{"type": "text", "text": content}] if isinstance(content, str) else content
        messages[-1] = {**last, "content": [*before, *blocks]}
    else:
        messages.append({"role": "assistant", "content": list(blocks)})
    return {**body, "messages": messages}


def joined(parts: Sequence[LLMResponse]) -> LLMResponse:
    """One reply of a turn's parts (each continuing the one before): their text, tool calls
    and reasoning in order, their usage summed (unknown if any part's is), each part one
    model request, the last one's finish reason and id."""
    if len(parts) == 1:
        return parts[0]
    text = "".join(part.text for part in parts)
    usages = [part.usage for part in parts]
    total = Usage()
    for usage in usages:
        if usage is not None:  # each part was a request answered, and billed
            total = total + replace(usage, requests=usage.requests or 1)
    last = parts[-1]
    return LLMResponse(
        message=Message(
            role="assistant", content=text or None,
            tool_calls=[call for part in parts for call in part.tool_calls],
            reasoning=[block for part in parts for block in part.message.reasoning],
        ),
        usage=None if any(u is None for u in usages) else total,
        finish_reason=last.finish_reason,
        model=last.model,
        response_id=last.response_id,
    )


class RawBlocks:
    """A streamed message's content blocks, rebuilt from its events as the API would have
    given them whole: what a paused turn sends back."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        # each block's streamed pieces by field ("partial_json" for a tool's input), joined
        # once in `blocks` (added to the block's text per delta, a long reply was quadratic)
        self._pieces: dict[tuple[int, str], list[str]] = {}

    def feed(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        index = getattr(event, "index", None)
        if kind == "content_block_start" and isinstance(index, int):
            self._blocks[index] = _plain(event.content_block)
        elif kind == "content_block_delta" and index in self._blocks:
            delta = event.delta
            name = getattr(delta, "type", None)
            if name == "citations_delta":
                self._blocks[index].setdefault("citations", []).append(_plain(delta.citation))
                return
            key = _DELTA_FIELDS.get(str(name))
            piece = None if key is None else getattr(delta, key, None)
            if key is not None and isinstance(piece, str):
                self._pieces.setdefault((index, key), []).append(piece)

    def extend(self, blocks: Sequence[dict[str, Any]]) -> None:
        """Add a whole reply's blocks (a server that ignored ``stream``)."""
        for block in blocks:
            self._blocks[len(self._blocks)] = dict(block)

    def blocks(self) -> list[dict[str, Any]]:
        """The blocks in order, each tool block's streamed input decoded."""
        out = []
        for index, block in sorted(self._blocks.items()):
            for key in ("text", "thinking", "signature"):
                pieces = self._pieces.get((index, key))
                if pieces:
                    block = {**block, key: block.get(key, "") + "".join(pieces)}
            raw = "".join(self._pieces.get((index, "partial_json"), ()))
            if block.get("type") in _INPUT_BLOCKS and raw.strip():
                try:
                    block = {**block, "input": json.loads(raw)}
                except ValueError:  # sent back as it came: the server judges it
                    block = {**block, "input": raw}
            out.append(block)
        return out
