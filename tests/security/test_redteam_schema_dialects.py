"""Red team, schemas in the older dialects a hostile MCP server or tool catalogue may name
(``$schema`` draft-03 to draft-07, which zod-to-json-schema and many servers still emit).

Fixed here: the rules knew 2019-09/2020-12's keywords only. A loop through draft 4-7's
``dependencies`` or draft 3's ``extends``/``disallow`` (``{"dependencies": {"p": {"$ref":
"#"}}}``) passed when the tool was made and every call then ended in Python's RecursionError;
draft 4's ``id`` (and a ``urn:`` ``$id``, which `urljoin` drops) was not read as the base of
the references below it, so a ``$ref`` the check found in one place was looked up in another by
the validator, and every call failed with a referencing error; draft 3's ``divisibleBy`` was
jsonschema's float division (``0.3`` no multiple of ``0.1``, OverflowError for ``10**400``).
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu.errors import ToolDefinitionError, ToolInputError
from jianmu.tools import Tool

D3 = "http://json-schema.org/draft-03/schema#"
D4 = "http://json-schema.org/draft-04/schema#"
D7 = "http://json-schema.org/draft-07/schema#"


def _tool(parameters: dict[str, Any]) -> Tool:
    return Tool.from_openai(
        {"type": "function", "function": {"name": "t", "description": "A tool.",
                                          "parameters": parameters}},
        lambda **kwargs: f"ran with {kwargs}",
    )


@pytest.mark.parametrize("parameters", [
    {"$schema": D7, "type": "object", "properties": {"p": {"type": "integer"}},
     "dependencies": {"p": {"$ref": "#"}}},
    {"$schema": D4, "type": "object", "dependencies": {"p": {"allOf": [{"$ref": "#"}]}}},
    {"$schema": D3, "type": "object", "extends": {"$ref": "#"}},
    {"$schema": D3, "type": "object", "disallow": [{"disallow": [{"$ref": "#"}]}]},
], ids=["draft7-dependencies", "draft4-dependencies", "draft3-extends", "draft3-disallow"])
def test_a_loop_through_an_older_dialects_keyword_is_refused_when_the_tool_is_made(
    parameters: dict[str, Any],
) -> None:
    with pytest.raises(ToolDefinitionError, match="refers to itself"):
        _tool(parameters)


def test_a_bomb_through_draft7_dependencies_is_refused_when_the_tool_is_made() -> None:
    defs: dict[str, Any] = {
        f"a{i}": {"dependencies": {"p": {"allOf": [{"$ref": f"#/definitions/a{i + 1}"}] * 2}}}
        for i in range(40)
    }
    defs["a40"] = {"type": "object"}
    with pytest.raises(ToolDefinitionError, match="more than 10,000 schemas"):
        _tool({"$schema": D7, "type": "object", "definitions": defs,
               "allOf": [{"$ref": "#/definitions/a0"}]})


@pytest.mark.parametrize("parameters", [
    {"$schema": D4, "type": "object", "definitions": {"a": {"type": "string"}},
     "properties": {"p": {"id": "http://elsewhere.example/s.json", "type": "object",
                          "properties": {"q": {"$ref": "#/definitions/a"}}}}},
    {"$schema": D4, "type": "object", "definitions": {"a": {"type": "string"}},
     "properties": {"p": {"id": "urn:elsewhere", "type": "object",
                          "properties": {"q": {"$ref": "#/definitions/a"}}}}},
    {"type": "object", "$defs": {"a": {"type": "string"}},
     "properties": {"p": {"$id": "urn:elsewhere", "type": "object",
                          "properties": {"q": {"$ref": "#/$defs/a"}}}}},
], ids=["draft4-id", "draft4-urn-id", "2020-urn-id"])
def test_a_reference_under_another_base_is_looked_up_where_the_validator_looks(
    parameters: dict[str, Any],
) -> None:
    # the validator reads '#/…' in the resource of the nearest id, which has no such part:
    # refused when made, not failed at every call
    with pytest.raises(ToolDefinitionError, match="does not point inside the schema"):
        _tool(parameters)


def test_references_under_an_id_of_the_schema_still_resolve() -> None:
    tool = _tool({"$schema": D4, "id": "urn:root", "type": "object",
                  "definitions": {"a": {"type": "string"}},
                  "properties": {"p": {"$ref": "#/definitions/a"},
                                 "q": {"$ref": "urn:root#/definitions/a"}}})
    assert tool.validate_args({"p": "x", "q": "y"}) == {"p": "x", "q": "y"}
    with pytest.raises(ToolInputError, match=r"\$\.q: 5 is not of type 'string'"):
        tool.validate_args({"p": "x", "q": 5})


@pytest.mark.parametrize(("value", "ok"), [(10**400, True), (0.3, True), (0.35, False)],
                         ids=["huge", "tenths", "not-tenths"])
def test_draft3_divisible_by_is_decided_exactly(value: Any, ok: bool) -> None:
    tool = _tool({"$schema": D3, "type": "object",
                  "properties": {"p": {"type": "number", "divisibleBy": 0.1}}})
    if ok:
        assert tool.validate_args({"p": value}) == {"p": value}
    else:
        with pytest.raises(ToolInputError, match=r"is not a multiple of 0\.1"):
            tool.validate_args({"p": value})
