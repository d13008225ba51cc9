"""Real MCP servers' tool schemas through Jianmu's checks, as a model meets them.

The official npm servers (``server-everything``, ``server-filesystem``: zod's draft-07) and an
official Python SDK server (`MCPServer`, tests/mcp/servers/schemas_server.py: pydantic's
``$defs``/``$ref``, recursive models, ``anyOf`` with null, enums, ``additionalProperties``,
``format``, a discriminated union, defaults). Every tool is listed, offered to the model with
the server's schema as the server sent it, exported in strict mode or refused for it by name;
a correct call validates and runs, a wrong one comes back to the model as a validation error
naming each problem, and never reaches the server (but for ``format``, an annotation: the
server's own refusal names the field).
"""

from __future__ import annotations

import json
import shutil
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import ToolUnavailableWarning, ToolValidationError
from jianmu.mcp import MCPToolProvider
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

SCHEMAS = str(Path(__file__).parent / "servers" / "schemas_server.py")


async def _listed(provider: MCPToolProvider) -> tuple[ToolSet, dict[str, dict[str, Any]]]:
    """The provider's tools, and every input schema exactly as the server listed it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ToolUnavailableWarning)  # a task-only tool, said apart
        tools = await ToolSet.from_providers([provider])
    raw = {info.name: info.input_schema for info in await provider.client.list_tools()}
    return tools, raw


def _offered_intact(tools: ToolSet, raw: dict[str, dict[str, Any]]) -> list[str]:
    """Check each tool goes to the model with its server's schema; the strict refusals."""
    refused: list[str] = []
    for made in tools:
        exported = made.to_openai()["function"]["parameters"]
        assert exported == raw[made.remote_name], made.name  # type: ignore[attr-defined]
        assert made.to_anthropic()["input_schema"] == exported
        try:
            strict = made.to_openai(strict=True)["function"]["parameters"]
        except ToolValidationError as exc:  # named, never another exception
            refused.append(made.name)
            assert exc.tool == made.name and "strict" in str(exc)
        else:
            assert strict["additionalProperties"] is False
    return refused


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for the whole module: its tests share one loop, so one server serves them."""
    return "asyncio"


@pytest.fixture(scope="module")
async def python_server() -> AsyncIterator[tuple[ToolSet, dict[str, dict[str, Any]]]]:
    """One server for the module: its tests only list and call (a wrong call never reaches
    it), so none changes what the next one meets."""
    provider = MCPToolProvider("sc", command=sys.executable, args=[SCHEMAS, "stdio"],
                               trust="read_only", timeout=60, connect_timeout=60)
    try:
        yield await _listed(provider)
    finally:
        await provider.close()


ORDER = {"items": [{"sku": "A1", "quantity": 2}, {"sku": "B"}],
         "ship_to": {"street": "1 Main St", "city": "Springfield", "zip": "12345"}}


async def test_a_python_sdk_server_s_schemas_are_offered_intact_and_called(
        python_server: tuple[ToolSet, dict[str, dict[str, Any]]]) -> None:
    tools, raw = python_server
    assert tools.names() == ["sc__place_order", "sc__set_limits", "sc__schedule", "sc__grow",
                             "sc__area", "sc__ping"]
    assert "$defs" in raw["place_order"] and "$ref" in json.dumps(raw["grow"])
    assert "oneOf" in json.dumps(raw["area"])
    # a dict[str, int] is the one schema strict mode cannot say; it is named, not crashed on
    assert _offered_intact(tools, raw) == ["sc__set_limits"]
    good: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("sc__place_order", {"order": ORDER, "priority": "high", "tags": ["gift"]},
         {"priority": "high", "tags": ["gift"], "note": None}),
        # as a strict-mode model sends it: every field, null for "not given"
        ("sc__place_order", {"order": {**ORDER, "bill_to": None, "items": [
            {"sku": "A1", "quantity": None}]}, "priority": None, "note": None, "tags": None},
         {"priority": "normal", "tags": []}),
        ("sc__set_limits", {"limits": {"a": 1, "b": 2}}, {"ratio": 0.5}),
        ("sc__schedule", {"when": "2026-01-02T03:04:05Z", "day": "2026-01-02",
                          "site": "https://example.com/x"}, {"mode": "once"}),
        ("sc__grow", {"tree": {"name": "r", "children": [
            {"name": "a", "children": [{"name": "b"}]}, {"name": "c"}]}}, {"nodes": 4}),
        ("sc__area", {"shape": {"kind": "square", "side": 2}}, {"area": 4.0}),
    ]
    for name, args, expected in good:
        result = await tools.execute(name, args)
        assert result.ok, (name, result.error)
        got = json.loads(str(result.output))
        assert {k: got[k] for k in expected} == expected, name
    assert json.loads(str((await tools.execute("sc__place_order", good[1][1])).output))[
        "order"]["ship_to"]["country"] == "US"  # the server's default, not a forwarded null
    assert (await tools.execute("sc__ping", {})).output == "pong"
    # `format` is an annotation (JSON Schema 2020-12's default, as for a schema tool): a value
    # of another format reaches the server, whose refusal names each field to the model
    dated = await tools.execute("sc__schedule", {"when": "tomorrow", "day": "2026-13-45",
                                                 "site": "https://example.com"})
    assert not dated.ok and dated.error is not None
    assert "Input should be a valid datetime" in dated.error and "\nday\n" in dated.error


@pytest.mark.parametrize(("name", "args", "says"), [
    ("sc__place_order", {"order": {**ORDER, "items": []}, "priority": "urgent"},
     ["order.items: needs at least 1 items, got 0",
      "priority: 'urgent' is not one of 'low', 'normal', 'high'"]),
    ("sc__place_order", {"order": {"items": [{"sku": "A", "quantity": 0}],
                                   "ship_to": {"city": "X", "zip": "1234"}}},
     ["order.items[0].quantity: must be >= 1, got 0",
      "order.ship_to.zip: '1234' does not match pattern '^[0-9]{5}$'",
      "missing required argument 'order.ship_to.street'"]),
    ("sc__set_limits", {"limits": {"a": "x"}, "ratio": 2},
     ["limits.a: expected integer, got 'x'", "ratio: must be <= 1, got 2"]),
    ("sc__schedule", {"when": "2026-01-02T03:04:05Z", "day": "2026-01-02",
                      "site": "https://example.com", "mode": "weekly"},
     ["mode: 'weekly' is not one of 'once', 'daily'"]),
    ("sc__grow", {"tree": {"name": "r", "children": [{"children": []}]}},
     ["missing required argument 'tree.children[0].name'"]),
    ("sc__area", {"shape": {"kind": "square", "radius": 2}},
     ["shape: {'kind': 'square', 'radius': 2} matches none of the allowed forms"]),
    ("sc__place_order", {}, ["missing required argument 'order'"]),
])
async def test_a_wrong_call_to_a_python_sdk_server_is_named_to_the_model(
        python_server: tuple[ToolSet, dict[str, dict[str, Any]]], name: str,
        args: dict[str, Any], says: list[str]) -> None:
    tools, _ = python_server
    result = await tools.execute(name, args)
    assert not result.ok and result.error is not None
    assert result.error.startswith(f"invalid arguments for tool {name!r}")  # not the server's
    for line in says:
        assert line in result.error, (line, result.error)


async def test_the_official_everything_server_s_schemas_are_offered_intact(
        everything_bin: str) -> None:
    provider = MCPToolProvider("ev", command=everything_bin, args=["stdio"], trust="read_only",
                               timeout=60, connect_timeout=60)
    try:
        tools, raw = await _listed(provider)
        task_only = {"simulate-research-query"}  # execution.taskSupport: required
        assert {t.remote_name for t in tools} == set(raw) - task_only  # type: ignore[attr-defined]
        assert _offered_intact(tools, raw) == []
        done = await tools.execute("ev__get-sum", {"a": 2, "b": 3.5})
        assert done.ok and "5.5" in str(done.output)
        wrong = await tools.execute("ev__get-sum", {"a": "two"})
        assert not wrong.ok and wrong.error is not None
        assert "a: expected number, got 'two'" in wrong.error
        assert "missing required argument 'b'" in wrong.error
        choice = await tools.execute("ev__get-structured-content", {"location": "Paris"})
        assert not choice.ok and "is not one of 'New York', 'Chicago'" in str(choice.error)
    finally:
        await provider.close()


async def test_the_official_filesystem_server_s_schemas_are_offered_intact(
        filesystem_script: Path, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    provider = MCPToolProvider("fs", command=str(shutil.which("node")),
                               args=[str(filesystem_script), str(tmp_path)], trust="read_only",
                               timeout=60, connect_timeout=60)
    try:
        tools, raw = await _listed(provider)
        assert {t.remote_name for t in tools} == set(raw)  # type: ignore[attr-defined]
        assert _offered_intact(tools, raw) == []
        path = str(tmp_path / "a.txt")
        done = await tools.execute("fs__read_text_file", {"path": path, "head": 2})
        assert done.ok and done.output == {"content": "one\ntwo"}  # its structured content
        edits = {"path": path, "edits": [{"oldText": "two", "newText": "2"}], "dryRun": True}
        assert (await tools.execute("fs__edit_file", edits)).ok
        wrong = await tools.execute("fs__edit_file", {"path": path, "edits": [{"old": "two"}]})
        assert not wrong.ok and wrong.error is not None
        assert "missing required argument 'edits[0].oldText'" in wrong.error
        many = await tools.execute("fs__read_multiple_files", {"paths": []})
        assert not many.ok and "paths: needs at least 1 items, got 0" in str(many.error)
    finally:
        await provider.close()
