"""A seeded differential of `function_schema` over generated functions (`fngen`): the fast path
and the model path give the same schema and take or refuse the same arguments with the same
values, and both agree with pydantic's own validation of the signature (`validate_call`, under
the config a tool's arguments are checked with) once Jianmu's documented leniencies are applied
to what it is given: ``null`` for an optional parameter that may not be null is its default, and
a list or object sent as a JSON string is decoded."""

from __future__ import annotations

import ast
import asyncio
import collections.abc
import dataclasses
import enum
import functools
import inspect
import json
import random
import re
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Any

import pydantic
import pytest
from pydantic import ConfigDict, Field, WithJsonSchema

from jianmu.errors import JianmuError, ToolInputError
from jianmu.tools import tool
from jianmu.tools.schema import function_schema

from . import fngen

_REFERENCE_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
_CONTAINERS = (list, dict, tuple, set, frozenset, collections.abc.Sequence,
               collections.abc.Mapping)


def _typed(v: Any) -> Any:
    """``v`` as a tree that tells 1 from 1.0 and True, a tuple from a list, NaN from NaN."""
    if isinstance(v, dict):
        return {k: _typed(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        items = [_typed(x) for x in v]
        if isinstance(v, (set, frozenset)):
            items.sort(key=repr)
        return [type(v).__name__, items]
    if isinstance(v, enum.Enum):
        return ["enum", type(v).__name__, v.value]
    if isinstance(v, pydantic.BaseModel):
        return ["model", type(v).__name__, _typed(v.__dict__)]
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return ["dataclass", type(v).__name__, _typed(v.__dict__)]
    if isinstance(v, float):
        return ["float", repr(v)]
    return [type(v).__name__, v]


def _described(fn: fngen.GenFn, p: fngen.Param) -> str | None:
    """The description a parameter is offered with: its default's ``Field(description=...)``,
    its ``Annotated`` Field's, its ``Annotated`` string, else its docstring entry."""
    for source in (p.default or "", p.ann):
        found = re.search(r"description='([^']*)'", source)
        if found:
            return found.group(1)
    if "'str metadata doc'" in p.ann:
        return "str metadata doc"
    if fn.style == "none" or p.doc is None:
        return None
    return str(ast.literal_eval(f'"""{p.doc}"""'))  # as the docstring's literal reads it


def _jianmu(schema: Any, args: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", _typed(schema.validate("t", args))
    except JianmuError as exc:
        return "refused", str(exc)


def _nullable(fn: Any, name: str) -> bool:
    """Whether parameter ``name`` of ``fn`` may be None (Any, an optional, a Literal of None)."""
    return any(t is Any or t is type(None) or (
        typing.get_origin(t) is typing.Literal and None in typing.get_args(t))
        for t in _members(fn, name))



def _members(fn: Any, name: str) -> list[Any]:
    """The types parameter ``name`` of ``fn`` may be: a union's members, or the one type."""
    hint = typing.get_type_hints(fn, include_extras=True)[name]
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return list(typing.get_args(hint))
    return [hint]


def _decoded(fn: Any, name: str) -> bool:
    """Whether a JSON string for ``name`` is decoded: it takes a list or an object, no string."""
    found = _members(fn, name)
    if any(t is str or t is Any for t in found):
        return False
    return any(typing.get_origin(t) in _CONTAINERS or t in _CONTAINERS or (
        isinstance(t, type) and (issubclass(t, (dict, pydantic.BaseModel)) or
                                 dataclasses.is_dataclass(t))) for t in found)


@functools.lru_cache(maxsize=64)
def _checked(raw: Any) -> Any:
    return pydantic.validate_call(raw, config=_REFERENCE_CONFIG)


def _reference(module: Any, fn: fngen.GenFn, args: dict[str, Any]) -> tuple[str, Any]:
    """What the function receives through pydantic's `validate_call`, or ``refused``."""
    raw = getattr(getattr(module, f"C_{fn.name}"), fn.name) if fn.how == "method" else getattr(
        module, fn.name)
    checked = _checked(raw)
    params = {p.name: p for p in fn.params}
    if any(k not in params or k in fn.bound for k in args):
        return "refused", "unknown"
    given = dict(args)
    for key, value in list(given.items()):
        p = params[key]
        if value is None and p.default is not None and not (
                _nullable(raw, p.name)):
            del given[key]  # null for an optional parameter that may not be null: its default
        elif isinstance(value, str) and _decoded(raw, p.name):
            try:  # a list or object sent as a JSON string
                given[key] = json.loads(value)
            except ValueError:
                pass
    positional: list[Any] = [getattr(module, f"{fn.name}_obj")] if fn.how == "method" else []
    skipped = False
    for p in fn.params:
        if p.kind != "pos":
            continue
        if p.name not in given:
            skipped = True
        elif skipped:  # its default would be validated as an argument: not comparable
            return "skip", None
        else:
            positional.append(given.pop(p.name))
    try:
        out = checked(*positional, **fn.bound, **given)
        if inspect.isawaitable(out):
            out = asyncio.run(out)
    except (pydantic.ValidationError, TypeError) as exc:
        if "unexpected_positional_argument" in str(exc):  # validate_call's misreading of a
            return "skip", None  # keyword-only Field default after a defaulted parameter
        return "refused", str(exc)
    return "ok", _typed({k: v for k, v in out.items() if k not in fn.bound})


@pytest.mark.parametrize("seed", range(6))
def test_generated_functions_agree_fast_and_slow_and_with_pydantic(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, fns = fngen.module_source(seed, 25)
    monkeypatch.setitem(sys.modules, f"jianmu_fngen_{seed}", None)  # gone after the test
    module = fngen.load(tmp_path / f"gen_{seed}.py", source, f"jianmu_fngen_{seed}")
    rng = random.Random(seed)
    for fn in fns:
        target = fngen.target(module, fn)
        fast, slow = function_schema(target), function_schema(target, _fast=False)
        assert fast.parameters == slow.parameters, fn.name
        assert fast.description == slow.description == fn.summary, fn.name
        for p in fn.params:
            if p.name not in fn.bound:
                got = fast.parameters["properties"][p.name].get("description")
                assert got == _described(fn, p), (fn.name, p.name, fn.style)
        for args in fngen.arguments(rng, fn, 25):
            got = _jianmu(fast, args)
            assert got == _jianmu(slow, args), (fn.name, args)
            expected = _reference(module, fn, args)
            if expected[0] == "skip":
                continue
            assert got[0] == expected[0], (fn.name, args, got, expected)
            if got[0] == "ok":  # a parameter left out gets its default as written, unvalidated
                assert {k: v for k, v in got[1].items() if k in args} == {
                    k: v for k, v in expected[1].items() if k in args}, (fn.name, args)


class _Unit(enum.Enum):
    M = "m"


@pytest.mark.parametrize("seed", range(2))
def test_a_generated_tool_s_function_receives_what_validation_gave(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through `tool(...).execute`: positional-only parameters by position, a method's
    ``self``, a partial's bound keywords, sync in a worker thread and async on the loop."""
    source, fns = fngen.module_source(seed, 25)
    monkeypatch.setitem(sys.modules, f"jianmu_fngen_run_{seed}", None)  # gone after the test
    module = fngen.load(tmp_path / f"run_{seed}.py", source, f"jianmu_fngen_run_{seed}")
    rng = random.Random(seed)
    calls: list[tuple[Any, dict[str, Any], dict[str, Any]]] = []
    for fn in fns:
        made = tool(fngen.target(module, fn))
        for args in fngen.arguments(rng, fn, 6):
            try:
                calls.append((made, made.bind_args(args), args))
            except ToolInputError:
                continue

    async def run_all() -> None:
        for made, bound, args in calls:
            received = await made.execute(args)
            for name in set(received) - set(bound):  # what a partial binds
                del received[name]
            assert _typed(received) == _typed(bound), (made.name, args)

    asyncio.run(run_all())


# -- the bugs it found ------------------------------------------------------------------------


def test_a_private_or_reserved_parameter_with_a_field_default_keeps_its_name() -> None:
    """``_n = Field(...)`` or ``schema = Field(...)`` was offered, and taken, under the
    internal field name (``p0_n``): the model was told a name the function does not have."""

    def f(_n: int = Field(default=2, description="how many"),
          schema: Annotated[str, Field(min_length=1)] = Field(default="s")) -> None:
        """F."""

    for fast in (True, False):
        found = function_schema(f, _fast=fast)
        assert list(found.parameters["properties"]) == ["_n", "schema"]
        assert found.parameters["properties"]["_n"]["description"] == "how many"
        assert found.validate("t", {"_n": 3, "schema": "x"}) == {"_n": 3, "schema": "x"}
        with pytest.raises(ToolInputError):
            found.validate("t", {"p0_n": 3})


def test_a_non_finite_number_sent_as_text_is_refused() -> None:
    """``"nan"``, ``"inf"`` and ``"Infinity"`` were coerced to floats JSON has not, past the
    rule that refuses them whatever the schema (``"inf"`` passed ``gt=0``)."""

    def f(x: float = 1.0, xs: list[float] | None = None,
          pos: Annotated[float, Field(gt=0)] = 1.0) -> None:
        """F."""

    for fast in (True, False):
        found = function_schema(f, _fast=fast)
        for args in ({"x": "nan"}, {"x": "-inf"}, {"xs": [1.0, "inf"]}, {"pos": "Infinity"}):
            with pytest.raises(ToolInputError, match="finite"):
                found.validate("t", args)
        assert found.validate("t", {"x": "2.5"})["x"] == 2.5


def test_a_non_finite_number_sent_as_text_is_refused_by_the_typed_dict_validator() -> None:
    """The validator built of per-type core schemas (plain parameter types, an enum) had none
    of the config the model has: ``"nan"`` reached the function there even once the model
    refused it."""

    def f(x: float, unit: _Unit, xs: list[float] | None = None) -> None:
        """F."""

    found = function_schema(f)
    for args in ({"x": "nan", "unit": "m"}, {"x": 1, "unit": "m", "xs": ["-Infinity"]}):
        with pytest.raises(ToolInputError, match="finite"):
            found.validate("t", args)
    assert found.validate("t", {"x": "2", "unit": "m"}) == {"x": 2.0, "unit": _Unit.M, "xs": None}


def test_a_type_s_own_title_is_kept_by_the_fast_path_as_by_the_model() -> None:
    """The fast path stripped every title at the top of a type's schema, so a title the type
    gives itself (``WithJsonSchema``) was in the model's schema and not in the fast one."""

    def f(x: Annotated[str, WithJsonSchema({"type": "string", "title": "Code"})]) -> None:
        """F."""

    fast, slow = function_schema(f), function_schema(f, _fast=False)
    assert fast.parameters == slow.parameters
    assert fast.parameters["properties"]["x"]["title"] == "Code"


class _Searcher:
    """Search the catalogue.

    Args:
        query: words to look for
    """

    def __call__(self, query: str) -> str:
        return query


class _Bare:
    def __call__(self, query: str) -> str:
        return query


def test_a_callable_object_without_a_call_docstring_is_described_by_its_class() -> None:
    """A ``__call__`` without a docstring inherited ``type.__call__``'s, so the model read
    "Call self as a function." and the class's own docstring, with its parameters, was lost."""
    found = function_schema(_Searcher())
    assert found.description == "Search the catalogue."
    assert found.parameters["properties"]["query"]["description"] == "words to look for"
    assert function_schema(_Bare()).description == ""


def test_the_author_s_alias_names_a_private_or_reserved_parameter() -> None:
    """A parameter named ``_x`` (or like a BaseModel attribute) is a model field under another
    name; the alias that keeps its own name replaced the author's ``Field(alias=...)`` (in
    ``Annotated``), so the model was offered ``_q`` where pydantic-ai offers ``query``."""

    def f(_q: Annotated[str, Field(alias="query")],
          _n: int = Field(2, alias="count"),
          schema: str = Field("s", validation_alias="kind")) -> None:
        """F."""

    for fast in (True, False):
        found = function_schema(f, _fast=fast)
        assert list(found.parameters["properties"]) == ["query", "count", "kind"]
        assert found.validate("t", {"query": "q", "count": 3, "kind": "k"}) == {
            "_q": "q", "_n": 3, "schema": "k"}
        with pytest.raises(ToolInputError):
            found.validate("t", {"_q": "q"})


def _label(cls: str, text: str) -> str:
    """Label a text.

    Args:
        cls: the class label
        text: the text
    """
    return f"{cls}: {text}"


def test_a_module_function_s_first_parameter_named_cls_is_the_model_s() -> None:
    """``cls`` first was taken for a class method's own, left out of the schema, and the tool
    refused at registration as "a method read from its class"; only a function defined in a
    class body has such a ``cls``."""
    made = tool(_label)
    assert made.parameters["required"] == ["cls", "text"]
    assert made.unbound_problem() is None
    assert asyncio.run(made.execute({"cls": "spam", "text": "buy now"})) == "spam: buy now"

    class Labeller:
        @tool
        def label(cls, text: str) -> str:
            """Label."""
            return text

    assert list(Labeller.label.parameters["properties"]) == ["text"]
    assert Labeller.label.unbound_problem() is not None


def _no_summary(mode: str, count: int = 1) -> str:
    """
    Args:
        mode: how to run
        count: how many times
    """
    return mode * count


def test_a_docstring_without_a_summary_keeps_its_parameter_descriptions() -> None:
    """A docstring opening on "Args:" lost every description: cleaned a second time by both
    readers, its entries lost their indentation (pydantic-ai reads them)."""
    found = function_schema(_no_summary)
    assert found.description == ""
    assert found.param_descriptions == {"mode": "how to run", "count": "how many times"}
    assert found.parameters["properties"]["mode"]["description"] == "how to run"
