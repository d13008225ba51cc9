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

_PAST_FLOATS = 10**309
"""A JSON number past a float's range (~1.8e308): where a model's ``1e400`` went."""

__all__ = ("MAX_ARGUMENT_NESTING", "finite", "json_text", "nests_within", "standard_json")

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


def finite(value: Any) -> Any:
    """``value`` with every float that JSON cannot write as one it can: ``inf`` (a model's
    ``1e400``, read by Python) as the integer 10**309, past a float's range as it was, its
    sign kept; ``nan`` as ``None``. ``value`` itself when it holds none (most arguments)."""
    if isinstance(value, float):
        if value != value:
            return None
        if value in (math.inf, -math.inf):
            return _PAST_FLOATS if value > 0 else -_PAST_FLOATS
        return value
    if isinstance(value, Mapping):
        items = {key: finite(item) for key, item in value.items()}
        if any(items[key] is not item for key, item in value.items()):
            return items
        return value
    if isinstance(value, list | tuple):
        made = [finite(item) for item in value]
        if any(new is not old for new, old in zip(made, value, strict=True)):
            return made
        return value
    return value


def standard_json(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` as standard JSON, which every API reads: a float
    JSON cannot write goes as `finite` gives it (`json.dumps` wrote ``Infinity`` and
    ``NaN``, which the APIs refuse, and the Anthropic SDK raised on)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(finite(value), allow_nan=False, **options)
