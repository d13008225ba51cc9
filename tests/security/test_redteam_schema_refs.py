"""Schemas from outside, round 2: the lax checker (an MCP tool's, a skill's inputs and
outputs) reads every reference and branch its schema holds, or refuses the call.

Broken before: a reference the check at the tool's making accepted, but the lax checker
could not follow (``$ref: "#"``, the commonest recursive schema; an ``$anchor``; a ``$ref`` to
an ``$id`` the schema declares; an escaped pointer; a ``$dynamicRef``), a ``$ref``,
``allOf`` or ``anyOf`` at the root, a schema's keywords beside an ``anyOf`` that a form
fitted, a ``false`` schema, and anything past 32 levels deep were each read as "anything
goes": a call with ``n: 999`` where the schema says ``maximum: 5`` reached the server. Now
each holds; what cannot be followed refuses the call with a reason. And what the lax checker
does not read itself (``not``, ``multipleOf``, ``if``/``then``, draft 4's boolean
``exclusiveMaximum``, which it read as the number 1 and so refused every call) is checked by
the schema's own validator on the coerced arguments: ``not: {enum: [rm]}`` let ``rm`` through.

The calls run through `ToolExecutor` under a `ReactiveRunner` against a real MCP server over
stdio (tests/security/servers/ref_forms_server.py).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.config import parse_config
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools import _arguments
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).parent / "servers" / "ref_forms_server.py"
RUN_TIMEOUT = 60.0


def _deep(levels: int, leaf: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"n": leaf}
    for _ in range(levels):
        value = {"x": value}
    return value


# each tool's arguments that break its schema (n past 5), and ones that fit
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "root_ref": ({"n": 1, "child": {"n": 999}}, {"n": 1, "child": {"n": 2}}),
    "anchor": ({"n": 999}, {"n": 3}),
    "id_ref": ({"n": 999}, {"n": 3}),
    "escaped": ({"n": 999}, {"n": 3}),
    "dynamic": ({"n": 1, "c": {"n": 999}}, {"n": 1, "c": {"n": 2}}),
    "at_root": ({"n": 999}, {"n": 3}),
    "root_all_of": ({"n": 999}, {"n": 3}),
    "beside_any_of": ({"n": 999}, {"n": 3}),
    "deep": (_deep(40, 999), _deep(40, 3)),
    "forbidden": ({"n": 1}, {}),
    "negated": ({"command": "rm"}, {"command": "ls"}),
    "draft4_bounds": ({"n": 5}, {"n": 4}),  # was: every call refused, "must be < True"
    "multiple": ({"n": 4}, {"n": "9"}),  # coerced by the lax pass, then checked
    "conditional": ({"mode": "small", "n": 999}, {"mode": "large", "n": 999}),
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-scoped, so that one server serves every test of the module."""
    return "asyncio"


@pytest.fixture(scope="module")
async def tools() -> AsyncIterator[ToolSet]:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import providers_from_config

    config = parse_config(
        f"mcp:\n  servers:\n    refs:\n      command: {sys.executable}\n"
        f"      args: [{SERVER}]\n      trust: read_only\n"
    )
    providers = providers_from_config(config)
    try:
        yield await ToolSet.from_providers(providers)
    finally:
        for provider in providers:
            await provider.close()


async def _observations(tools: ToolSet, calls: list[dict[str, Any]], tmp_path: Path,
                        ) -> dict[str, str]:
    config = parse_config(f"execution:\n  workdir: {tmp_path / 'ws'}\n")
    state = StateManager(AgentState, {"actions": calls})
    runner = ReactiveRunner(ToolExecutor(tools=tools), state, config=config, interactive=False)
    result = await runner.run(timeout=RUN_TIMEOUT)
    assert result.status is RunStatus.SUCCESS, result.error
    return {m.tool_call_id: m.content or "" for m in state.get("messages") if m.tool_call_id}


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_every_reference_and_branch_of_a_server_s_schema_holds(
    tools: ToolSet, tmp_path: Path,
) -> None:
    assert {f"refs__{name}" for name in CASES} <= set(tools.names())
    calls = []
    for name, (bad, good) in CASES.items():
        calls.append({"id": f"{name}-bad", "name": f"refs__{name}", "arguments": bad})
        calls.append({"id": f"{name}-good", "name": f"refs__{name}", "arguments": good})
    seen = await _observations(tools, calls, tmp_path)
    for name in CASES:
        refused, ran = seen[f"{name}-bad"], seen[f"{name}-good"]
        assert "ran with" not in refused, (name, refused)
        assert "invalid arguments" in refused, (name, refused)
        assert f"{name} ran with" in ran, (name, ran)


def test_a_reference_the_checker_cannot_follow_refuses_the_call() -> None:
    """A hand-written tool's schema is not checked when the tool is made: a reference that
    names nothing in it (or a chain longer than 32) refuses the call with a reason."""
    schemas = [
        {"type": "object", "properties": {"n": {"$ref": "#/$defs/missing"}}},
        {"type": "object", "properties": {"n": {"$ref": "https://example.com/x.json"}}},
        {"type": "object", "properties": {"n": {"$ref": "#/$defs/d0"}}, "$defs": {
            **{f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(40)},
            "d40": {"type": "integer", "maximum": 5}}},
    ]
    for schema in schemas:
        with pytest.raises(_arguments.ToolInputError, match="cannot be checked"):
            _arguments.validate_with_schema("t", schema, {"n": 999})


@pytest.mark.parametrize("where", [
    {"maximum": 10**5000}, {"minLength": 10**5000}, {"const": -(10**5000)},
    {"enum": [1, 10**5000]}, {"multipleOf": 10**5000},
])
def test_an_integer_past_python_s_digits_limit_is_refused_when_the_tool_is_made(
    where: dict[str, Any],
) -> None:
    """Python writes no int past 4,300 digits as text: such a tool was made, then every request
    offering it failed (json.dumps), and a call's check raised ValueError, not an argument
    error. Refused when made, plain schema or not."""
    from jianmu.errors import ToolDefinitionError

    definition = {"type": "function", "function": {
        "name": "t", "description": "d",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer", **where}}},
    }}
    with pytest.raises(ToolDefinitionError, match="past 4,000 digits"):
        ToolSet.from_openai([definition], {"t": lambda **kw: kw})
    big_but_writable = {"type": "object", "properties": {"n": {"maximum": 10**4000}}}
    _arguments.check_foreign_schema("t", big_but_writable)


def test_the_plain_walk_and_the_rules_share_one_bound() -> None:
    from jianmu import _schema_rules
    from jianmu.tools import _schema_check

    assert _schema_check._MAX_INT_BITS == _schema_rules.MAX_INT_BITS


def _models(count: int) -> dict[str, Any]:
    """A server's schema of ``count`` models that refer to each other, as pydantic writes
    them: 500 KB at 1,000 models, with a ``$ref``, ``pattern``s, ``if``/``then`` and more."""
    defs = {f"M{i}": {
        "type": "object",
        "properties": {
            **{f"f{j}": {"type": "string", "pattern": "^[a-z]+$"} for j in range(8)},
            "n": {"type": "number", "multipleOf": 0.5},
            "next": {"$ref": f"#/$defs/M{(i + 1) % count}"},
        },
        "patternProperties": {"^x-": {"type": "string"}},
        "dependentSchemas": {"f0": {"required": ["f1"]}},
        "if": {"required": ["n"]}, "then": {"required": ["f2"]},
        "required": ["f0"],
    } for i in range(count)}
    return {"type": "object", "$defs": defs, "properties": {"root": {"$ref": "#/$defs/M0"}}}


def test_a_large_schema_of_common_keywords_is_checked_without_jsonschema_s_meta_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """jsonschema's own meta-schema check took 3.6 s over such a 500 KB schema (5.3 s with its
    patterns, 8 s for a crafted 300 KB one), on the event loop while an MCP server's tools
    were listed; `$ref`, `pattern`, `patternProperties`, `if`/`then`/`else`,
    `dependentSchemas` and `multipleOf` are now read by the walk too (tests/tools/
    test_schema_check.py holds it to jsonschema's answers)."""
    from jianmu.tools import _schema_check

    def refused(*args: Any) -> None:
        raise AssertionError("handed to jsonschema's meta-schema check")

    monkeypatch.setattr(_schema_check, "_meta_check", refused)
    _arguments.check_foreign_schema("t", _models(1_000))
