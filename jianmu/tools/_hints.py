"""Type hints of a function whose annotations are plain classes, without `get_type_hints`.

Under ``from __future__ import annotations`` every annotation is a string, which
`typing.get_type_hints` compiles anew for every function: a tool made per request from a new
function paid that each time. Here a string's compiled code is cached by its text and
evaluated in the function's own globals, as `get_type_hints` evaluates it; anything but a
plain class or a builtin generic of classes is left to `get_type_hints`.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

__all__ = ("plain_hints",)


@lru_cache(maxsize=1024)
def _annotation_code(text: str) -> Any:
    return compile(text, "<annotation>", "eval")


def _plain_type(value: Any) -> bool:
    """A class, or a builtin generic of classes (``list[str]``): what get_type_hints would
    hand back unchanged."""
    if isinstance(value, types.GenericAlias):
        return all(isinstance(a, type) and not isinstance(a, types.GenericAlias)
                   for a in typing.get_args(value))
    return isinstance(value, type)


def plain_hints(
    target: Any, globalns: Mapping[str, Any], localns: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The annotations when each is (or names) a plain class or a builtin generic of classes,
    else None (`typing.get_type_hints` then decides).

    Under ``from __future__ import annotations`` every annotation is a string, which
    ``get_type_hints`` compiles anew for every function: a new tool per request paid that.
    """
    annotations = getattr(target, "__annotations__", None)
    if not isinstance(annotations, dict) or not isinstance(globalns, dict):
        return None
    hints: dict[str, Any] = {}
    local = dict(localns) if localns else None
    for name, value in annotations.items():
        if isinstance(value, str):
            try:  # as get_type_hints evaluates it: in the function's own globals
                value = eval(_annotation_code(value), globalns, local)
            except Exception:
                return None
        if value is None:
            value = type(None)
        if type(value) is not type and not _plain_type(value):  # most are plain classes
            return None
        hints[name] = value
    return hints
