"""Schemas from outside (issue 34, items 1-4): no fetch, no hang, no unbounded text.

A tool's JSON Schema may come from an OpenAI definition or an untrusted MCP server. A ``$ref``
to ``http://`` or ``file://`` is refused when the tool is made, naming it, and nothing is ever
fetched (a real local ``http.server`` counts its requests). A catastrophic ``pattern`` is
matched by RE2 in linear time, so the call fails at once with a bad-argument observation; a
pattern RE2 cannot take is refused by name. A schema that refers to itself without descending
into the value is refused. Every observation, errors included, is cut to
``max_result_length``, and an error lists a few allowed values with their count.

The MCP cases run a real server over stdio (tests/security/servers/schema_server.py) and the
calls go through `ToolExecutor` under a `ReactiveRunner`, as a model's actions would. The run
has its own timeout; the test's is that plus one second, so a hang fails the test.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.config import parse_config
from jianmu.errors import ToolDefinitionError, ToolInputError, ToolUnavailableWarning
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools import Tool
from jianmu.tools.registry import ToolSet
from tests.support.counting_server import counting_server

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).parent / "servers" / "schema_server.py"
RUN_TIMEOUT = 60.0
SECRET_TEXT = "TOP-SECRET-HOST-FILE-CONTENT"
HOSTILE_WORD = "a" * 40 + "!"  # ^(a+)+$ backtracks 2**40 times in Python's re


@pytest.fixture
def schema_url() -> Iterator[tuple[str, list[str]]]:
    """A real local HTTP server serving a schema (the test asserts nobody asked it): its URL
    and the requests it received."""
    body = json.dumps({"type": "string", "description": SECRET_TEXT}).encode()
    with counting_server(body, "application/schema+json") as (port, hits):
        yield f"http://127.0.0.1:{port}/item.schema.json", hits


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "host-secret.json"
    path.write_text(json.dumps({"type": "string", "description": SECRET_TEXT}), encoding="utf-8")
    return path


def _definition(name: str, properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": f"the {name} tool",
        "parameters": {"type": "object", "properties": properties, **extra},
    }}


def _noop(**kwargs: Any) -> str:
    return f"ran with {kwargs}"


async def _run_calls(tools: ToolSet, calls: list[dict[str, Any]], tmp_path: Path) -> StateManager:
    config = parse_config(f"execution:\n  workdir: {tmp_path / 'ws'}\n")
    state = StateManager(AgentState, {"actions": calls})
    runner = ReactiveRunner(ToolExecutor(tools=tools), state, config=config, interactive=False)
    result = await runner.run(timeout=RUN_TIMEOUT)
    assert result.status is RunStatus.SUCCESS, result.error
    return state


def _observation(state: StateManager, call_id: str) -> str:
    found = [m for m in state.get("messages") if m.tool_call_id == call_id]
    assert found, f"no observation for {call_id}"
    return found[-1].content or ""


# -- 1. $ref: nothing is fetched, ever -----------------------------------------------------


def test_an_http_ref_in_an_openai_definition_is_refused_and_never_fetched(
    schema_url: tuple[str, list[str]],
) -> None:
    url, hits = schema_url
    with pytest.raises(ToolDefinitionError) as refused:
        Tool.from_openai(_definition("lookup", {"item": {"$ref": url}}), _noop)
    assert url in str(refused.value)
    assert hits == []


def test_an_http_ref_in_an_input_schema_of_tool_is_refused(
    schema_url: tuple[str, list[str]],
) -> None:
    from jianmu import tool

    url, hits = schema_url
    schema = {"type": "object", "properties": {"item": {"$ref": url}}}
    with pytest.raises(ToolDefinitionError, match="does not point inside the schema"):
        tool(input_schema=schema)(_noop)
    assert hits == []


def test_a_file_ref_is_refused_and_the_file_never_read(secret_file: Path) -> None:
    with pytest.raises(ToolDefinitionError) as refused:
        Tool.from_openai(
            _definition("lookup", {"item": {"$ref": secret_file.as_uri()}}, required=["item"]),
            _noop,
        )
    assert secret_file.as_uri() in str(refused.value)
    assert SECRET_TEXT not in str(refused.value)


def test_references_inside_the_schema_still_resolve() -> None:
    made = Tool.from_openai(_definition(
        "order",
        {"item": {"$ref": "#/$defs/item"}, "size": {"$ref": "#size"},
         "by_id": {"$ref": "https://example.test/sizes"}},
        **{"$defs": {
            "item": {"type": "string", "minLength": 2},
            "size": {"$anchor": "size", "enum": ["s", "m", "l"]},
            "sizes": {"$id": "https://example.test/sizes", "type": "integer"},
        }},
    ), _noop)
    assert made.validate_args({"item": "tea", "size": "m", "by_id": 3}) == {
        "item": "tea", "size": "m", "by_id": 3,
    }
    with pytest.raises(Exception, match=r"\$\.item"):
        made.validate_args({"item": "t"})


# -- 2. patterns: RE2, linear time -------------------------------------------------------------


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_a_catastrophic_pattern_in_an_openai_definition_fails_at_once(
    tmp_path: Path,
) -> None:
    made = Tool.from_openai(
        _definition("greet", {"word": {"type": "string", "pattern": "^(a+)+$"}},
                    required=["word"]),
        _noop, read_only=True,
    )
    calls = [{"id": "c1", "name": "greet", "arguments": {"word": HOSTILE_WORD}},
             {"id": "c2", "name": "greet", "arguments": {"word": "aaaa"}}]
    state = await _run_calls(ToolSet.from_tools([made]), calls, tmp_path)
    bad = _observation(state, "c1")
    assert "invalid arguments" in bad and "does not match" in bad
    assert "ran with" in _observation(state, "c2")


@pytest.mark.parametrize("pattern", [r"^(a)\1$", r"^(?=a)a+$", r"^(?<!b)a$"])
def test_a_pattern_re2_cannot_match_in_linear_time_is_refused_by_name(pattern: str) -> None:
    with pytest.raises(ToolDefinitionError) as refused:
        Tool.from_openai(_definition("greet", {"word": {"type": "string", "pattern": pattern}}),
                         _noop)
    assert repr(pattern) in str(refused.value) and "RE2" in str(refused.value)


@pytest.mark.timeout(RUN_TIMEOUT + 1)
def test_a_catastrophic_pattern_property_fails_at_once() -> None:
    made = Tool.from_openai(_definition(
        "tags", {"tags": {"type": "object", "patternProperties": {"^(a+)+$": {"type": "string"}},
                          "additionalProperties": False}},
    ), _noop)
    with pytest.raises(Exception, match="not allowed"):
        made.validate_args({"tags": {HOSTILE_WORD: "x"}})
    assert made.validate_args({"tags": {"aaa": "x"}}) == {"tags": {"aaa": "x"}}


# -- 3. a schema that refers to itself ---------------------------------------------------------


@pytest.mark.timeout(RUN_TIMEOUT + 1)
def test_a_self_referencing_schema_is_refused_not_followed() -> None:
    loop = {"anyOf": [{"$ref": "#/$defs/loop"}] * 4}
    with pytest.raises(ToolDefinitionError, match="refers to itself"):
        Tool.from_openai(_definition(
            "loop", {"name": {"type": "string"}, "extra": {"$ref": "#/$defs/loop"}},
            **{"$defs": {"loop": loop}},
        ), _noop)


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"inner": schema}}
    return schema


@pytest.mark.timeout(RUN_TIMEOUT + 1)
@pytest.mark.parametrize("levels", [70, 400, 5_000])
def test_a_schema_nested_past_the_limit_is_refused_with_a_reason(levels: int) -> None:
    # every walk of a schema recurses (the JSON text, the copy, jsonschema): a RecursionError
    # came out of the tool's making (150 levels and more), or out of a call's validation
    # deep in a run's stack (from about 90)
    with pytest.raises(ToolDefinitionError, match="nests deeper than 128 levels"):
        Tool.from_openai(_definition("deep", {"value": _nested(levels)}), _noop)


@pytest.mark.timeout(RUN_TIMEOUT + 1)
def test_a_schema_that_contains_itself_as_an_object_is_refused() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    schema["properties"]["again"] = schema  # not JSON: a Python dict inside itself
    from jianmu import tool

    with pytest.raises(ToolDefinitionError, match="refers to itself as a Python object"):
        tool(input_schema=schema)(_noop)


@pytest.mark.timeout(RUN_TIMEOUT + 1)
def test_a_schema_nested_as_deep_as_real_tools_go_still_works() -> None:
    made = Tool.from_openai(_definition("deep", {"value": _nested(60)}), _noop)
    value: Any = "x"
    for _ in range(60):
        value = {"inner": value}
    assert made.validate_args({"value": value}) == {"value": value}
    bad: Any = 1
    for _ in range(60):
        bad = {"inner": bad}  # the innermost value an integer, not a string
    refused = r"invalid arguments for tool 'deep':\n  - \$\.value\.inner"
    with pytest.raises(ToolInputError, match=refused):
        made.validate_args({"value": bad})


@pytest.mark.timeout(RUN_TIMEOUT + 1)
def test_the_lax_checker_answers_promptly_for_a_self_referencing_schema() -> None:
    from jianmu.tools._arguments import schema_types, validate_with_schema

    schema = {
        "type": "object",
        "$defs": {"loop": {"anyOf": [{"$ref": "#/$defs/loop"}] * 4}},
        "properties": {"name": {"type": "string"}, "extra": {"$ref": "#/$defs/loop"}},
    }
    assert schema_types(schema["properties"]["extra"], schema) == {"any"}
    # null for an optional argument means "not given", as for any non-nullable one
    assert validate_with_schema("loop", schema, {"name": "x", "extra": None}) == {"name": "x"}


@pytest.mark.timeout(RUN_TIMEOUT + 1)
def test_the_lax_checker_bounds_its_work_on_a_schema_that_multiplies() -> None:
    from jianmu.tools._arguments import validate_with_schema

    # 20 levels of anyOf, four refs each, to a leaf that refuses null: 4**20 checks unbounded
    defs: dict[str, Any] = {"d20": {"type": "string"}}
    for level in range(20):
        defs[f"d{level}"] = {"anyOf": [{"$ref": f"#/$defs/d{level + 1}"}] * 4}
    schema = {"type": "object", "$defs": defs, "required": ["x"],
              "properties": {"x": {"$ref": "#/$defs/d0"}}}
    with pytest.raises(ToolInputError, match="too complex"):
        validate_with_schema("deep", schema, {"x": None})
    assert validate_with_schema("deep", schema, {"x": "ok"}) == {"x": "ok"}
    with pytest.raises(ToolDefinitionError, match="more than 10,000 schemas"):
        Tool.from_openai({"name": "deep", "parameters": schema}, _noop)


# -- 4. bounded observations -------------------------------------------------------------------


def test_a_huge_enum_error_names_a_few_values_and_the_count() -> None:
    made = Tool.from_openai(
        _definition("pick", {"choice": {"enum": [f"value-{i}" for i in range(200_000)]}}),
        _noop,
    )
    with pytest.raises(Exception) as refused:
        made.validate_args({"choice": "nope"})
    text = str(refused.value)
    assert len(text) < 2_000
    assert "'value-0', 'value-1'" in text and "(200,000 values)" in text


@pytest.mark.parametrize("prop", [
    {"const": float("nan")}, {"type": "number", "maximum": float("inf")},
    {"enum": [1, float("-inf")]}, {"type": "number", "default": float("nan")},
])
def test_nan_or_infinity_in_a_definition_is_refused(prop: dict[str, Any]) -> None:
    """JSON has no NaN or Infinity: a model API refuses every request offering such a tool."""
    with pytest.raises(ToolDefinitionError, match="NaN or Infinity"):
        Tool.from_openai(_definition("odd", {"x": prop}), _noop)


@pytest.mark.parametrize("dialect", [5, [], {"a": 1}, None])
def test_a_dialect_that_is_no_uri_is_refused_by_name(dialect: Any) -> None:
    definition = _definition("odd", {"x": {"type": "string"}})
    definition["function"]["parameters"]["$schema"] = dialect
    with pytest.raises(ToolDefinitionError, match=r"\$schema"):
        Tool.from_openai(definition, _noop)


# -- the same through a real MCP server over stdio ---------------------------------------------


@dataclass
class Hostile:
    """The hostile server's tools as a ToolSet, the warnings its refused tools raised, the
    URL its remote ``$ref`` names (and the requests that URL received) and its host file."""

    tools: ToolSet
    skipped: list[str]
    url: str
    hits: list[str]
    secret: Path


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-scoped, so that one server serves every test of the module (see `hostile`)."""
    return "asyncio"


@pytest.fixture(scope="module")
async def hostile(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Hostile]:
    """One server for the module: its tools are read-only and no test changes the ToolSet
    (listing its megabytes of schemas took seconds per test)."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import providers_from_config

    secret = tmp_path_factory.mktemp("secret") / "host-secret.json"
    secret.write_text(json.dumps({"type": "string", "description": SECRET_TEXT}),
                      encoding="utf-8")
    body = json.dumps({"type": "string", "description": SECRET_TEXT}).encode()
    with counting_server(body, "application/schema+json") as (port, hits):
        url = f"http://127.0.0.1:{port}/item.schema.json"
        config = parse_config(
            f"mcp:\n  servers:\n    schemas:\n      command: {sys.executable}\n"
            f"      args: [{SERVER}, '{url}', '{secret}']\n      trust: read_only\n"
        )
        providers = providers_from_config(config)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ToolUnavailableWarning)
                tools = await ToolSet.from_providers(providers)
            skipped = [str(w.message) for w in caught if w.category is ToolUnavailableWarning]
            yield Hostile(tools, skipped, url, hits, secret)
        finally:
            for provider in providers:
                await provider.close()
        assert hits == [], hits  # nothing fetched, by any test nor by the close


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_an_mcp_server_s_remote_refs_and_loops_are_refused_and_nothing_is_fetched(
    tmp_path: Path, hostile: Hostile,
) -> None:
    tools, skipped, url, secret_file = hostile.tools, hostile.skipped, hostile.url, hostile.secret
    # refused when listed, each by name: the remote ref, the host file, the loop
    assert any("schemas__fetch_ref" in w and url in w for w in skipped), skipped
    assert any("schemas__file_ref" in w and secret_file.as_uri() in w for w in skipped)
    assert any("schemas__self_loop" in w and "refers to itself" in w for w in skipped)
    assert any("schemas__deep" in w and "nests deeper than" in w for w in skipped), skipped
    assert all(SECRET_TEXT not in w for w in skipped)
    names = set(tools.names())
    assert {"schemas__fetch_ref", "schemas__file_ref", "schemas__self_loop",
            "schemas__deep"}.isdisjoint(names)
    assert {"schemas__backtrack", "schemas__big_enum", "schemas__echo"} <= names
    calls = [
        {"id": "c1", "name": "schemas__fetch_ref", "arguments": {"item": 1}},
        {"id": "c2", "name": "schemas__file_ref", "arguments": {"item": 1}},
        {"id": "c3", "name": "schemas__self_loop", "arguments": {"name": "x", "extra": None}},
        {"id": "c4", "name": "schemas__echo", "arguments": {"text": "hi"}},
    ]
    state = await _run_calls(tools, calls, tmp_path)
    for call_id in ("c1", "c2", "c3"):
        assert "unknown tool" in _observation(state, call_id)
        assert SECRET_TEXT not in _observation(state, call_id)
    assert "echo ran" in _observation(state, "c4")
    assert hostile.hits == []


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_an_mcp_server_s_catastrophic_pattern_fails_at_once(
    tmp_path: Path, hostile: Hostile,
) -> None:
    calls = [
        {"id": "c1", "name": "schemas__backtrack", "arguments": {"word": HOSTILE_WORD}},
        {"id": "c2", "name": "schemas__backtrack", "arguments": {"word": "aaa"}},
    ]
    state = await _run_calls(hostile.tools, calls, tmp_path)
    assert "does not match pattern" in _observation(state, "c1")
    assert "backtrack ran" in _observation(state, "c2")


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_an_mcp_server_s_huge_enum_and_huge_failure_reach_the_model_bounded(
    tmp_path: Path, hostile: Hostile,
) -> None:
    tools = hostile.tools
    calls = [
        {"id": "c1", "name": "schemas__big_enum", "arguments": {"choice": "nope"}},
        {"id": "c2", "name": "schemas__huge_error", "arguments": {}},
        {"id": "c3", "name": "schemas__huge_ok", "arguments": {}},
        {"id": "c4", "name": "schemas__big_enum", "arguments": {"choice": "value-199999"}},
    ]
    state = await _run_calls(tools, calls, tmp_path)
    enum_error = _observation(state, "c1")
    assert "(200,000 values)" in enum_error and "'value-0', 'value-1'" in enum_error
    assert len(enum_error) < 2_000
    limit = tools.get("schemas__huge_error").max_result_length
    for call_id in ("c2", "c3"):  # a failure is cut like a success
        seen = _observation(state, call_id)
        assert len(seen) <= limit + 100 and "truncated" in seen
    assert "big_enum ran" in _observation(state, "c4")


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_an_mcp_server_s_megabytes_of_schema_are_not_offered_with_every_request(
    hostile: Hostile,
) -> None:
    """A tool's schema goes with every model request: a server's 200,000-value enum or
    megabyte description would be sent (and paid for) at each turn. What is offered is
    bounded; calls are still checked against the whole schema."""
    tools = hostile.tools
    offered = {d["function"]["name"]: d for d in tools.to_openai()}
    for name in ("schemas__big_enum", "schemas__huge_words"):
        assert len(json.dumps(offered[name])) < 10_000, name
    choice = offered["schemas__big_enum"]["function"]["parameters"]["properties"]["choice"]
    assert "enum" not in choice and choice["type"] == "string"
    assert "One of 200,000 values" in choice["description"] and '"value-0"' in (
        choice["description"])
    anthropic = tools.get("schemas__huge_words").to_anthropic()
    assert len(json.dumps(anthropic)) < 10_000
    note = anthropic["input_schema"]["properties"]["note"]
    assert "default" not in note and "examples" not in note
    assert note["description"].endswith("[cut: 1,000,000 characters]")
    mode = anthropic["input_schema"]["properties"]["mode"]
    assert mode["anyOf"][0] == {"description": "A fixed value, too long to show."}
    # the whole schema still holds the calls
    big_enum = tools.get("schemas__big_enum")
    assert big_enum.validate_args({"choice": "value-199999"}) == {"choice": "value-199999"}
    with pytest.raises(ToolInputError, match="200,000 values"):
        big_enum.validate_args({"choice": "nope"})


# -- a schema given again is recognised exactly (tools rebuilt per request) ------------------
@pytest.mark.parametrize(("first", "second"), [(True, 1), (1, True), (False, 0), (1, 1.5)])
def test_a_schema_equal_in_python_but_not_in_json_never_borrows_anothers_checks(
    first: Any, second: Any,
) -> None:
    """``True == 1`` and ``False == 0`` in Python, not in JSON Schema: an untrusted definition
    built after a trusted one that Python finds equal keeps its own checks, however often
    either is built again."""
    for _ in range(2):  # the second round is served by the recognition of each
        a = Tool.from_openai(_definition("a", {"x": {"const": first}}), _noop)
        b = Tool.from_openai(_definition("b", {"x": {"const": second}}), _noop)
        assert a.validate_args({"x": first}) == {"x": first}
        assert b.validate_args({"x": second}) == {"x": second}
        if type(first) is not type(second):  # JSON Schema tells 1 from true
            with pytest.raises(ToolInputError):
                a.validate_args({"x": second})
            with pytest.raises(ToolInputError):
                b.validate_args({"x": first})
    for _ in range(2):  # 0 where a boolean belongs stays refused, after False was taken
        Tool.from_openai(_definition("c", {"x": {"type": "string"}},
                                     additionalProperties=False), _noop)
        with pytest.raises(ToolDefinitionError, match="additionalProperties"):
            Tool.from_openai(_definition("d", {"x": {"type": "string"}},
                                         additionalProperties=0), _noop)


def test_a_flood_of_large_schemas_is_not_remembered() -> None:
    from jianmu.tools import _arguments

    for i in range(20):  # each ~100 KiB, each new: past the size remembered by its bytes
        props = {f"p{j}": {"type": "string", "description": f"{i}" * 100} for j in range(1000)}
        Tool.from_openai(_definition(f"big{i}", props), _noop)
    assert all(len(packed) <= _arguments._KNOWN_BYTES for packed in _arguments._KNOWN)


# -- the lax checker (MCP tools) on hostile values ------------------------------------------


_LAX = {"type": "object", "properties": {
    "n": {"type": "integer"}, "f": {"type": "number"},
    "items": {"type": "array", "items": {"type": "integer"}},
}}


@pytest.mark.parametrize("args", [
    {"n": "9" * 5000},  # past Python's digits limit: int() raised ValueError
    {"items": "[" * 100_000 + "]" * 100_000},  # json.loads ran out of stack
    {"n": "١٢٣"}, {"f": "١٢٣"},  # Arabic-Indic digits: int() and float() read them as 123
    {"f": "1_000"}, {"f": "infinity"}, {"f": " nan "},  # float() reads these too
])
def test_the_lax_checker_refuses_text_that_is_no_json_number_with_a_clear_error(
    args: dict[str, Any],
) -> None:
    from jianmu.tools import _arguments

    with pytest.raises(ToolInputError) as refused:
        _arguments.validate_with_schema("odd", _LAX, args)
    assert "expected" in str(refused.value)


@pytest.mark.parametrize("args", ["[" * 100_000, '{"n": ' + "[" * 100_000])
def test_arguments_given_as_text_nested_past_the_stack_are_refused_cleanly(args: str) -> None:
    from jianmu.tools import _arguments

    with pytest.raises(ToolInputError, match="must be a JSON object"):
        _arguments.validate_with_schema("odd", _LAX, args)


def test_the_lax_checker_still_reads_plain_numbers_in_text() -> None:
    from jianmu.tools import _arguments

    out = _arguments.validate_with_schema(
        "odd", _LAX, {"n": " -12 ", "f": "2.5e3", "items": "[1, 2]"}
    )
    assert out == {"n": -12, "f": 2500.0, "items": [1, 2]}


# -- uniqueItems: in linear time ---------------------------------------------------------------


def _unique_tool() -> Tool:
    return Tool.from_openai(
        _definition("tags", {"xs": {"type": "array", "uniqueItems": True}}), _noop
    )


@pytest.mark.timeout(30)
def test_unique_items_of_a_huge_array_are_checked_at_once() -> None:
    """jsonschema compares every pair of unhashable items: 50,000 objects from a model took
    over an hour on the event loop (6,000 took 30 s); they are hashed by their JSON value."""
    tool = _unique_tool()
    # 20,000: compared pairwise that is 11 times the 30 s the 6,000 took, far past the
    # timeout, while each checked once costs 2.5 times less than 50,000
    many = [{"a": i, "b": [i, str(i)]} for i in range(20_000)]
    assert len(tool.validate_args({"xs": many})["xs"]) == 20_000
    with pytest.raises(ToolInputError, match="non-unique"):
        tool.validate_args({"xs": [*many, {"b": [7, "7"], "a": 7}]})


@pytest.mark.parametrize(("items", "unique"), [
    ([1, 1.0], False), ([1, True], True), ([0, False], True), ([{"a": 1}, {"a": 1.0}], False),
    ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], False), ([[1, 2], [2, 1]], True),
    (["1", 1], True), ([None, None], False), ([[], {}], True), ([[True], [1]], True),
])
def test_unique_items_follows_json_schema_equality(items: list[Any], unique: bool) -> None:
    tool = _unique_tool()
    if unique:
        assert tool.validate_args({"xs": items}) == {"xs": items}
    else:
        with pytest.raises(ToolInputError, match="non-unique"):
            tool.validate_args({"xs": items})


@pytest.mark.timeout(30)
def test_a_huge_enum_checks_a_long_array_at_once() -> None:
    """Each item was compared with each allowed value in turn: 200,000 values by a model's
    1,000 items held the event loop 16 s (exact) and 31 s (lax, MCP); both hash them once."""
    from jianmu.tools import _arguments

    values = [f"value-{i}" for i in range(200_000)]
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"enum": values}}}}
    tool = Tool.from_openai({"name": "pick", "description": "d", "parameters": schema}, _noop)
    # 5,000 items: five times the 1,000 that held the loop 16 s and 31 s, far past the timeout
    many = [f"value-{i}" for i in range(0, 200_000, 40)]
    for check in (tool.validate_args,
                  lambda args: _arguments.validate_with_schema("pick", schema, args)):
        assert check({"xs": many}) == {"xs": many}
        with pytest.raises(ToolInputError, match="'value-0', 'value-1'"):
            check({"xs": [*many, "nope"]})


@pytest.mark.parametrize(("value", "allowed"), [
    (1, [1.0]), (True, [1]), ({"a": [1]}, [{"a": [1.0]}]),
])
def test_enum_follows_json_schema_equality(value: Any, allowed: list[Any]) -> None:
    from jianmu.tools import _arguments

    schema = {"type": "object", "properties": {"x": {"enum": allowed}}}
    tool = Tool.from_openai({"name": "pick", "description": "d", "parameters": schema}, _noop)
    same = type(value) is not bool
    for check in (tool.validate_args,
                  lambda args: _arguments.validate_with_schema("pick", schema, args)):
        if same:
            assert check({"x": value}) == {"x": value}
        else:
            with pytest.raises(ToolInputError):
                check({"x": value})


@pytest.mark.parametrize(("value", "const", "same"), [
    (True, 1, False), (0, False, False), (1, 1.0, True), ({"a": [1]}, {"a": [1.0]}, True),
])
def test_the_lax_checker_s_const_follows_json_schema_equality(
    value: Any, const: Any, same: bool,
) -> None:
    """Python says ``True == 1``; JSON Schema does not (the exact checker never did)."""
    from jianmu.tools import _arguments

    schema = {"type": "object", "properties": {"x": {"const": const}}}
    if same:
        assert _arguments.validate_with_schema("c", schema, {"x": value}) == {"x": value}
    else:
        with pytest.raises(ToolInputError):
            _arguments.validate_with_schema("c", schema, {"x": value})


# -- multipleOf: JSON's decimal numbers, exactly -----------------------------------------------


@pytest.mark.parametrize(("divisor", "value", "multiple"), [
    (0.1, 0.3, True), (0.01, 19.99, True), (0.1, 0.35, False), (2, 10**400, True),
    (3, 10**400, False), (1e-320, 1e308, True), (10**400, 1e308, False), (0.5, 7.25, False),
    (0.5, 7.5, True),
])
def test_multiple_of_is_decided_exactly_and_never_overflows(
    divisor: Any, value: Any, multiple: bool,
) -> None:
    """jsonschema divided floats: a model's 10**400 raised OverflowError out of the check (not
    a bad-argument error), and 0.3 was no multiple of 0.1; JSON's numbers are decimal."""
    tool = Tool.from_openai(
        _definition("step", {"x": {"type": "number", "multipleOf": divisor}}), _noop
    )
    if multiple:
        assert tool.validate_args({"x": value}) == {"x": value}
    else:
        with pytest.raises(ToolInputError, match="multiple"):
            tool.validate_args({"x": value})


# -- unevaluatedProperties / unevaluatedItems with branches: exponential -----------------------


_BRANCHY = {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}},
            "anyOf": [{"properties": {"c": {"$ref": "#/$defs/n"}}}, {"properties": {"d": {}}}],
            "unevaluatedProperties": False}


@pytest.mark.parametrize("schema", [
    {"type": "object", "$defs": {"n": _BRANCHY}, "properties": {"t": {"$ref": "#/$defs/n"}}},
    {"type": "object", "properties": {"t": {"anyOf": [{"type": "array"}],
                                            "unevaluatedItems": False}}},
    {"type": "object", "allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False},
])
def test_unevaluated_keywords_with_branches_or_refs_are_refused(schema: dict[str, Any]) -> None:
    """jsonschema finds what was evaluated by validating every branch again at every level:
    arguments nested 12 deep took 26 s on the event loop, 16 deep hours."""
    with pytest.raises(ToolDefinitionError, match="unevaluated"):
        Tool.from_openai({"name": "deep", "description": "d", "parameters": schema}, _noop)


def test_unevaluated_properties_alone_still_works() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}},
              "unevaluatedProperties": False}
    tool = Tool.from_openai({"name": "flat", "description": "d", "parameters": schema}, _noop)
    assert tool.validate_args({"a": "x"}) == {"a": "x"}
    with pytest.raises(ToolInputError):
        tool.validate_args({"a": "x", "b": 1})


# -- branches that descend: the exact checker's work is bounded --------------------------------


_FORK = {"anyOf": [
    {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}, "required": ["c"]},
    {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}, "e": {}}, "required": ["c"]},
    {"type": "string"},
]}


@pytest.mark.timeout(30)
def test_branches_that_each_descend_stop_at_a_bound() -> None:
    """Each anyOf branch descends into the same child, so a bad leaf 40 levels down is
    checked 2**40 times (16 levels took 23 s on the event loop); the checker's steps are
    bounded by the size of the arguments, as the lax checker's are, and the call is refused."""
    schema = {"type": "object", "$defs": {"n": _FORK}, "properties": {"t": {"$ref": "#/$defs/n"}}}
    tool = Tool.from_openai({"name": "fork", "description": "d", "parameters": schema}, _noop)
    deep: Any = 5
    for _ in range(40):
        deep = {"c": deep}
    with pytest.raises(ToolInputError, match="too complex"):
        tool.validate_args({"t": deep})
    fine: Any = "leaf"
    for _ in range(40):
        fine = {"c": fine}
    assert tool.validate_args({"t": fine}) == {"t": fine}
