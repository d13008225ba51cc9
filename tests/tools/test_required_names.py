"""Names an object schema allows without defining them as properties. A ``required`` that
names a property the schema does not define (BFCL's definitions have them): a call that gives
it passes wherever the schema lets it, and a schema under which no call could ever pass is
refused when the tool is made, or when exported to strict mode. A key a ``patternProperties``
pattern matches is checked by that pattern's schema, by the lax checker too."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu.errors import ToolDefinitionError, ToolValidationError
from jianmu.tools import Tool, ToolSet

pytestmark = pytest.mark.anyio

OPEN = {"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city", "unit"]}
"""``unit`` is required and undefined; the object is open, so a call may give it."""


class Remote(Tool):
    """A tool checked by the lax checker (as an MCP server's tools are)."""

    name = "weather"
    description = "Weather of a city."
    input_schema = OPEN

    def run(self, **arguments: Any) -> str:
        return f"{arguments['city']} in {arguments['unit']}"


async def test_the_lax_checker_takes_a_required_name_the_schema_does_not_define() -> None:
    # it read an object without additionalProperties as closed: 'unit' was unknown when
    # given and missing when not, so every call failed
    tools = ToolSet.from_tools([Remote()])
    given = await tools.execute("weather", {"city": "Oslo", "unit": "C"})
    assert given.ok and given.output == "Oslo in C"
    missing = await tools.execute("weather", {"city": "Oslo"})
    assert not missing.ok and "missing required argument 'unit'" in (missing.error or "")
    assert "allowed arguments: city (required), unit (required)" in (missing.error or "")
    other = await tools.execute("weather", {"city": "Oslo", "unit": "C", "wind": 1})
    assert not other.ok and "unknown argument 'wind'" in (other.error or "")


def weather(**arguments: Any) -> str:
    return str(arguments)


def city_only(city: str) -> str:
    return city


def definition(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"name": "weather", "description": "Weather of a city.", "parameters": parameters}


def test_a_schema_no_call_could_pass_is_refused_when_the_tool_is_made() -> None:
    closed = {**OPEN, "additionalProperties": False}
    with pytest.raises(ToolDefinitionError) as caught:
        Tool.from_openai(definition(closed), weather)
    assert caught.value.problems == [
        "required argument 'unit' is not among the properties (city) and "
        "additionalProperties is false: no call could pass; define it under properties"]
    with pytest.raises(ToolDefinitionError, match=r"required argument 'unit' is not a "
                       r"parameter of the function \(city\): no call could pass"):
        Tool.from_openai(definition(OPEN), city_only)
    # open, and a function that takes any keyword: accepted, sent as given
    assert Tool.from_openai(definition(OPEN), weather).to_openai()["function"][
        "parameters"] == OPEN
    patterned = {**closed, "patternProperties": {"^u": {"type": "string"}}}
    Tool.from_openai(definition(patterned), weather)  # 'unit' matches a pattern: allowed


def test_strict_export_names_a_required_name_it_cannot_keep() -> None:
    # strict mode's required lists properties only: the name was dropped from it and extra
    # keys forbidden, so a strict model could never send what the check still required
    made = Tool.from_openai(definition(OPEN), weather)
    with pytest.raises(ToolValidationError, match="parameters requires 'unit', not among its "
                       "properties"):
        made.to_openai(strict=True)


class Labels(Tool):
    """A lax-checked tool whose names are given by pattern (as an MCP server may)."""

    name = "labels"
    description = "Set labels."
    input_schema = {"type": "object", "properties": {"target": {"type": "string"}},
                    "patternProperties": {"^label_": {"type": "integer", "minimum": 0}},
                    "additionalProperties": False}

    def run(self, **arguments: Any) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(arguments.items()))


async def test_the_lax_checker_checks_a_key_by_the_pattern_it_matches() -> None:
    # it ignored patternProperties: every key a pattern allows was an unknown argument
    tools = ToolSet.from_tools([Labels()])
    given = await tools.execute("labels", {"target": "x", "label_a": "3"})
    assert given.ok and given.output == "label_a=3,target=x"  # coerced as any property is
    bad = await tools.execute("labels", {"target": "x", "label_a": -1, "other": 1})
    assert not bad.ok
    assert "label_a: must be >= 0, got -1" in (bad.error or "")
    assert "unknown argument 'other'" in (bad.error or "")
    assert "allowed arguments: target, names matching '^label_'" in (bad.error or "")


class Shapes(Tool):
    """A lax-checked tool whose arguments are a union of forms beside a common property."""

    name = "shapes"
    description = "Draw a shape."
    input_schema = {"type": "object", "properties": {
        "kind": {"type": "string"},
        "size": {"type": "object", "properties": {"unit": {"type": "string"}}, "anyOf": [
            {"properties": {"w": {"type": "number"}}, "required": ["w"]},
            {"properties": {"r": {"type": "number"}}, "required": ["r"]}]}},
        "anyOf": [{"properties": {"color": {"type": "string"}}}]}

    def run(self, **arguments: Any) -> str:
        return str(sorted(arguments))


async def test_the_lax_checker_takes_names_a_union_s_forms_define() -> None:
    # an object with properties was read as closed, so the names its anyOf forms define were
    # unknown arguments (at the root), and each form refused its siblings' names (inside):
    # every call that used a form failed
    tools = ToolSet.from_tools([Shapes()])
    drawn = await tools.execute(
        "shapes", {"kind": "circle", "color": "red", "size": {"unit": "cm", "r": 2}})
    assert drawn.ok, drawn.error
    missing = await tools.execute("shapes", {"kind": "circle", "size": {"unit": "cm"}})
    assert not missing.ok and "matches none of the allowed forms" in (missing.error or "")
    other = await tools.execute("shapes", {"kind": "circle", "shade": 1})
    assert not other.ok and "unknown argument 'shade'" in (other.error or "")
