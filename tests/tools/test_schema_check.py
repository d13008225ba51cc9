"""`check_schema` refuses exactly what jsonschema's meta-schema check refuses, and decides plain
tool schemas without it."""

from __future__ import annotations

import random
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.exceptions import SchemaError

from jianmu.errors import ToolDefinitionError
from jianmu.tools import Tool, _schema_check
from jianmu.tools._schema_check import check_schema

_KEYWORDS = [
    "type", "properties", "required", "description", "title", "items", "enum", "default",
    "const", "additionalProperties", "anyOf", "oneOf", "allOf", "not", "minimum", "maximum",
    "minLength", "maxItems", "uniqueItems", "format", "examples", "$defs", "prefixItems",
    "pattern", "$ref", "multipleOf", "readOnly", "$comment", "contains", "propertyNames",
    "if", "then", "else", "patternProperties", "dependentSchemas",
]
_ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 1.5, 2.0, "", "x", "string", "integer", "object", "nope", [],
    ["string"], ["string", "string"], ["a", 1], ["null", "integer"], {}, {"a": {}},
    {"a": 1}, ("string",), [{}], [True], float("nan"), "[a-", "^a+$", "#/$defs/x", 3,
    {"^a+$": {}}, {"[a-": {}}, {"(?<=a)b": {}}, "(?<=a)b", 0.5, -3,
]


def _value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth < 3 and roll < 0.25:
        return _schema(rng, depth + 1)
    if depth < 3 and roll < 0.35:
        return {f"p{i}": _schema(rng, depth + 1) for i in range(rng.randint(0, 3))}
    if depth < 3 and roll < 0.45:
        return [_schema(rng, depth + 1) for _ in range(rng.randint(0, 2))]
    return rng.choice(_ODD_VALUES)


def _schema(rng: random.Random, depth: int = 0) -> Any:
    if rng.random() < 0.1:
        return rng.choice([True, False, 1, "s", None, []])
    return {k: _value(rng, depth) for k in rng.sample(_KEYWORDS, rng.randint(0, 5))}


def _jsonschema_says(cls: Any, schema: Any) -> str | None:
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        return exc.message
    return None


def _ours_says(cls: Any, schema: Any) -> str | None:
    try:
        check_schema(cls, schema)
    except SchemaError as exc:
        return exc.message
    return None


def test_random_schemas_are_judged_as_jsonschema_judges_them() -> None:
    rng = random.Random(33)
    valid = invalid = 0
    for _ in range(1500):
        schema = _schema(rng)
        expected = _jsonschema_says(Draft202012Validator, schema)
        assert _ours_says(Draft202012Validator, schema) == expected, schema
        assert _ours_says(Draft202012Validator, schema) == expected, schema  # remembered
        valid += expected is None
        invalid += expected is not None
    assert valid > 200 and invalid > 200  # both sides of the line were exercised


@pytest.mark.parametrize("schema", [
    {"type": "strin"},
    {"type": ["string", "string"]},
    {"type": []},
    {"required": ["a", "a"]},
    {"required": "a"},
    {"properties": {"a": {"type": 3}}},
    {"properties": {"a": {"items": {"minLength": -1}}}},
    {"enum": "a"},
    {"anyOf": []},
    {"minimum": True},
    {"minimum": "1"},
    {"description": 3},
    {"uniqueItems": 1},
    {"pattern": "[a-"},
    {"additionalProperties": "no"},
    {"items": [{"type": "string"}]},
])
def test_an_invalid_schema_is_refused_with_jsonschemas_message(schema: dict[str, Any]) -> None:
    expected = _jsonschema_says(Draft202012Validator, schema)
    assert expected is not None
    assert _ours_says(Draft202012Validator, schema) == expected
    with pytest.raises(ToolDefinitionError):
        Tool.from_schema(lambda **kw: kw, name="t", description="d",
                         input_schema={"type": "object", "properties": {"a": schema}})


def test_a_plain_tool_schema_needs_no_meta_schema_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    def walk(schema: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the meta-schema was walked")

    monkeypatch.setattr(Draft202012Validator, "check_schema", walk)
    check_schema(Draft202012Validator, {
        "type": "object", "required": ["q", "n"], "additionalProperties": False,
        "properties": {
            "q": {"type": "string", "description": "the query", "minLength": 1},
            "n": {"type": ["integer", "null"], "minimum": 0, "default": 3},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
            "ctx": {"anyOf": [{"type": "object"}, {"type": "null"}]},
        },
    })


def test_an_accepted_schema_of_another_dialect_is_walked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walked: list[Any] = []
    real = _schema_check._meta_check  # jsonschema's check_schema, uniqueItems hashed

    def counted(cls: Any, schema: Any, *args: Any, **kwargs: Any) -> None:
        walked.append(schema)
        real(cls, schema, *args, **kwargs)

    monkeypatch.setattr(_schema_check, "_meta_check", counted)
    monkeypatch.setattr(_schema_check, "_accepted", type(_schema_check._accepted)())
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"a": {"type": "string", "pattern": "^x"}}}
    for _ in range(3):
        check_schema(Draft7Validator, dict(schema))
    assert len(walked) == 1
    # the same content with a tuple where a list was is another schema: walked again
    with pytest.raises(SchemaError):
        check_schema(Draft7Validator, {**schema, "required": ("a",)})
    assert len(walked) == 2


def test_a_plain_schema_is_one_both_checks_accept() -> None:
    from jianmu._schema_rules import schema_problems
    from jianmu.tools._schema_check import plain_schema

    rng = random.Random(34)
    plain = 0
    for _ in range(3000):
        schema = _schema(rng)
        if plain_schema(schema):
            plain += 1
            assert _jsonschema_says(Draft202012Validator, schema) is None, schema
            assert schema_problems(schema) == [], schema
    assert plain > 100


@pytest.mark.parametrize("schema", [
    {"type": "object", "default": {"$ref": "http://example.com/x"}},
    {"type": "object", "properties": {"a": {"enum": [{"pattern": "(?=a)"}]}}},
    {"type": "object", "properties": {"patternProperties": {"type": "object"},
                                      "unevaluatedProperties": {"type": "object"}}},
    {"type": "object", "examples": [{"$id": "http://example.com/"}]},
    {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"},
])
def test_a_schema_the_rules_look_into_is_not_plain(schema: dict[str, Any]) -> None:
    from jianmu.tools._schema_check import plain_schema

    assert not plain_schema(schema)


def test_a_ref_in_a_default_is_still_refused_when_the_tool_is_made() -> None:
    with pytest.raises(ToolDefinitionError, match="does not point inside the schema"):
        Tool.from_schema(lambda **kw: kw, name="t", description="d", input_schema={
            "type": "object", "properties": {"a": {"type": "object"}},
            "default": {"a": {"$ref": "http://example.com/schema"}},
        })


def test_a_plain_schemas_validator_is_made_at_its_first_refusal() -> None:
    from jianmu.errors import ToolInputError

    schema = {"type": "object", "required": ["n"], "additionalProperties": False,
              "properties": {"n": {"type": "integer", "description": "lazy 1"}}}
    made = Tool.from_schema(lambda n: n, name="t", description="d", input_schema=schema)
    checked = made._arguments._checked
    assert checked._validator is None  # nothing built at registration
    assert made.validate_args({"n": 2}) == {"n": 2}
    assert checked._validator is None  # the plan accepted it
    with pytest.raises(ToolInputError, match="is not of type 'integer'"):
        made.validate_args({"n": "x"})
    assert checked._validator is not None
    schema["properties"]["n"]["type"] = "string"  # the caller's dict: no tool reads it
    with pytest.raises(ToolInputError, match="is not of type 'integer'"):
        made.validate_args({"n": "x"})
