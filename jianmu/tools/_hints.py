"""Type hints of a function whose annotations are plain classes, without `get_type_hints`.

Under ``from __future__ import annotations`` every annotation is a string, which
`typing.get_type_hints` compiles anew for every function: a tool made per request from a new
function paid that each time. Here a string's compiled code is cached by its text and
evaluated in the function's own globals, as `get_type_hints` evaluates it; anything but a
plain class or a builtin generic of classes is left to `get_type_hints`.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
import typing
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

__all__ = (
    "callable_name", "described", "has_own_signature", "may_annotate", "module_globals",
    "partial_parts", "plain_hints",
)


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


def has_own_signature(obj: Any) -> bool:
    """Whether ``obj`` carries its own ``__signature__``, which `inspect.signature` reads first."""
    own = getattr(obj, "__dict__", None)
    return isinstance(own, dict) and isinstance(own.get("__signature__"), inspect.Signature)


def described(obj: Any) -> Any:
    """What describes a callable object, as `inspect.signature` finds it: the function it wraps
    (`functools.update_wrapper`), itself when it sets its own ``__signature__`` (tau2-bench's
    tool objects), else its ``__call__``."""
    inner = inspect.unwrap(obj, stop=has_own_signature)
    if inner is not obj and (inspect.isfunction(inner) or inspect.ismethod(inner)):
        return inner
    return inner if has_own_signature(inner) else inner.__call__


def partial_parts(obj: Any) -> tuple[Any, frozenset[str]]:
    """What a `functools.partial` calls and the keywords it binds; ``obj`` and none otherwise.

    The bound keywords are the author's (an environment, a client, a key): never shown to the
    model nor taken from it. Nested partials are already flattened by `functools.partial`.
    """
    if isinstance(obj, functools.partial):
        return obj.func, frozenset(obj.keywords)
    return obj, frozenset()


def callable_name(obj: Any) -> str:
    """The name `tool` gives what ``obj`` calls: a partial's function's, else its own
    ``__name__``, else its type's (never its repr, which may show what a partial binds)."""
    inner, _ = partial_parts(obj)
    name = getattr(inner, "__name__", None)
    return name if isinstance(name, str) else type(inner).__name__


def module_globals(obj: Any) -> dict[str, Any]:
    """The globals an annotation string of ``obj`` is read in: a function's own, else those of
    the module that defined it."""
    found = getattr(obj, "__globals__", None)
    if isinstance(found, dict):
        return found
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    return vars(module) if module is not None else {}


def may_annotate(fn: Any) -> bool:
    """Whether ``fn`` (or the ``__call__`` it runs) may annotate a parameter at all: False
    only for a plain function or method without annotations (a ``lambda **kwargs``), which
    then needs no look at its hints."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
    plain = inspect.isfunction(target) or inspect.ismethod(target)
    return not plain or bool(getattr(inspect.unwrap(target), "__annotations__", None))
