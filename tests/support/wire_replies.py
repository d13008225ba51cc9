"""Model replies written as real servers put them on the wire, for `ModelServer`'s `Raw`.

A `Step` is one model reply: text, tool calls whose arguments are raw JSON text (so that
``1e400``, ``-0`` or ``10**30`` reach the client as a server writes them), a finish reason. It
becomes the `ScriptedLLM` entry an in-process replay uses (`scripted`), or a `Raw` reply of the
OpenAI Chat Completions API (`openai_raw`: a whole completion, and a stream whose parallel
calls come interleaved by ``index``, the id and name only in a call's first chunk) or of the
Anthropic Messages API (`anthropic_raw`). ``usage`` is ``"last"`` (OpenAI: only in a last
chunk without choices) or ``"none"`` (never sent).

`neutral_openai`, `neutral_anthropic` and `neutral_messages` put a request's conversation in
one shape, so a request a server received can be compared with what an in-process model was
asked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jianmu._json import finite
from jianmu.llm.messages import Message, paired_turns
from jianmu.llm.provider import LLMResponse
from tests.support.model_server import Raw, strict_json

__all__ = ("Step", "anthropic_raw", "carried", "neutral_anthropic", "neutral_messages",
           "neutral_openai", "openai_raw", "results_in_call_order", "same_values", "scripted")


@dataclass(frozen=True)
class Step:
    """One model reply."""

    text: str | None = None
    calls: tuple[tuple[str, str, str], ...] = ()
    """Each call's id, name and arguments as raw JSON text."""
    finish: str | None = None
    """The finish reason, when not the usual one (``length``: cut at the token limit)."""


def scripted(step: Step) -> Any:
    """The `ScriptedLLM` entry of ``step``."""
    calls = [{"id": ident, "name": name, "arguments": raw} for ident, name, raw in step.calls]
    if step.finish is not None:
        return LLMResponse(message=Message.assistant(step.text, tool_calls=calls),
                           finish_reason=step.finish)
    if not calls:
        return step.text or ""
    if step.text:
        return Message.assistant(step.text, tool_calls=calls)
    return calls


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def openai_raw(step: Step, *, usage: str = "last", model: str = "test-model") -> Raw:
    """``step`` as an OpenAI-compatible server answers it, whole or streamed."""
    counts = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    calls = [{"id": ident, "type": "function", "function": {"name": name, "arguments": raw}}
             for ident, name, raw in step.calls]
    finish = step.finish or ("tool_calls" if calls else "stop")
    message: dict[str, Any] = {"role": "assistant", "content": step.text}
    if calls:
        message["tool_calls"] = calls
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                            "model": model, "choices": [
                                {"index": 0, "message": message, "finish_reason": finish}]}
    if usage != "none":
        body["usage"] = counts

    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": [{"index": 0, "delta": delta,
                                             "finish_reason": reason}]}

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in _pieces(step.text or "", 3) if piece]
    # every call's head first, then the arguments' pieces round-robin across the calls, two
    # calls' pieces sometimes in one chunk, as servers that generate calls in parallel do
    events += [chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                      "function": {"name": c["function"]["name"],
                                                   "arguments": ""}}]})
               for i, c in enumerate(calls)]
    queues = [_pieces(c["function"]["arguments"], 4) for c in calls]
    while any(queues):
        fragments = [{"index": i, "function": {"arguments": q.pop(0)}}
                     for i, q in enumerate(queues) if q]
        for at in range(0, len(fragments), 2):
            events.append(chunk({"tool_calls": fragments[at : at + 2]}))
    events.append(chunk({}, finish))
    if usage == "last":
        events.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                       "model": model, "choices": [], "usage": counts})
    return Raw(body=body, events=events)


def anthropic_raw(step: Step, *, usage: str = "last", model: str = "test-model") -> Raw:
    """``step`` as the Anthropic Messages API answers it, whole or streamed; a tool_use
    block's input is its raw JSON text in both."""
    stop = {"length": "max_tokens"}.get(step.finish or "", step.finish) or (
        "tool_use" if step.calls else "end_turn")
    blocks: list[dict[str, Any]] = []
    if step.text:
        blocks.append({"type": "text", "text": step.text})
    blocks += [{"type": "tool_use", "id": ident, "name": name, "input": f"\x00input{i}"}
               for i, (ident, name, _) in enumerate(step.calls)]
    message: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant",
                               "model": model, "content": blocks, "stop_reason": stop,
                               "stop_sequence": None}
    if usage != "none":
        message["usage"] = {"input_tokens": 10, "output_tokens": 5}
    text = json.dumps(message)
    for i, (_, _, raw) in enumerate(step.calls):
        text = text.replace(json.dumps(f"\x00input{i}"), raw or "{}")
    start = {**message, "content": [], "stop_reason": None}
    if usage != "none":
        start["usage"] = {"input_tokens": 10, "output_tokens": 1}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": piece}}
                       for piece in _pieces(block["text"], 3)]
        else:
            raw = step.calls[index - bool(step.text)][2]
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {**block, "input": {}}})
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece}}
                       for piece in _pieces(raw, 4)]
        events.append({"type": "content_block_stop", "index": index})
    delta: dict[str, Any] = {"type": "message_delta",
                             "delta": {"stop_reason": stop, "stop_sequence": None}}
    if usage != "none":
        delta["usage"] = {"output_tokens": 5}
    events += [delta, {"type": "message_stop"}]
    return Raw(body=text, events=events)


# -- one shape for the conversations of both APIs ----------------------------------------------


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def neutral_openai(body: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """An OpenAI request's messages: ``(role, text, calls)`` or ``("tool", id, text)``."""
    out: list[tuple[Any, ...]] = []
    for message in body["messages"]:
        role = message["role"]
        if role == "tool":
            out.append(("tool", message["tool_call_id"], _text(message["content"])))
            continue
        calls = tuple((c["id"], c["function"]["name"],
                       strict_json(c["function"]["arguments"]))
                      for c in message.get("tool_calls") or ())
        out.append((role, _text(message.get("content")) or None, calls))
    return out


def neutral_anthropic(body: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """An Anthropic request's messages in `neutral_openai`'s shape."""
    out: list[tuple[Any, ...]] = []
    system = body.get("system")
    if system:
        out.append(("system", _text(system), ()))
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts = [b["text"] for b in blocks if b["type"] == "text"]
        if message["role"] == "user":
            out += [("tool", b["tool_use_id"], _text(b.get("content")) or "")
                    for b in blocks if b["type"] == "tool_result"]
            if texts:
                out.append(("user", "\n".join(texts), ()))
            continue
        calls = tuple((b["id"], b["name"], b["input"]) for b in blocks
                      if b["type"] == "tool_use")
        out.append(("assistant", "".join(texts) or None, calls))
    return out


def carried(value: Any) -> Any:
    """``value`` as a request can carry it: a float JSON cannot write as `finite` gives it
    (the ``inf`` a model's ``1e400`` reads as goes as 10**309), a lone surrogate, which UTF-8
    cannot encode, as U+FFFD."""
    value = finite(value)
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {carried(k): carried(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(carried(v) for v in value)
    return value


def neutral_messages(messages: Sequence[Message]) -> list[tuple[Any, ...]]:
    """What an in-process model was asked, in `neutral_openai`'s shape, as a request can carry
    it (`carried`), its turns paired as both APIs take them (`paired_turns`)."""
    out: list[tuple[Any, ...]] = []
    for m in paired_turns(messages):
        if m.role == "tool":
            out.append(("tool", m.tool_call_id, carried(m.content or "")))
            continue
        out.append((m.role, carried(m.content) or None,
                    tuple((c.id, c.name, carried(c.arguments)) for c in m.tool_calls)))
    return out


def same_values(a: Iterable[Any], b: Iterable[Any]) -> bool:
    """Equal, with the sign of a zero and the type of a number told apart (``-0.0`` is not
    ``0``, ``1`` is not ``1.0``)."""
    return repr(list(a)) == repr(list(b))


def results_in_call_order(conversation: Sequence[tuple[Any, ...]]) -> list[str]:
    """Where a turn's results do not follow its calls' order (templates of open models
    that drop the ids pair them by place)."""
    problems: list[str] = []
    calls: list[str] = []
    results: list[str] = []
    for entry in [*conversation, ("end", None, ())]:
        if entry[0] == "tool":
            results.append(entry[1])
            continue
        if results != calls[: len(results)] or len(results) != len(calls):
            problems.append(f"calls {calls}, results {results}")
        calls = [c[0] for c in entry[2]] if entry[0] == "assistant" else []
        results = []
    return problems
