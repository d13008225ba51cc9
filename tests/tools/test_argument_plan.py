"""The scalar plan: a shortcut of the schema checker that must answer exactly as it does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jianmu.errors import ToolInputError
from jianmu.tools._arguments import (
    SchemaArguments,
    scalar_plan,
    validate_planned,
    validate_with_schema,
)

NAMES = ("a", "b", "c")
SCALARS = ("string", "integer", "number", "boolean")
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
    st.sampled_from(["1", "true", "2.5", " 3 ", "[1]", '{"x": 1}']),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(),
                                                         max_size=2),
)


def object_schema(
    properties: dict[str, Any], required: list[str], extra: bool | None
) -> dict[str, Any]:
    """An object schema of ``properties``; ``additionalProperties`` only when ``extra`` is
    given."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if extra is not None:
        schema["additionalProperties"] = extra
    return schema


def answer(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except ToolInputError as exc:
        return "refused", str(exc)


@settings(max_examples=400, deadline=None)
@given(
    types=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(SCALARS), max_size=3),
    required=st.lists(st.sampled_from(NAMES), unique=True, max_size=3),
    extra=st.sampled_from([None, True, False]),
    args=st.one_of(st.dictionaries(st.sampled_from((*NAMES, "zz")), VALUES, max_size=4),
                   VALUES),
)
def test_plan_answers_as_the_checker_does(
    types: dict[str, str], required: list[str], extra: bool | None, args: Any
) -> None:
    schema = object_schema(
        {k: {"type": t, "description": k} for k, t in types.items()}, required, extra)
    plan = scalar_plan(schema)
    assert plan is not None
    got = answer(validate_planned, "t", schema, plan, args)
    assert got == answer(validate_with_schema, "t", schema, args)
    if got[0] == "ok" and isinstance(args, dict):
        assert got[1] is not args  # a copy: the caller's dict is never handed on


@pytest.mark.parametrize("prop", [
    {"type": "string", "maxLength": 3},
    {"type": "string", "pattern": "^a"},
    {"type": "string", "enum": ["a"]},
    {"type": "integer", "minimum": 0},
    {"type": "number", "exclusiveMaximum": 1},
    {"type": "array", "items": {"type": "string"}},
    {"type": "object"},
    {"type": ["string", "null"]},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"$ref": "#/$defs/x"},
    {"type": "string", "const": "a"},
    {"type": "string", "x-unknown-keyword": 1},
    {},
])
def test_any_keyword_that_could_refuse_gets_no_plan(prop: dict[str, Any]) -> None:
    assert scalar_plan({"type": "object", "properties": {"p": prop}}) is None


def test_a_plan_refuses_what_the_checker_refuses() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    plan = scalar_plan(schema)
    assert plan is not None
    for bad in ({"n": True}, {"n": "x"}, {}, {"n": 1, "other": 2}, {"n": None}):
        with pytest.raises(ToolInputError):
            validate_planned("t", schema, plan, bad)
    assert validate_planned("t", schema, plan, {"n": "7"}) == {"n": 7}  # coerced as before
    assert validate_planned("t", schema, plan, '{"n": 7}') == {"n": 7}


# -- a JSON-schema tool's exact plan: scalars, arrays of scalars, string enums ------------------

PROPS = st.one_of(
    st.sampled_from(SCALARS).map(lambda t: {"type": t}),
    st.sampled_from(SCALARS).map(lambda t: {"type": "array", "items": {"type": t},
                                            "description": "d"}),
    st.builds(
        lambda props, required, extra: {
            "type": "object", "properties": props, "required": required,
            **({} if extra is None else {"additionalProperties": extra}),
        },
        st.dictionaries(st.sampled_from(NAMES), st.sampled_from(SCALARS).map(
            lambda t: {"type": t}), max_size=2),
        st.lists(st.sampled_from(NAMES), unique=True, max_size=2),
        st.sampled_from([None, True, False]),
    ),
    st.sampled_from([
        {"type": "string", "enum": ["a", "b"]},
        {"enum": ["a", "1", 2, None]},
        {"type": "string", "enum": []},
        {"type": "string", "enum": ["a"], "description": "d", "default": "a"},
    ]),
)
ITEMS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                  st.sampled_from(["a", "b", "1", ""]), st.lists(st.integers(), max_size=1))
EXACT_VALUES = st.one_of(
    VALUES, st.sampled_from(["a", "b", "1"]), st.lists(ITEMS, max_size=3),
    st.dictionaries(st.sampled_from((*NAMES, "zz")), ITEMS, max_size=3),
)


def checker_only(schema: dict[str, Any]) -> SchemaArguments:
    """The same schema's arguments, always checked by the jsonschema validator."""
    arguments = SchemaArguments("t", schema, accepted=None)
    arguments._plan = None
    return arguments


@settings(max_examples=500, deadline=None)
@given(
    props=st.dictionaries(st.sampled_from(NAMES), PROPS, max_size=3),
    required=st.lists(st.sampled_from(NAMES), unique=True, max_size=3),
    extra=st.sampled_from([None, True, False]),
    args=st.one_of(st.dictionaries(st.sampled_from((*NAMES, "zz")), EXACT_VALUES, max_size=4),
                   EXACT_VALUES),
)
def test_exact_plan_answers_as_the_validator_does(
    props: dict[str, Any], required: list[str], extra: bool | None, args: Any
) -> None:
    schema = object_schema(props, required, extra)
    planned = SchemaArguments("t", schema, accepted=None)
    assert planned._plan is not None
    got = answer(planned.validate, args)
    assert got == answer(checker_only(schema).validate, args)
    if got[0] == "ok" and isinstance(args, dict):
        assert got[1] is not args  # a copy, its arrays too: the model's call is never handed on
        assert all(got[1][k] is not v for k, v in args.items() if isinstance(v, (list, dict)))


@pytest.mark.parametrize("prop", [
    {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    {"type": "array", "items": {"type": "string", "minLength": 1}},
    {"type": "array", "items": {"type": "object"}},
    {"type": "array"},
    {"type": "integer", "enum": [1, 2]},
    {"type": "string", "enum": ["a"], "pattern": "^a"},
    {"type": "object", "properties": {"x": {"type": "string", "minLength": 1}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"x": {"type": "string"}}, "minProperties": 1},
])
def test_anything_else_gets_no_exact_plan(prop: dict[str, Any]) -> None:
    assert SchemaArguments("t", {"type": "object", "properties": {"p": prop}},
                           accepted=None)._plan is None


def test_a_draft3_required_flag_gets_no_exact_plan() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-03/schema#", "type": "object",
        "properties": {"o": {"type": "object", "required": True,
                             "properties": {"x": {"type": "string"}}}},
    }
    arguments = SchemaArguments("t", schema, accepted=None)
    assert arguments._plan is None
    assert arguments.validate({"o": {"x": "a"}}) == {"o": {"x": "a"}}
