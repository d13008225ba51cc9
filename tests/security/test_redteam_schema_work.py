"""Red team, keywords whose work grows with the schema times the value: a tool catalogue's (or
an MCP server's) schema with thousands of ``required`` names or ``properties``, and a model's
small argument of many empty objects.

Fixed here: jsonschema tried every required name on every object and made an error for each
missing one, all kept: 2,000 names by 300 empty objects (a 1 KB argument) were 600,000 errors,
2 GB and a minute on the event loop; the lax checker (MCP tools' inputs) did the same with
text. ``properties``, ``dependentRequired``/``dependentSchemas``/``dependencies`` looked up
every name of the schema in every object, steps the budget never counted. Now each walks the
smaller of the object and the keyword, pays the check's budget for it, names the first
missing names and counts the rest, and a check keeps at most `MAX_ERRORS` errors. The work is
counted (errors, problems, walks, traced memory), never timed. Also fixed: jsonschema's messages
quote the value they are about, and an anyOf at each level of a deep argument quoted its whole
subtree at each level; a value is now quoted briefly (`briefly`).
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator

from jianmu import _schema_rules
from jianmu.errors import ToolInputError
from jianmu.tools import Tool
from jianmu.tools._arguments import validate_with_schema

NAMES = 500
OBJECTS = 200


def _tool(items: dict[str, Any]) -> Tool:
    return Tool.from_openai(
        {"type": "function", "function": {"name": "t", "description": "A tool.", "parameters": {
            "type": "object", "properties": {"a": {"type": "array", "items": items}},
        }}},
        lambda **kwargs: "ran",
    )


def _empty_objects() -> dict[str, Any]:
    return {"a": [{} for _ in range(OBJECTS)]}


@pytest.mark.parametrize("items", [
    {"type": "object", "required": [f"r{i}" for i in range(NAMES)]},
    {"type": "object", "dependentRequired": {"": [f"r{i}" for i in range(NAMES)]}},
], ids=["required", "dependentRequired"])
def test_many_missing_names_in_many_objects_make_few_errors(items: dict[str, Any]) -> None:
    arguments = _empty_objects()
    if "dependentRequired" in items:
        arguments = {"a": [{"": 1} for _ in range(OBJECTS)]}
    with pytest.raises(ToolInputError) as caught:
        _tool(items).validate_args(arguments)
    problems = caught.value.problems
    assert len(problems) <= _schema_rules.MAX_ERRORS  # were NAMES * OBJECTS
    assert "'r0' is" in problems[0] and f"… and {NAMES - 20:,} more missing" in problems[20]


def test_the_lax_checker_pays_for_each_required_name() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {
        "type": "object", "properties": {"x": {}}, "required": [f"r{i}" for i in range(NAMES)],
    }}}}
    with pytest.raises(ToolInputError) as caught:
        validate_with_schema("t", schema, _empty_objects())
    assert len(caught.value.problems) <= 50  # were NAMES * OBJECTS lines
    # a few objects missing a few names are still named one by one
    schema["properties"]["a"]["items"]["required"] = ["r0", "r1"]
    with pytest.raises(ToolInputError) as caught:
        validate_with_schema("t", schema, {"a": [{}, {"x": 1}]})
    assert caught.value.problems == [
        "missing required argument 'a[0].r0'", "missing required argument 'a[0].r1'",
        "missing required argument 'a[1].r0'", "missing required argument 'a[1].r1'",
    ]


class _Walked(dict):  # type: ignore[type-arg]
    """A keyword's mapping that counts the walks over all of it."""

    walks = 0

    def items(self) -> Any:
        _Walked.walks += 1
        return super().items()


@pytest.mark.parametrize(("cls", "keyword"), [
    (Draft202012Validator, "properties"), (Draft202012Validator, "dependentSchemas"),
    (Draft7Validator, "dependencies"),
])
def test_a_huge_keyword_is_not_walked_for_each_small_object(cls: Any, keyword: str) -> None:
    _Walked.walks = 0
    named = _Walked({f"p{i}": {"type": "string"} for i in range(NAMES)})
    validator = _schema_rules.validator_class(cls)({"type": "array", "items": {keyword: named}})
    errors = _schema_rules.within_budget(
        lambda: validator.iter_errors([{"p7": 1}] * OBJECTS), 100_000,
    )
    assert len(errors) == OBJECTS  # p7 is checked in each object
    assert _Walked.walks == 0  # was once per object


def test_errors_about_a_deep_argument_quote_it_briefly() -> None:
    # a recursive schema with an anyOf at each level (what pydantic makes of Optional[Node]):
    # each level's error quoted its whole subtree, 50 quotes of 1 MB here (5 MB by 100 deep
    # was 1 GB)
    tool = Tool.from_openai({"type": "function", "function": {
        "name": "t", "description": "A tool.", "parameters": {
            "type": "object", "properties": {"c": {"$ref": "#/$defs/n"}},
            "$defs": {"n": {"anyOf": [
                {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}},
                 "additionalProperties": False},
                {"type": "integer"},
            ]}},
        },
    }}, lambda **kwargs: "ran")
    value: Any = "X" * 1_000_000
    for _ in range(50):
        value = {"c": value}
    tracemalloc.start()
    try:
        with pytest.raises(ToolInputError, match="is not valid under any of the given schemas"):
            tool.validate_args(value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"peak {peak} bytes"


def test_the_lax_checker_quotes_a_deep_argument_without_copying_it() -> None:
    node = {"anyOf": [{"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}},
                       "additionalProperties": False}, {"type": "integer"}]}
    schema = {"type": "object", "$defs": {"n": node}, "properties": {"c": {"$ref": "#/$defs/n"}}}
    value: Any = "X" * 2_000_000
    for _ in range(10):
        value = {"c": value}
    tracemalloc.start()
    try:
        with pytest.raises(ToolInputError, match="matches none of the allowed forms"):
            validate_with_schema("t", schema, value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"peak {peak} bytes"  # a quote of each level made 2 MB each


def test_the_lax_checker_keys_a_huge_const_once(monkeypatch: pytest.MonkeyPatch) -> None:
    size = 100_000
    keyed = [0]
    key = _schema_rules._json_key

    def counted(value: Any) -> Any:
        keyed[0] += 1
        return key(value)

    monkeypatch.setattr(_schema_rules, "_json_key", counted)
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {
        "const": [0] * size,
    }}}}
    with pytest.raises(ToolInputError, match="must be"):
        validate_with_schema("t", schema, {"a": [1] * OBJECTS})
    assert keyed[0] < 2 * size  # was OBJECTS * size: the const keyed again for each item


class _Listed(dict):  # type: ignore[type-arg]
    """A schema's properties that count the names walked."""

    named = 0

    def __iter__(self) -> Any:
        for key in dict.__iter__(self):
            _Listed.named += 1
            yield key


def test_the_lax_checker_names_a_few_allowed_arguments_without_listing_all() -> None:
    _Listed.named = 0
    size = 50_000
    schema = {"type": "object", "properties": _Listed({f"p{i}": {} for i in range(size)}),
              "additionalProperties": False}
    with pytest.raises(ToolInputError, match=r"allowed: p0, p1, .*\(50,000 in all\)"):
        validate_with_schema("t", schema, {f"u{i}": 1 for i in range(OBJECTS)})
    # each unknown argument listed all 50,000 names first
    assert _Listed.named < 3 * size
