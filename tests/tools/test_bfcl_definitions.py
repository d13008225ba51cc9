"""BFCL's function definitions as BFCL ships them (its own type names, names with dots): a tool
made from one is refused with every problem named, each with what JSON Schema writes instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import ToolDefinitionError, ToolValidationError
from jianmu.tools import Tool, ToolSet, tool
from jianmu.tools._type_names import type_problems

SAMPLE = Path(__file__).parents[1] / "fixtures" / "bfcl" / "questions.jsonl"
TASKS = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
DEFINITIONS = [f for task in TASKS for f in task["function"]]


def record(**kwargs: Any) -> dict[str, Any]:
    return kwargs


def triangle() -> dict[str, Any]:
    return {"name": "calculate_triangle_area", "description": "Area of a triangle.",
            "parameters": {"type": "dict", "required": ["base"], "properties": {
                "base": {"type": "float", "description": "The base."},
                "corner": {"type": "tuple", "items": {"type": "float"}},
                "unit": {"type": "any", "default": {"type": "dict"}}}}}


def test_a_bfcl_dict_root_is_named_as_such_not_as_a_wrapped_input() -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        Tool.from_openai(triangle(), record)
    assert caught.value.problems == [
        "input schema is not a valid JSON Schema at type: 'dict' is not a JSON Schema type; "
        "write 'object'",
        "input schema is not a valid JSON Schema at properties/base/type: 'float' is not a "
        "JSON Schema type; write 'number'",
        "input schema is not a valid JSON Schema at properties/corner/type: 'tuple' is not a "
        "JSON Schema type; write 'array'",
        "input schema is not a valid JSON Schema at properties/corner/items/type: 'float' is "
        "not a JSON Schema type; write 'number'",
        "input schema is not a valid JSON Schema at properties/unit/type: 'any' is not a JSON "
        "Schema type; leave 'type' out to allow any value",
    ]


def test_nested_foreign_types_are_all_named_under_an_object_root() -> None:
    definition = triangle()
    definition["parameters"]["type"] = "object"
    with pytest.raises(ToolDefinitionError) as caught:
        Tool.from_openai(definition, record)
    assert [p.split(" at ")[1].split(":")[0] for p in caught.value.problems] == [
        "properties/base/type", "properties/corner/type", "properties/corner/items/type",
        "properties/unit/type"]


def test_a_dotted_name_says_what_to_write_and_the_schema_problems_come_with_it() -> None:
    definition = {**triangle(), "name": "geometry.triangle_area"}
    with pytest.raises(ToolDefinitionError) as caught:
        Tool.from_openai(definition, record)
    problems = caught.value.problems
    assert "write 'geometry_triangle_area'" in problems[0]
    assert len(problems) == 6 and "'dict' is not a JSON Schema type" in problems[1]
    valid = {**definition, "parameters": {"type": "object", "properties": {}}}
    with pytest.raises(ToolValidationError, match="write 'geometry_triangle_area'"):
        Tool.from_openai(valid, record)


def test_java_and_capitalised_type_names_get_their_json_schema_spelling() -> None:
    schema = {"type": "object", "properties": {
        "s": {"type": "String"}, "m": {"type": "HashMap"}, "n": {"type": "long"},
        "l": {"type": "ArrayList", "items": {"type": "Boolean"}}, "x": {"type": "Thing"},
        "ok": {"type": ["string", "Bigint"]},
        "properties": {"type": "object", "properties": {"type": {"type": "string"}}},
        "e": {"type": "string", "enum": [{"type": "dict"}], "const": {"type": "dict"}},
        "d": {"type": "object", "dependentRequired": {"type": ["kind"]},
              "x-vendor": {"type": "dict"}}}}
    assert [p.split(" at ", 1)[1] for p in type_problems(schema)] == [
        "properties/s/type: 'String' is not a JSON Schema type; write 'string' (JSON Schema's "
        "types are lower case)",
        "properties/m/type: 'HashMap' is not a JSON Schema type; write 'object'",
        "properties/n/type: 'long' is not a JSON Schema type; write 'integer'",
        "properties/l/type: 'ArrayList' is not a JSON Schema type; write 'array'",
        "properties/l/items/type: 'Boolean' is not a JSON Schema type; write 'boolean' (JSON "
        "Schema's types are lower case)",
        "properties/x/type: 'Thing' is not a JSON Schema type; use array, boolean, integer, "
        "null, number, object, string",
        "properties/ok/type/1: 'Bigint' is not a JSON Schema type; write 'integer'",
    ]


@pytest.mark.parametrize("definition", DEFINITIONS, ids=[d["name"] for d in DEFINITIONS])
def test_every_raw_bfcl_definition_is_refused_naming_each_problem(
        definition: dict[str, Any]) -> None:
    with pytest.raises(ToolValidationError) as caught:
        ToolSet.from_openai([definition], {definition["name"]: record})
    problems = caught.value.problems
    assert problems
    for problem in problems:
        assert "properties/input/" not in problem  # the root is the definition's, not a wrap
        assert "is not valid under any of the given schemas" not in problem
        assert "write" in problem or "leave 'type' out" in problem or "use " in problem
    if "." in definition["name"]:
        assert definition["name"].replace(".", "_") in problems[0]


def test_the_other_ways_of_giving_a_schema_name_the_definition_root_too() -> None:
    parameters = triangle()["parameters"]
    with pytest.raises(ToolDefinitionError) as decorated:
        tool(input_schema=parameters, name="area", description="Area.")(record)
    with pytest.raises(ToolDefinitionError) as from_schema:
        Tool.from_schema(record, name="area", description="Area.", input_schema=parameters)
    assert decorated.value.problems == from_schema.value.problems
    assert from_schema.value.problems[0] == (
        "input schema is not a valid JSON Schema at type: 'dict' is not a JSON Schema type; "
        "write 'object'")
    with pytest.raises(ToolDefinitionError, match="write 'area_v2'"):
        tool(input_schema=parameters, name="area.v2", description="Area.")(record)


def test_the_shapes_bfcl_sends_to_each_provider_all_make_the_same_tool() -> None:
    parameters = {"type": "object", "required": ["base"], "properties": {
        "base": {"type": "number", "description": "The base."}}}
    inner = {"name": "area", "description": "Area.", "parameters": parameters}
    shapes = [
        {"type": "function", "function": inner},  # Chat Completions
        {"type": "function", **inner},  # the Responses API: flat
        inner,  # BFCL's own, converted
        {"name": "area", "description": "Area.", "input_schema": parameters},  # Anthropic
        {"name": "area", "description": "Area.", "inputSchema": parameters},  # MCP
        {"name": "area", "description": "Area.", "inputSchema": {"json": parameters}},  # Bedrock
    ]
    for shape in shapes:
        made = Tool.from_openai(shape, record)
        assert (made.name, made.parameters) == ("area", parameters), shape
        tools = ToolSet.from_openai([shape], {"area": record})
        assert tools.get("area").parameters == parameters
    with pytest.raises(ToolDefinitionError, match="'parameters' and 'input_schema'"):
        Tool.from_openai({**inner, "input_schema": {"type": "object"}}, record)


def test_a_root_type_list_or_a_type_that_is_no_name_is_named_at_the_root() -> None:
    for kind, problem in ((["dict", "null"], "type/0: 'dict' is not a JSON Schema type; write "
                           "'object'"),
                          (5, "type: 5 is not a JSON Schema type; use array, boolean, integer, "
                           "null, number, object, string")):
        with pytest.raises(ToolDefinitionError) as caught:
            Tool.from_openai({"name": "f", "parameters": {"type": kind, "properties": {}}},
                             record)
        assert caught.value.problems == [
            f"input schema is not a valid JSON Schema at {problem}"]


def test_a_valid_schema_of_another_root_is_not_refused_for_data_named_type() -> None:
    schema = {"type": "string", "default": "x", "enum": ["x", "y"],
              "examples": [{"type": "dict"}], "dependentRequired": {"type": ["dict"]}}
    made = Tool.from_schema(record, name="one", description="One.", input_schema=schema)
    assert made.parameters["properties"]["input"] == schema


def test_parameters_at_the_schema_root_are_refused_not_dropped() -> None:
    # xLAM's and ToolACE's shape: parameters named at the root, no "properties". jsonschema
    # reads them as unknown keywords: the tool was made taking any arguments, the model told
    # of none
    xlam = {"name": "search", "description": "Search.", "parameters": {
        "query": {"type": "string", "description": "What to find."},
        "limit": {"type": "integer", "default": 10}}}
    with pytest.raises(ToolDefinitionError) as caught:
        Tool.from_openai(xlam, record)
    assert caught.value.problems == [
        "'query', 'limit' at the schema's root are read by JSON Schema as unknown keywords (the "
        "model would never see them as parameters); put them under 'properties': "
        '{"type": "object", "properties": {...}}']
    keywords = {"name": "ok", "description": "d", "parameters": {
        "additionalProperties": {"type": "string"}, "x-vendor": {"type": "internal"}}}
    Tool.from_openai(keywords, record)  # keywords and extensions are no parameters


def test_a_schema_under_a_key_no_format_uses_is_refused_not_read_as_none() -> None:
    # API-Bank's shape: "input_parameters"; read as no schema, a tool of no arguments
    apibank = {"name": "get_weather", "description": "Weather.",
               "input_parameters": {"city": {"type": "str"}}, "output_parameters": {}}
    with pytest.raises(ToolDefinitionError, match=r"gives no 'parameters' .* but "
                       r"'input_parameters', 'output_parameters'"):
        Tool.from_openai(apibank, record)
    mcp = {"name": "ping", "description": "Ping.", "annotations": {"readOnlyHint": True},
           "_meta": {"k": 1}, "response": {"type": "string"}}
    assert Tool.from_openai(mcp, record).parameters == {"type": "object", "properties": {}}


def test_a_set_names_every_invalid_definition_at_once_not_the_first_alone() -> None:
    bad_root = {"name": "stray", "parameters": {"type": "object", "x": {"type": "integer"}}}
    good = {"name": "fine", "parameters": {"type": "object",
                                           "properties": {"x": {"type": "integer"}}}}
    with pytest.raises(ToolDefinitionError) as caught:
        ToolSet.from_openai([triangle(), good, bad_root, {"name": "lost", "parameters": {}}],
                            {"calculate_triangle_area": record, "fine": record,
                             "stray": record, "extra": record})
    error = caught.value
    assert error.tool == "calculate_triangle_area, stray"
    assert error.problems[0].startswith("calculate_triangle_area: input schema is not a valid "
                                        "JSON Schema at type: 'dict'")
    assert any(p.startswith("stray: 'x' at the schema's root") for p in error.problems)
    # what else is wrong with the set is said in the same error
    assert "definition 'lost' has no function" in error.problems
    assert "function 'extra' has no definition" in error.problems
    assert not any(p.startswith("fine") for p in error.problems)
