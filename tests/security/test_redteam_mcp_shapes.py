"""Red team, MCP client: a server whose tool schemas are oddly shaped.

A real server over stdio (tests/security/servers/shapes_server.py). An argument named like
Python's own (``self``, ``cls``, ``args``, ``kwargs``) is the model's and reaches the server
as sent; a schema whose keyword holds the wrong kind of value (``anyOf: 5``) is refused by
name when listed, instead of every call failing with Python's ``TypeError``; so is one holding
``NaN`` or ``Infinity`` (every request to a model API that offered the tool was refused: JSON
has no such numbers); the server's other tools stay. A description (or title) is cut to
`MAX_DESCRIPTION` characters: the model is offered it with every request. The calls go
through `ToolExecutor` under a `ReactiveRunner`.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.errors import ToolUnavailableWarning
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).parent / "servers" / "shapes_server.py"
RUN_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for the whole module: its tests share one loop, so one server serves them."""
    return "asyncio"


@pytest.fixture(scope="module")
async def shapes() -> AsyncIterator[tuple[ToolSet, list[str]]]:
    """The server's tools as a ToolSet, and the warnings its refused tools raised: one server
    for the module (it keeps nothing between calls; each test reads its own calls' answers)."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPToolProvider

    provider = MCPToolProvider(
        "shapes", command=sys.executable, args=[str(SERVER)], trust="read_only",
        timeout=RUN_TIMEOUT,
    )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ToolUnavailableWarning)
            tools = await ToolSet.from_providers([provider])
        yield tools, [str(w.message) for w in caught if w.category is ToolUnavailableWarning]
    finally:
        await provider.close()


async def _observations(tools: ToolSet, calls: list[dict[str, Any]]) -> dict[str, str]:
    state = StateManager(AgentState, {"actions": calls})
    runner = ReactiveRunner(ToolExecutor(tools=tools), state, interactive=False)
    result = await runner.run(timeout=RUN_TIMEOUT)
    assert result.status is RunStatus.SUCCESS, result.error
    return {m.tool_call_id: m.content or "" for m in state.get("messages")}


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_arguments_named_like_python_s_own_reach_the_server(
    shapes: tuple[ToolSet, list[str]],
) -> None:
    sent = {"self": "a", "cls": "b", "args": "c", "kwargs": "d"}
    tools, _ = shapes
    seen = await _observations(tools, [
        {"id": "c1", "name": "shapes__python_names", "arguments": dict(sent)},
    ])
    assert seen["c1"] == "python_names got " + json.dumps(sent, sort_keys=True)
    direct = await tools.execute("shapes__python_names", {"self": "only"})
    assert direct.ok and json.loads(direct.text.partition(" got ")[2]) == {"self": "only"}


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_a_schema_keyword_of_the_wrong_kind_is_refused_when_listed(
    shapes: tuple[ToolSet, list[str]],
) -> None:
    tools, skipped = shapes
    assert any("shapes__any_of_number" in w and "anyOf" in w for w in skipped), skipped
    assert "shapes__any_of_number" not in tools.names()
    seen = await _observations(tools, [
        {"id": "c1", "name": "shapes__any_of_number", "arguments": {"x": "a"}},
        {"id": "c2", "name": "shapes__echo", "arguments": {"text": "hi"}},
    ])
    assert "unknown tool" in seen["c1"] and "TypeError" not in seen["c1"]
    assert seen["c2"] == 'echo got {"text": "hi"}'


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_a_schema_holding_nan_or_infinity_is_refused_when_listed(
    shapes: tuple[ToolSet, list[str]],
) -> None:
    tools, skipped = shapes
    assert any("shapes__not_a_number" in w and "NaN" in w for w in skipped), skipped
    assert "shapes__not_a_number" not in tools.names()
    for tool in tools:  # what is offered to a model is JSON
        json.dumps(tool.to_openai(), allow_nan=False)
    seen = await _observations(tools, [
        {"id": "c1", "name": "shapes__echo", "arguments": {"text": "hi"}},
    ])
    assert seen["c1"] == 'echo got {"text": "hi"}'


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_a_huge_description_is_cut_and_the_tool_still_works(
    shapes: tuple[ToolSet, list[str]],
) -> None:
    from jianmu.mcp.provider import MAX_DESCRIPTION

    tools, _ = shapes
    told = tools.get("shapes__long_told")
    assert told is not None
    offered = told.to_openai()["function"]["description"]
    assert offered.startswith("Read this. xxx") and len(offered) <= MAX_DESCRIPTION + 100
    assert "cut" in offered
    seen = await _observations(tools, [
        {"id": "c1", "name": "shapes__long_told", "arguments": {}},
    ])
    assert seen["c1"] == "long_told got {}"


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_a_tool_the_sdk_refuses_is_named_and_skipped_and_the_others_stay() -> None:
    """The SDK's client refuses a tool whose ``$schema`` is not a string: a pydantic
    ``ValidationError`` for the whole listing made every tool of the server unusable; now
    that tool alone is named in a warning and left out."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPToolProvider

    provider = MCPToolProvider("shapes", command=sys.executable, args=[str(SERVER), "odd"],
                               trust="read_only", timeout=RUN_TIMEOUT)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ToolUnavailableWarning)
            tools = await ToolSet.from_providers([provider])
        said = [str(w.message) for w in caught if w.category is ToolUnavailableWarning]
        assert any("'odd_dialect'" in s and "$schema" in s and "'shapes'" in s for s in said)
        assert tools.get("shapes__odd_dialect") is None
        seen = await _observations(tools, [
            {"id": "c1", "name": "shapes__echo", "arguments": {"text": "hi"}},
        ])
        assert "hi" in seen["c1"]
    finally:
        await provider.close()
