"""Red team: one hostile input schema, given through every way a tool is built from one.

`Tool.from_schema`, ``@tool(input_schema=...)``, `Tool.from_openai` and an MCP server's tool
(`MCPTool`, as `MCPToolProvider` makes it from ``tools/list``) all run the same check
(`jianmu.tools._schema_shape.check_given_schema`, then the schema rules and meta-schema). Only
`Tool.from_openai` refused parameters named at the root (xLAM's shape) or beside
``properties``: the others made a tool the model was told had no parameters, and any call
passed. ``@tool(input_schema=...)`` failed with ``AttributeError`` on a schema that is no dict,
an MCP tool with ``TypeError``. A property named ``self`` failed every call of a
`Tool.from_schema` tool with ``TypeError``. Each is a `ToolDefinitionError` naming the tool and
the problem now, and the tools of the same set that are fine stay.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jianmu.errors import ToolDefinitionError, ToolUnavailableWarning
from jianmu.tools import Tool, ToolSet, tool
from tests.support.counting_server import counting_server

pytestmark = pytest.mark.anyio


def record(**kwargs: Any) -> dict[str, Any]:
    return kwargs


def from_schema(schema: Any) -> Tool:
    return Tool.from_schema(record, name="probe", description="Probe.", input_schema=schema)


def decorated(schema: Any) -> Tool:
    return tool(input_schema=schema, name="probe", description="Probe.")(record)


def from_openai(schema: Any) -> Tool:
    return Tool.from_openai({"name": "probe", "description": "Probe.", "parameters": schema},
                            record)


def from_mcp(schema: Any) -> Tool:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp.data import MCPToolInfo
    from jianmu.mcp.provider import MCPTool

    return MCPTool(None, MCPToolInfo(name="probe", input_schema=schema),  # type: ignore[arg-type]
                   server="srv", name="probe", timeout=5)


PATHS: list[Callable[[Any], Tool]] = [from_schema, decorated, from_openai, from_mcp]


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"inner": schema}}
    return schema


@pytest.mark.parametrize("make", PATHS)
@pytest.mark.parametrize(("schema", "says"), [
    # xLAM's and ToolACE's shape: no properties, the parameters at the root
    ({"query": {"type": "string"}, "limit": {"type": "integer"}},
     "'query', 'limit' at the schema's root are read by JSON Schema as unknown keywords"),
    ({"type": "object", "query": {"type": "string", "description": "What to find."}},
     "'query' at the schema's root is read by JSON Schema as an unknown keyword"),
    # one parameter written beside `properties`: never offered to the model, never checked
    ({"type": "object", "properties": {"a": {"type": "string"}}, "b": {"type": "integer"}},
     "'b' at the schema's root is read"),
])
def test_parameters_outside_properties_are_refused_by_every_path(
        make: Callable[[Any], Tool], schema: dict[str, Any], says: str) -> None:
    with pytest.raises(ToolDefinitionError) as refused:
        make(schema)
    assert refused.value.tool == "probe"
    assert says in str(refused.value) and "under 'properties'" in str(refused.value)


@pytest.mark.parametrize("make", PATHS)
def test_keywords_and_extensions_at_the_root_are_no_parameters(
        make: Callable[[Any], Tool]) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}},
              "additionalProperties": {"type": "string"}, "x-vendor": {"type": "internal"},
              "externalDocs": {"description": "More."}, "example": {"type": "a"},
              "errorMessage": {"type": "must be an object"}, "not": {"type": "null"}}
    assert make(schema).to_openai()["function"]["parameters"] == schema


@pytest.mark.parametrize("make", PATHS)
@pytest.mark.parametrize("schema", [[{"type": "string"}], "object", True, 5])
def test_a_schema_that_is_no_object_is_refused_by_name_by_every_path(
        make: Callable[[Any], Tool], schema: Any) -> None:
    with pytest.raises(ToolDefinitionError) as refused:
        make(schema)
    assert refused.value.tool == "probe"
    assert refused.value.problems == [
        f"input_schema must be a JSON Schema object, got {type(schema).__name__}"]


@pytest.mark.parametrize("make", PATHS)
def test_a_schema_given_as_json_text_says_so(make: Callable[[Any], Tool]) -> None:
    with pytest.raises(ToolDefinitionError) as refused:
        make(' {"type": "object", "properties": {}}')
    assert refused.value.problems == [
        "input_schema must be a JSON Schema object, got str holding JSON text; give the object "
        "it spells (json.loads)"]


@pytest.fixture
def watched_url() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server that records every request: nothing may reach it."""
    with counting_server(b'{"type": "string"}') as (port, hits):
        yield f"http://127.0.0.1:{port}/item.json", hits


LOOP = {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "properties": {"x": {"$ref": "#/$defs/a"}}}


@pytest.mark.parametrize("make", PATHS)
@pytest.mark.parametrize(("schema", "says"), [
    (LOOP, "refers to itself"),
    ({"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a|aa)+\\1$"}}},
     "is not RE2 syntax"),
    ({"type": "object", "properties": {"x": {"type": "string", "pattern": "(?=a)a"}}},
     "is not RE2 syntax"),
    (_deep(80), "nests deeper than"),
    ({"type": "object", "properties": None}, "at properties: None is not of type 'object'"),
    ({"type": "object", "properties": {"x": {"type": "string"}}, "required": "x"},
     "at required: 'x' is not of type 'array'"),
])
def test_hostile_schemas_are_refused_by_every_path(
        make: Callable[[Any], Tool], schema: dict[str, Any], says: str) -> None:
    with pytest.raises(ToolDefinitionError) as refused:
        make(schema)
    assert refused.value.tool == "probe" and says in str(refused.value)


@pytest.mark.parametrize("make", PATHS)
def test_a_remote_ref_is_refused_and_never_fetched_by_any_path(
        make: Callable[[Any], Tool], watched_url: tuple[str, list[str]]) -> None:
    url, hits = watched_url
    for ref in (url, f"{url}#/x", "file:///etc/passwd"):
        schema = {"type": "object", "properties": {"x": {"$ref": ref}}, "required": ["x"]}
        with pytest.raises(ToolDefinitionError, match="does not point inside the schema"):
            make(schema)
        nested = {"type": "object", "$id": url, "properties": {"x": {"$ref": "other.json"}}}
        with pytest.raises(ToolDefinitionError, match="does not point inside the schema"):
            make(nested)
    assert hits == []


@pytest.mark.parametrize("make", PATHS)
async def test_a_huge_enum_is_taken_and_a_wrong_value_named_briefly(
        make: Callable[[Any], Tool]) -> None:
    made = make({"type": "object", "properties": {"x": {"enum": list(range(100_000))}},
                 "required": ["x"]})
    assert made.validate_args({"x": 99_999}) == {"x": 99_999}
    with pytest.raises(Exception, match="x") as refused:
        made.validate_args({"x": -1})
    assert len(str(refused.value)) < 2_000


@pytest.mark.parametrize("make", [from_schema, decorated, from_openai])
async def test_arguments_named_like_python_s_own_reach_the_function(
        make: Callable[[Any], Tool]) -> None:
    made = make({"type": "object", "required": ["self"], "properties": {
        name: {"type": "string"} for name in ("self", "__proto__", "args", "kwargs", "cls")}})
    sent = {"self": "a", "__proto__": "b", "args": "c", "kwargs": "d", "cls": "e"}
    assert await made.execute(sent) == sent
    result = await ToolSet([made]).execute("probe", {"self": "x"})
    assert result.ok and result.output == {"self": "x"}


async def test_a_refused_tool_leaves_the_rest_of_its_server_s_tools() -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp.data import MCPToolInfo
    from jianmu.mcp.provider import MCPToolProvider

    provider = MCPToolProvider("srv", command="unused")
    infos = [
        MCPToolInfo(name="xlam", input_schema={"query": {"type": "string"}}),
        MCPToolInfo(name="stray", input_schema={
            "type": "object", "properties": {}, "limit": {"type": "integer"}}),
        MCPToolInfo(name="fine", input_schema={
            "type": "object", "properties": {"q": {"type": "string"}}}),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = provider._build(infos)
    assert [t.name for t in made] == ["srv__fine"]
    said = [str(w.message) for w in caught if issubclass(w.category, ToolUnavailableWarning)]
    assert len(said) == 2
    assert "tool 'srv__xlam'" in said[0] and "'query' at the schema's root" in said[0]
    assert "tool 'srv__stray'" in said[1] and "'limit' at the schema's root" in said[1]
