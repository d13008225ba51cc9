"""JSON data as the run records it: how deep it may nest, and its text for bytes.

Below every layer: the model's arguments (`jianmu.tools.calls`), a person's edit of them
(`jianmu.runtime.context`) and the run's records (`jianmu.runtime.points`, the studio) share
these rules.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ("MAX_ARGUMENT_NESTING", "json_text", "nests_within", "non_finite_at")

MAX_ARGUMENT_NESTING = 128
"""How deep a tool call's arguments may nest (objects and arrays). Deeper ones are refused: the
run's own records (the state's messages, a checkpoint, an event's preview) are written by walks
that stop at a fixed depth or at Python's stack (a checkpoint of a call nested 300 deep raised
out of ``run()``)."""


def nests_within(value: Any, limit: int) -> bool:
    """Whether ``value``'s mappings, lists and tuples nest at most ``limit`` deep (a walk with
    a stack of its own: a value nested past Python's stack, or holding itself, is answered
    too)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if isinstance(node, Mapping):
            items: Iterable[Any] = node.values()
        elif isinstance(node, list | tuple):
            items = node
        else:
            continue
        if depth > limit:
            return False
        for item in items:
            if isinstance(item, Mapping | list | tuple):
                push((item, depth + 1))
    return True


def non_finite_at(value: Any, limit: int = MAX_ARGUMENT_NESTING) -> str | None:
    """The JSON path (``$.a[0]``) of the first NaN or infinite number in ``value``, or None.

    JSON has no such numbers, but Python's `json` reads ``NaN``, ``Infinity`` and ``1e309``
    (as inf): a NaN passes every ``minimum`` and ``maximum`` (each comparison is false), so a
    bounded ``amount`` took it. A walk with a stack of its own that gives up ``limit`` levels
    down (what nests deeper is refused for that); a path is spelled only when one is found."""
    stack: list[tuple[Any, Any, int]] = [(value, None, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        node, trail, depth = pop()
        if depth > limit:  # nested too deep (or holding itself): refused for that, not here
            return None
        keys: Iterable[Any]
        items: Iterable[Any]
        if isinstance(node, float):
            if not math.isfinite(node):
                return _spelled(trail)
            continue
        if isinstance(node, Mapping):
            keys, items = node.keys(), node.values()
        elif isinstance(node, list | tuple):
            keys, items = range(len(node)), node
        else:
            continue
        for key, item in zip(keys, items, strict=False):
            if isinstance(item, float | Mapping | list | tuple):  # most values are neither
                push((item, (trail, key), depth + 1))
    return None


def _spelled(trail: Any) -> str:
    """``$.a[0]`` from a trail of ``(parent, key)`` pairs."""
    parts: list[str] = []
    while trail is not None:
        trail, key = trail
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return "$" + "".join(reversed(parts))


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)``; with ``\\\\u`` escapes instead
    when the text holds a lone surrogate (a model's ``"\\\\ud800"`` is valid JSON), which UTF-8
    cannot encode: SQLite would refuse the row and an HTTP response its body. Either reads
    back as the same value."""
    text = json.dumps(value, ensure_ascii=False, **options)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, **options)
    return text
