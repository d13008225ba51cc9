"""JSON data as the run records it: how deep it may nest, and its text for bytes.

Below every layer: the model's arguments (`jianmu.tools.calls`), a person's edit of them
(`jianmu.runtime.context`) and the run's records (`jianmu.runtime.points`, the studio) share
these rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ("MAX_ARGUMENT_NESTING", "json_text", "nests_within")

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
