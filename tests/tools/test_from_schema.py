"""Tools from a JSON Schema: `Tool.from_schema`, `Tool.from_openai`, `ToolSet.from_openai`, and
`@tool(input_schema=...)` validate with exactly the schema they were given."""

from __future__ import annotations

import asyncio
import copy
import functools
from typing import Any

import pytest

from jianmu.errors import ToolDefinitionError, ToolInputError, ToolValidationError
from jianmu.tools import Tool, ToolSet, _arguments, tool

ORDER = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "description": "The order id, such as '#W0000000'."},
        "item_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                     "description": "Items."},
        "quantity": {"type": "integer", "minimum": 1, "description": "How many."},
        "address": {
            "type": "object",
            "properties": {"state": {"type": "string", "pattern": "^[A-Z]{2}$"},
                           "zip": {"type": "string"}},
            "required": ["state", "zip"],
            "additionalProperties": False,
        },
        "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"]},
    },
    "required": ["order_id", "item_ids"],
}
DEFINITION = {"type": "function", "function": {
    "name": "cancel_items", "description": "Cancel items of an order.", "parameters": ORDER,
}}


def cancel_items(**kwargs: Any) -> dict[str, Any]:
    return kwargs


async def cancel_items_async(order_id: str, item_ids: list[str], quantity: int = 1,
                             address: dict[str, str] | None = None,
                             reason: str | None = None) -> str:
    await asyncio.sleep(0)
    return f"{order_id}:{','.join(item_ids)}:{quantity}:{address}:{reason}"


@pytest.mark.anyio
async def test_the_function_gets_exactly_the_models_arguments() -> None:
    t = Tool.from_openai(DEFINITION, cancel_items)
    args = {"order_id": "#W1", "item_ids": ["1", "2"], "address": {"state": "NY", "zip": "10001"}}
    assert await t.execute(copy.deepcopy(args), injected={"ctx": object()}) == args
    assert await t.execute('{"order_id": "#W1", "item_ids": ["1"]}') == {
        "order_id": "#W1", "item_ids": ["1"]}


@pytest.mark.anyio
async def test_the_function_may_be_async_and_the_inner_dict_form_works() -> None:
    t = Tool.from_openai(DEFINITION["function"], cancel_items_async)
    assert t.name == "cancel_items" and t.get_description() == "Cancel items of an order."
    assert await t.execute({"order_id": "#W1", "item_ids": ["3"], "quantity": 2}) == (
        "#W1:3:2:None:None")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({"order_id": "#W1", "item_ids": []}, "$.item_ids"),
        ({"order_id": "#W1", "item_ids": [1]}, "$.item_ids[0]"),
        ({"order_id": "#W1", "item_ids": ["1"], "quantity": 0}, "$.quantity"),
        ({"order_id": "#W1", "item_ids": ["1"], "quantity": "2"}, "$.quantity"),
        ({"order_id": "#W1", "item_ids": ["1"], "address": {"state": "New York", "zip": "1"}},
         "$.address.state"),
        ({"order_id": "#W1", "item_ids": ["1"], "address": {"state": "NY"}}, "$.address"),
        ({"order_id": "#W1", "item_ids": ["1"], "address": {"state": "NY", "zip": "1", "x": 1}},
         "$.address"),
        ({"order_id": "#W1", "item_ids": ["1"], "reason": "bored"}, "$.reason"),
        ({"item_ids": ["1"]}, "order_id"),
        ({"order_id": 7, "item_ids": ["1"]}, "$.order_id"),
    ],
)
async def test_arguments_the_schema_refuses_are_refused_with_their_path(
    args: dict[str, Any], path: str
) -> None:
    called: list[Any] = []
    t = Tool.from_schema(lambda **kw: called.append(kw), name="cancel_items",
                         description="Cancel.", input_schema=ORDER)
    with pytest.raises(ToolInputError) as info:
        await t.execute(args)
    assert path in str(info.value)
    assert called == []
    result = await ToolSet([t]).execute("cancel_items", args)
    assert not result.ok and path in (result.error or "")


@pytest.mark.anyio
async def test_null_for_an_optional_field_that_may_not_be_null_is_not_given() -> None:
    """Strict mode's models send ``null`` for "not given": the field's default applies, at
    every level, only where the schema refused the ``null``; a required field or a nullable
    one keeps it, and a real type error is still refused with its path."""
    schema = {**ORDER, "properties": {
        **ORDER["properties"], "quantity": {"type": "integer", "default": None},
        "note": {"type": ["string", "null"]},
    }}
    t = Tool.from_schema(cancel_items, name="cancel_items", description="Cancel.",
                         input_schema=schema)
    given = {"order_id": "#W1", "item_ids": ["1"], "quantity": None, "reason": None,
             "address": {"state": "NY", "zip": "1"}, "note": None}
    assert await t.execute(given) == {"order_id": "#W1", "item_ids": ["1"],
                                      "address": {"state": "NY", "zip": "1"}, "note": None}
    typed = Tool.from_openai(DEFINITION, cancel_items_async)
    assert await typed.execute({"order_id": "#W1", "item_ids": ["1"], "quantity": None,
                                "address": None, "reason": None}) == "#W1:1:1:None:None"
    with pytest.raises(ToolInputError, match=r"\$\.order_id"):
        await t.execute({"order_id": None, "item_ids": ["1"]})
    with pytest.raises(ToolInputError, match=r"\$\.quantity"):
        await t.execute({"order_id": "#W1", "item_ids": ["1"], "quantity": "2", "reason": None})


@pytest.mark.anyio
async def test_a_nested_null_is_not_given_though_no_top_level_field_is_null() -> None:
    """Strict export makes a nested optional field required and nullable too, so a model
    sends ``{"address": {"state": "NY", "zip": null}}`` alone; that ``null`` counted as not
    given only when a top-level field was null as well."""
    schema = {"type": "object", "required": ["order_id"], "properties": {
        "order_id": {"type": "string"},
        "address": {"type": "object", "required": ["state"],
                    "properties": {"state": {"type": "string"}, "zip": {"type": "string"}}},
    }}
    t = Tool.from_schema(cancel_items, name="ship", description="Ship.", input_schema=schema)
    exported = t.to_openai(strict=True)["function"]["parameters"]["properties"]["address"]
    assert exported["required"] == ["state", "zip"]  # what a strict-mode model then sends:
    given = {"order_id": "#W1", "address": {"state": "NY", "zip": None}}
    assert await t.execute(given) == {"order_id": "#W1", "address": {"state": "NY"}}
    assert given["address"] == {"state": "NY", "zip": None}  # the model's call unchanged
    with pytest.raises(ToolInputError, match=r"\$\.address\.state"):  # required: kept, refused
        await t.execute({"order_id": "#W1", "address": {"state": None}})


@pytest.mark.anyio
async def test_an_argument_the_function_cannot_take_is_refused_clearly() -> None:
    t = Tool.from_openai(DEFINITION, cancel_items_async)
    with pytest.raises(ToolInputError, match="unknown argument 'color'"):
        await t.execute({"order_id": "#W1", "item_ids": ["1"], "color": "red"})
    loose = Tool.from_openai(DEFINITION, cancel_items)  # **kwargs: the schema allows extras
    assert await loose.execute({"order_id": "#W1", "item_ids": ["1"], "color": "red"}) == {
        "order_id": "#W1", "item_ids": ["1"], "color": "red"}


@pytest.mark.anyio
async def test_the_function_gets_a_copy_it_may_change() -> None:
    kept: list[Any] = []

    def mutate(order_id: str, item_ids: list[str], **rest: Any) -> str:
        item_ids.append("changed")
        kept.append(item_ids)
        return "ok"

    t = Tool.from_openai(DEFINITION, mutate)
    args = {"order_id": "#W1", "item_ids": ["1"]}
    await t.execute(args)
    assert args == {"order_id": "#W1", "item_ids": ["1"]}


def test_export_gives_back_the_same_parameters() -> None:
    t = Tool.from_openai(DEFINITION, cancel_items)
    assert t.to_openai() == DEFINITION
    assert t.to_anthropic()["input_schema"] == ORDER
    assert t.to_mcp()["inputSchema"] == ORDER
    assert ToolSet([t]).to_openai() == [DEFINITION]


def test_strict_export_says_when_the_schema_cannot_be_strict() -> None:
    free = {"type": "object", "properties": {"data": {"type": "object", "description": "Any"}}}
    t = Tool.from_schema(cancel_items, name="free", description="Free.", input_schema=free)
    with pytest.raises(ToolValidationError, match="strict") as info:
        t.to_openai(strict=True)
    assert "data" in str(info.value)
    ok = Tool.from_openai(DEFINITION, cancel_items).to_openai(strict=True)
    assert ok["function"]["strict"] is True
    assert ok["function"]["parameters"]["additionalProperties"] is False


def test_metadata_drives_the_guard_and_the_parallel_choice() -> None:
    default = Tool.from_openai(DEFINITION, cancel_items)
    assert (default.category, default.parallel_safe, default.idempotent, default.max_retries) == (
        "write", False, False, 0)
    assert default.permission == "auto"
    reader = Tool.from_openai(DEFINITION, cancel_items, read_only=True)
    assert (reader.category, reader.parallel_safe, reader.idempotent) == ("read", True, True)
    asks = Tool.from_openai(DEFINITION, cancel_items, confirm=True, timeout=5,
                            effects=["http"], idempotent=True)
    assert (asks.permission, asks.timeout_seconds, asks.effect_tags, asks.idempotent) == (
        "user_confirm", 5, ("http",), True)
    # README: idempotent lets a write be retried, still one at a time
    assert (asks.category, asks.parallel_safe, asks.max_retries) == ("write", False, 2)
    danger = Tool.from_openai(DEFINITION, cancel_items, category="dangerous", confirm=True)
    assert danger.category == "dangerous"
    with pytest.raises(ToolValidationError, match="dangerous"):
        Tool.from_openai(DEFINITION, cancel_items, category="dangerous")
    decorated = tool(read_only=False, confirm=True, timeout=3)(cancel_items_async)
    assert (decorated.category, decorated.permission, decorated.timeout_seconds) == (
        "write", "user_confirm", 3)


def test_bad_definitions_are_refused_clearly() -> None:
    with pytest.raises(ToolDefinitionError, match="not a valid JSON Schema"):
        Tool.from_schema(cancel_items, name="bad", description="Bad.",
                         input_schema={"type": "object", "properties": {"a": {"type": "nope"}}})
    with pytest.raises(ToolDefinitionError, match="'name'"):
        Tool.from_openai({"type": "function", "function": {"parameters": ORDER}}, cancel_items)

    def takes_less(order_id: str) -> str:
        return order_id

    with pytest.raises(ToolDefinitionError, match="'item_ids'"):
        Tool.from_openai(DEFINITION, takes_less)


def test_toolset_from_openai_matches_functions_by_name() -> None:
    other = {"type": "function", "function": {
        "name": "ping", "description": "Ping.", "parameters": {"type": "object", "properties": {}},
    }}

    def ping() -> str:
        return "pong"

    ts = ToolSet.from_openai([DEFINITION, other], {"cancel_items": cancel_items, "ping": ping})
    assert ts.names() == ["cancel_items", "ping"]
    assert ToolSet.from_openai([DEFINITION, other], [cancel_items, ping]).names() == ts.names()
    with pytest.raises(ToolDefinitionError, match="'ping'"):
        ToolSet.from_openai([DEFINITION, other], {"cancel_items": cancel_items})
    with pytest.raises(ToolDefinitionError, match="'extra'"):
        ToolSet.from_openai([other], {"ping": ping, "extra": cancel_items})
    meta = ToolSet.from_openai([DEFINITION, other], [cancel_items, ping],
                               metadata={"ping": {"read_only": True}})
    assert meta.is_parallel_safe(["ping"]) and not meta.is_parallel_safe(["cancel_items"])


def test_toolset_from_openai_names_a_listed_partial_by_the_function_it_calls() -> None:
    # AgentDojo's shape: each tool function takes its environment, bound by the caller
    ping = {"type": "function", "function": {
        "name": "ping", "description": "Ping.", "parameters": {"type": "object", "properties": {}},
    }}

    def pinged(env: dict[str, Any]) -> str:
        return env["reply"]

    bound = functools.partial(pinged, env={"reply": "pong", "secret": "s3cr3t-v4lue"})
    ping["function"]["name"] = "pinged"
    tools = ToolSet.from_openai([ping], [bound])
    assert asyncio.run(tools.execute("pinged", {})).output == "pong"
    with pytest.raises(ToolDefinitionError, match="'pinged' has no definition") as refused:
        ToolSet.from_openai([DEFINITION], [bound])
    assert "s3cr3t" not in str(refused.value)  # named, not shown with what it binds


@pytest.mark.anyio
async def test_tool_with_an_explicit_schema_honours_it() -> None:
    @tool(input_schema=ORDER)
    def anything(**kwargs: Any) -> dict[str, Any]:
        """Take the order."""
        return kwargs

    assert await anything.execute({"order_id": "#W1", "item_ids": ["1"], "state": "NY"}) == {
        "order_id": "#W1", "item_ids": ["1"], "state": "NY"}
    with pytest.raises(ToolInputError, match=r"\$\.item_ids"):
        await anything.execute({"order_id": "#W1", "item_ids": "1"})
    assert anything.parameters == ORDER


@pytest.mark.anyio
async def test_tools_built_again_from_one_schema_each_keep_exactly_theirs() -> None:
    # a schema is checked once per process (by its JSON text): each tool still validates by
    # the schema it was given, and changing one tool's schema after reaches no other tool
    first = Tool.from_openai(DEFINITION, cancel_items)
    second = Tool.from_openai(copy.deepcopy(DEFINITION), cancel_items)
    first.input_schema["properties"]["quantity"]["minimum"] = 5
    args = {"order_id": "#W1", "item_ids": ["1"], "quantity": 2}
    assert await second.execute(copy.deepcopy(args)) == args
    stricter = copy.deepcopy(ORDER)
    stricter["properties"]["quantity"]["minimum"] = 3
    third = Tool.from_schema(cancel_items, name="cancel_items", description="Cancel.",
                             input_schema=stricter)
    with pytest.raises(ToolInputError, match=r"\$\.quantity"):
        await third.execute(copy.deepcopy(args))
    assert await Tool.from_openai(DEFINITION, cancel_items).execute(copy.deepcopy(args)) == args


@pytest.mark.anyio
async def test_a_schema_given_again_is_recognised_exactly_and_copied_anew() -> None:
    # rebuilt tools (per request) give the same schema again: each still gets a copy of its
    # own, even of a part the schema shares, and only exactly the same data counts as the same
    # (1, 1.0 and True; a list and a tuple)
    shared = {"type": "integer", "minimum": 1}
    schema = {"type": "object", "properties": {"a": shared, "b": shared}}
    first = Tool.from_schema(cancel_items, name="first", description="d", input_schema=schema)
    second = Tool.from_schema(cancel_items, name="second", description="d", input_schema=schema)
    assert first.input_schema == second.input_schema == schema
    for tool_, other in ((first, second), (second, first)):
        before = other.input_schema["properties"]["a"]["minimum"]
        tool_.input_schema["properties"]["a"]["minimum"] += 10
        assert other.input_schema["properties"]["a"]["minimum"] == before
        assert tool_.input_schema["properties"]["b"]["minimum"] == 1  # its own part, unshared
    assert schema == {"type": "object", "properties": {"a": shared, "b": shared}}
    assert shared == {"type": "integer", "minimum": 1}
    again = Tool.from_schema(cancel_items, name="again", description="d", input_schema=schema)
    assert await again.execute({"a": 1, "b": 1}) == {"a": 1, "b": 1}

    def closed(extra: Any) -> dict[str, Any]:
        return {"type": "object", "properties": {"x": {"type": "string"}},
                "additionalProperties": extra}

    strict = Tool.from_schema(cancel_items, name="s", description="d", input_schema=closed(False))
    with pytest.raises(ToolInputError, match="y"):
        await strict.execute({"x": "1", "y": 2})
    for _ in range(2):  # 0 == False in Python, not in JSON Schema: never taken for False
        with pytest.raises(ToolDefinitionError, match="additionalProperties"):
            Tool.from_schema(cancel_items, name="zero", description="d", input_schema=closed(0))
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "d" * 99}
                                             for i in range(1000)}}
    for _ in range(2):  # past the size remembered by its bytes: the JSON path, the same tool
        made = Tool.from_schema(cancel_items, name="h", description="d", input_schema=huge)
        assert made.input_schema == huge and made.input_schema is not huge
    assert all(len(packed) <= _arguments._KNOWN_BYTES for packed in _arguments._KNOWN)
    listed = {"type": "object", "properties": {"x": {"enum": ["a", "b"]}}}
    tupled = {"type": "object", "properties": {"x": {"enum": ("a", "b")}}}
    for given in (listed, tupled, listed, tupled):
        made = Tool.from_schema(cancel_items, name="e", description="d", input_schema=given)
        assert made.input_schema == given and made.input_schema is not given
        assert type(made.input_schema["properties"]["x"]["enum"]) is type(
            copy.deepcopy(given)["properties"]["x"]["enum"])


def test_a_bad_schema_is_refused_every_time_under_each_tools_name() -> None:
    bad = {"type": "object", "properties": {"x": {"type": "strng"}}}
    for name in ("first", "second"):
        with pytest.raises(ToolDefinitionError, match=name):
            Tool.from_schema(cancel_items, name=name, description="d", input_schema=bad)


def test_accepted_names_of_plain_functions_are_what_their_signature_says() -> None:
    import functools
    import inspect

    from jianmu.tools._arguments import accepted_names

    def by_signature(fn: Any) -> frozenset[str] | None:
        params = inspect.signature(fn).parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return None
        return frozenset(p.name for p in params
                         if p.kind is not p.VAR_POSITIONAL and p.name != "self")

    def a(x: int, /, y: int, *rest: int, z: int, w: int = 1) -> None: ...
    def b(self: Any, x: int) -> None:
        local = x  # a local variable is no parameter
        del local
    def c(x: int, **more: Any) -> None: ...
    def d() -> None: ...

    @functools.wraps(a)
    def wrapped(*args: Any) -> None: ...

    for fn in (a, b, c, d, wrapped, lambda q, *s, r=1: None):
        assert accepted_names(fn) == by_signature(fn), fn


@pytest.mark.parametrize(("parameters", "arguments"), [
    ({}, {}),
    ({"properties": {"city": {"type": "string"}}, "required": ["city"]}, {"city": "Oslo"}),
    ({"type": ["object", "null"], "properties": {"city": {"type": "string"}}},
     {"city": "Oslo"}),
], ids=["empty", "no-type", "nullable-object"])
def test_a_functions_parameters_are_always_an_object(
    parameters: dict[str, Any], arguments: dict[str, Any],
) -> None:
    """A function's arguments are a JSON object, as OpenAI reads ``parameters``: ``{}`` is
    no arguments and a schema with properties but no type is an object, not one ``input``
    value the model could never guess."""
    made = Tool.from_openai({"name": "look", "parameters": parameters}, cancel_items)
    assert not made.wraps_input
    assert made.to_openai()["function"]["parameters"]["type"] == "object"
    assert "input" not in made.to_openai()["function"]["parameters"]["properties"]
    assert made.validate_args(arguments) == arguments
    assert asyncio.run(made.invoke(arguments)) == arguments  # the function gets them all


METRICS = {"type": "array", "items": {"type": "string"}, "enum": ["temperature", "humidity"]}
"""The allowed values of a list's items written on the list (BFCL live_simple_71-35-0 has one):
no array is one of them."""


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"metrics": METRICS}},
    {"type": "object", "properties": {"readings": {"type": "array", "items": {
        "type": "object", "properties": {"metrics": METRICS}}}}},
    {"type": "object", "properties": {"metrics": {"$ref": "#/$defs/m"}},
     "$defs": {"m": METRICS}},
    {"type": "object", "properties": {"metrics": {"anyOf": [METRICS, {"type": "null"}]}}},
], ids=["property", "nested", "ref", "anyOf"])
def test_an_enum_of_single_values_on_an_array_lists_the_allowed_items(
        schema: dict[str, Any]) -> None:
    made = [Tool.from_schema(lambda **kw: kw, name="read", description="Read.",
                             input_schema=copy.deepcopy(schema)),
            tool(name="read_too", input_schema=copy.deepcopy(schema))(lambda **kw: kw)]
    given = ({"metrics": ["humidity", "temperature"]} if "metrics" in schema["properties"]
             else {"readings": [{"metrics": ["humidity"]}]})
    wrong = ({"metrics": ["humidity", "co2"]} if "metrics" in schema["properties"]
             else {"readings": [{"metrics": ["co2"]}]})
    for t in made:
        assert t.validate_args(given) == given
        with pytest.raises(ToolInputError) as refused:
            t.validate_args(wrong)
        if "anyOf" not in str(schema):  # else jsonschema's "not valid under any" message
            assert "'co2' is not one of 'temperature', 'humidity'" in str(refused.value)
        assert t.parameters == schema  # exported as given
    assert made[0].validate_args({}) == {}


def test_an_array_enum_of_arrays_keeps_its_meaning() -> None:
    pairs = {"type": "array", "items": {"type": "string"}, "enum": [["a", "b"], ["c"]]}
    t = Tool.from_schema(lambda **kw: kw, name="pick", description="Pick.",
                         input_schema={"type": "object", "properties": {"p": pairs}})
    assert t.validate_args({"p": ["c"]}) == {"p": ["c"]}
    with pytest.raises(ToolInputError, match=r"\$\.p: \['a'\] is not one of"):
        t.validate_args({"p": ["a"]})


def test_a_refusal_names_only_the_real_problems_not_the_nulls_that_mean_not_given() -> None:
    """A strict-mode model must send every field, ``null`` for those it leaves out: when it
    also gets one wrong, the refusal names that one only (``null`` is fine where it is)."""
    schema = {"type": "object", "required": ["genre"], "properties": {
        "genre": {"type": "string", "enum": ["Pop", "Rock"]}, "garage": {"type": "boolean"},
        "rooms": {"type": "string", "enum": ["1", "2", "dontcare"]}}}
    t = Tool.from_schema(lambda **kw: kw, name="find", description="Find.", input_schema=schema)
    with pytest.raises(ToolInputError) as refused:
        t.validate_args({"genre": "Jazz", "garage": None, "rooms": None})
    assert str(refused.value).splitlines()[1:-1] == [
        "  - $.genre: 'Jazz' is not one of 'Pop', 'Rock'"]
    with pytest.raises(ToolInputError, match=r"\$\.genre: None is not of type 'string'"):
        t.validate_args({"genre": None, "garage": None})  # a required field's null is wrong


@pytest.mark.anyio
async def test_an_open_object_s_error_never_says_the_tool_takes_no_arguments() -> None:
    # a schema that names no property but takes any name (or names matching a pattern) said
    # "the tool takes no arguments" under a wrong value: a model would drop them all
    from jianmu.tools import ToolSet

    def open_fn(**arguments: Any) -> str:
        return "ok"

    def none_fn() -> str:
        return "ok"

    def definition(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "description": "d", "parameters": parameters}

    tools = ToolSet.from_openai([
        definition("counts", {"type": "object", "additionalProperties": {"type": "integer"}}),
        definition("tagged", {"type": "object", "additionalProperties": False,
                              "patternProperties": {"^x_": {"type": "integer"}}}),
        definition("nothing", {"type": "object", "properties": {}}),
    ], {"counts": open_fn, "tagged": open_fn, "nothing": none_fn})
    counts = await tools.execute("counts", {"a": "x"})
    assert (counts.error or "").endswith("allowed arguments: any name")
    tagged = await tools.execute("tagged", {"x_a": "s"})
    assert (tagged.error or "").endswith("allowed arguments: names matching '^x_'")
    nothing = await tools.execute("nothing", {"a": 1})  # the function bounds what is open
    assert (nothing.error or "").endswith("the tool takes no arguments")


@pytest.mark.anyio
async def test_an_error_names_the_arguments_a_root_ref_or_union_defines() -> None:
    # a root $ref (pydantic v1's schemas) or a union of forms named no argument at all: the
    # error said "the tool takes no arguments" of a tool that needs "a"
    from jianmu.tools import ToolSet

    def fn(**arguments: Any) -> str:
        return "ok"

    args = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    tools = ToolSet.from_openai([
        {"name": "by_ref", "description": "d",
         "parameters": {"$ref": "#/$defs/Args", "$defs": {"Args": args}}},
        {"name": "union", "description": "d", "parameters": {"anyOf": [
            args, {"type": "object", "properties": {"b": {"type": "integer"}}}]}},
    ], {"by_ref": fn, "union": fn})
    by_ref = await tools.execute("by_ref", {"a": 5})
    assert (by_ref.error or "").endswith("allowed arguments: a (required)")
    union = await tools.execute("union", {"a": 5, "b": "x"})
    assert (union.error or "").endswith("allowed arguments: a, b")


@pytest.mark.parametrize(("sub", "says"), [
    (True, "parameter 'a' is the schema true (any value)"),
    (False, "parameter 'a' is the schema false (no value)"),
    ({"anyOf": [True, {"type": "string"}]}, "parameter 'a' is the schema true"),
])
def test_strict_export_names_a_boolean_schema_it_cannot_express(sub: Any, says: str) -> None:
    # a boolean schema is valid JSON Schema: strict export failed with AttributeError
    made = Tool.from_schema(cancel_items, name="b", description="B.",
                            input_schema={"type": "object", "properties": {"a": sub}})
    assert made.to_openai()["function"]["parameters"]["properties"]["a"] == sub
    with pytest.raises(ToolValidationError, match=r"cannot express") as refused:
        made.to_openai(strict=True)
    assert refused.value.problems[0].startswith(says)
