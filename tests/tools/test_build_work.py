"""What building a tool reads and computes, and what it leaves to the first call that needs it:
a tool is often built per task (`Tool.from_openai`, `tool(fn)`), so work a run never uses is
skipped, with every check it made kept."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pytest

from jianmu import RunContext, StateView
from jianmu.errors import ToolDefinitionError
from jianmu.tools import Injected, Tool
from jianmu.tools import base as tool_base
from jianmu.tools._signatures import may_inject_any
from jianmu.tools.schema import declared_injection


def _definition(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": "lookup", "description": "Look something up.",
        "parameters": {"type": "object", "properties": properties, "required": ["query"]},
    }}


_PROPERTIES = {"query": {"type": "string"}, "state": {"type": "object"}}


def test_a_kwargs_handler_of_a_definition_has_no_hints_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[Any] = []
    real = tool_base.function_injection
    monkeypatch.setattr(tool_base, "function_injection", lambda fn: read.append(fn) or real(fn))

    def handler(**arguments: Any) -> str:
        return repr(arguments)

    made = Tool.from_openai(_definition(_PROPERTIES), handler)
    assert read == []  # no named parameter: none can be injected under a property's name
    assert made.validate_args({"query": "x", "state": {}}) == {"query": "x", "state": {}}

    def named(query: str, state: dict[str, Any]) -> str:
        return query

    Tool.from_openai(_definition(_PROPERTIES), named)
    assert read == [named]


def _injected_state(query: str, state: Injected[StateView]) -> str:
    return query


def _keyword_only_ctx(query: str, *, state: RunContext) -> str:
    return query


def _positional_only(state: Injected[StateView], /, query: str = "") -> str:
    return query


@functools.wraps(_injected_state)
def _wrapped(**kwargs: Any) -> str:
    return "wrapped"


@pytest.mark.parametrize("handler", [_injected_state, _keyword_only_ctx, _positional_only,
                                     _wrapped, functools.partial(_injected_state)])
def test_a_property_named_like_an_injected_parameter_is_still_refused(handler: Any) -> None:
    assert may_inject_any(handler, _PROPERTIES)
    with pytest.raises(ToolDefinitionError, match="parameter 'state' is declared injected"):
        Tool.from_openai(_definition(_PROPERTIES), handler)


def test_may_inject_any_reads_the_named_parameters_of_a_plain_function() -> None:
    def kwargs_only(*args: Any, **kwargs: Any) -> None: ...

    def other_names(a: int, *rest: Any, b: int = 0, **more: Any) -> None: ...

    def unannotated(a, b=0):  # type: ignore[no-untyped-def]
        return a

    assert not may_inject_any(kwargs_only, {"args": 1, "kwargs": 1})
    assert not may_inject_any(other_names, {"rest": 1, "more": 1, "c": 1})
    assert may_inject_any(other_names, {"b": 1})
    assert may_inject_any(other_names, {"a": 1})
    assert not may_inject_any(unannotated, {"a": 1, "b": 1})
    assert not may_inject_any(lambda **kw: kw, {"a": 1})

    class Handler:
        def __call__(self, state: Injected[StateView]) -> None: ...

    assert may_inject_any(Handler(), {"x": 1})  # not a plain function: its hints decide


def test_declared_injection_reads_a_plain_function_without_inspect_signature(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def handler(query: str, state: Injected[StateView], ctx: RunContext | None = None) -> str:
        return query

    expected = declared_injection(handler)
    monkeypatch.setattr(inspect, "signature", lambda *a, **k: pytest.fail("signature read"))
    assert declared_injection(handler) == expected
    assert [(p.name, p.context, p.has_default) for p in expected] == [
        ("state", False, False), ("ctx", True, True)]


def test_a_function_tool_reads_its_properties_types_only_when_a_call_needs_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from jianmu.tools import schema, tool

    read: list[Any] = []
    real = schema.schema_types
    monkeypatch.setattr(schema, "schema_types", lambda *a: read.append(a[0]) or real(*a))

    def find(query: str, tags: list[str], limit: int = 3) -> str:
        """Find things.

        Args:
            query: what to find.
            tags: the tags.
            limit: how many.
        """
        return query

    made = tool(find)
    assert made.bind_args({"query": "x", "tags": ["a"]}) == {
        "query": "x", "tags": ["a"], "limit": 3}
    assert read == []  # every value of its exact type: the plan took them
    # a list sent as JSON text, a null for a default: what the types found decide
    assert made.bind_args({"query": "x", "tags": '["a", "b"]', "limit": None}) == {
        "query": "x", "tags": ["a", "b"], "limit": 3}
    assert len(read) == 3
    with pytest.raises(Exception, match=r"allowed arguments: query \(required\), tags "
                                        r"\(required\), limit"):
        made.bind_args({"query": "x", "tags": [], "other": 1})
    assert len(read) == 3  # found once



def _sync(a: int) -> int:
    return a


async def _async(a: int) -> int:
    return a


async def _async_gen(a: int) -> Any:
    yield a


@functools.wraps(_async)
def _wraps_async(*args: Any) -> Any:
    return _async(*args)


class _Calls:
    async def __call__(self, a: int) -> int:
        return a

    def method(self) -> None: ...


def _marked() -> Any: ...


_marked._is_coroutine_marker = object()  # type: ignore[attr-defined]  # not inspect's own mark


def _gen(a: int) -> Any:
    yield a


_CALLABLES = [_sync, _async, _async_gen, _gen, functools.partial(_gen, 1), _wraps_async,
              functools.partial(_async, 1), _Calls(), _Calls.__call__, _Calls().method, print,
              lambda: None, _marked, 3]


@pytest.mark.parametrize("fn", _CALLABLES)
def test_unwrap_and_is_coroutine_function_are_inspects(fn: Any) -> None:
    from jianmu.tools._signatures import is_coroutine_function, is_generator_function, unwrap

    assert is_coroutine_function(fn) is inspect.iscoroutinefunction(fn)
    assert is_generator_function(fn) is (
        inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn))
    assert unwrap(fn) is (inspect.unwrap(fn) if callable(fn) else fn)
    assert unwrap(fn, stop=lambda f: True) is inspect.unwrap(fn, stop=lambda f: True)


def test_a_plain_function_is_unwrapped_and_read_without_inspect(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from jianmu.tools import tool

    async def lookup(query: str) -> str:
        return query

    asked: list[str] = []
    unwrap, iscoroutinefunction = inspect.unwrap, inspect.iscoroutinefunction
    with monkeypatch.context() as patch:  # only while the tools are built: pytest unwraps too
        patch.setattr(inspect, "unwrap", lambda *a, **k: asked.append("unwrap") or unwrap(*a, **k))
        patch.setattr(inspect, "iscoroutinefunction",
                      lambda f: asked.append("coroutine") or iscoroutinefunction(f))
        made = [tool(_sync), tool(_async),
                Tool.from_openai(_definition({"query": {"type": "string"}}), lookup)]
    assert asked == []
    assert [t.is_async for t in made] == [False, True, True]
