"""What a ``tools=`` list of an agent may hold: any function ``@tool`` takes, made a tool; a
clear refusal of what is not one; and no two tools under one name."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from types import BuiltinFunctionType, FunctionType, MethodType
from typing import Any

from jianmu.errors import ToolValidationError
from jianmu.tools.base import Tool
from jianmu.tools.base import tool as make_tool
from jianmu.tools.calls import name_key

__all__ = ("as_tool_items", "name_clash", "not_a_tool")

_FUNCTIONS = (FunctionType, MethodType, BuiltinFunctionType, functools.partial)
"""What ``@tool`` makes a tool of, as pydantic-ai's ``tools=[...]`` takes it: a function, a
bound method (a tool of an object holding its client), a builtin, a ``functools.partial``."""


def as_tool_items(items: Sequence[Any]) -> list[Any]:
    """``items`` with each function in it made a tool; other entries (tools, hand-offs) as
    they are.

    Raises:
        ToolValidationError: two different tools share a name (names are matched without
            case, as a model's call is): the model could reach only the last one.
    """
    made: list[Any] = []
    functions: list[tuple[Any, Tool]] = []  # each function given, and its tool
    for item in items:
        if isinstance(item, _FUNCTIONS):
            # a function listed twice is one tool (``obj.method`` is a new object each time)
            twin = next((t for given, t in functions if given == item), None)
            if twin is None:
                twin = make_tool(item)
                functions.append((item, twin))
            item = twin
        made.append(item)
    seen: dict[str, Tool] = {}
    for item in made:
        if not isinstance(item, Tool) or not isinstance(item.name, str):
            continue
        key = name_key(item.name)
        first = seen.setdefault(key, item) if key is not None else item
        if first is not item:
            # the same tool listed twice is harmless; two of one name lose one silently
            raise name_clash(first, item)
    return made


def name_clash(first: Tool, second: Tool) -> ToolValidationError:
    """The refusal of two different tools under one name (matched without case)."""
    return ToolValidationError(second.name, [
        f"two tools are named {second.name!r} ({first!r} and {second!r}); a model's call "
        "reaches only one of them: rename one (@tool(name=...), as_tool(name=...))"
    ])


def not_a_tool(item: Any) -> str:
    """Why ``item`` is not a tool, and what to give instead."""
    if isinstance(item, type):
        if issubclass(item, Tool):
            return (f"got the class {item.__name__}, not a tool: give an instance, "
                    f"{item.__name__}(...)")
        return (f"got the class {item.__name__}: give a function, a bound method of an "
                f"instance, or a Tool")
    if inspect.iscoroutine(item):
        item.close()  # never to be awaited: no "never awaited" warning on top of this error
        return (f"got a coroutine object, the result of calling {item.__qualname__}(...): "
                f"give the function itself, {item.__qualname__}")
    if callable(getattr(item, "as_tool", None)):  # an Agent
        return (f"got the agent {item!r}: give agent.as_tool() to call it as a tool, or "
                "handoff(agent) to pass it the conversation")
    if getattr(item, "recipe", None) is not None:  # a ReAct loop from create_react_node
        return f"got the agent node {item.name!r}: give handoff(node) to pass it the conversation"
    if isinstance(item, (list, tuple)):
        return f"got a list inside the list ({item!r}): join it, tools=[*more_tools, ...]"
    if callable(getattr(item, "with_tools", None)):  # a ToolSet (ToolSet.resolve's)
        return (f"got a ToolSet inside the list ({item!r}): join its tools, "
                "tools=[*toolset.tools, ...]")
    if isinstance(item, Mapping):
        return (f"got a dict ({', '.join(map(repr, list(item)[:4]))}...): an OpenAI tool "
                "definition needs the function that runs it, Tool.from_openai(definition, fn)")
    if callable(item):  # given to a ToolSet itself, which takes tools only
        return f"got {item!r}; wrap functions with @tool (tool(fn) is the tool of fn)"
    return f"got {item!r}; give a function, a method, or a Tool (@tool makes one)"
