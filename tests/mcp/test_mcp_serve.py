"""Serving a ToolSet over MCP: `serve` in a subprocess driven by the official SDK's client, and
`ClientRunners`: which runner each request's tool call runs on, and when runners close."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import jianmu.mcp.server as mcp_server
from jianmu.constraints import GuardConstraints
from jianmu.errors import MissingExtraError
from jianmu.mcp import MCPToolProvider, build_mcp_server, serve, serve_sync
from jianmu.mcp.server import ClientRunners
from jianmu.tools.base import tool
from jianmu.tools.registry import ToolSet
from tests.mcp.helpers import REPO, SERVE_APP, HttpServer, free_port

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for the whole module: its tests share one loop, so `session` can be one."""
    return "asyncio"


@pytest.fixture(scope="module")
async def session() -> AsyncIterator[ClientSession]:
    """An SDK client session with ``serve_app.py`` (``serve(..., transport="stdio")``), one
    for the module: its tests list the tools and call them, and no call changes the server."""
    params = StdioServerParameters(
        command=sys.executable, args=[SERVE_APP], env={"PYTHONPATH": str(REPO)}, cwd=str(REPO)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def test_lists_tools_with_annotations_and_hides_denied(session: ClientSession) -> None:
    listed = {t.name: t for t in (await session.list_tools()).tools}
    assert list(listed) == ["add", "wipe_disk", "rotate_logs", "explode"]  # read_secrets denied
    add = listed["add"]
    assert add.description == "Add two integers."
    assert add.input_schema["required"] == ["a", "b"]
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    assert add.annotations is not None
    assert (add.annotations.read_only_hint, add.annotations.destructive_hint) == (True, False)
    assert add.annotations.idempotent_hint is True
    wipe = listed["wipe_disk"].annotations
    assert wipe is not None and (wipe.read_only_hint, wipe.destructive_hint) == (False, True)
    explode = listed["explode"].annotations
    assert explode is not None and explode.open_world_hint is True


async def test_calls_run_refuse_confirm_tools_and_report_errors(session: ClientSession) -> None:
    added = await session.call_tool("add", {"a": 2, "b": "3"})
    assert not added.is_error and text_of(added) == "5"
    wiped = await session.call_tool("wipe_disk", {"device": "/dev/sda"})
    assert wiped.is_error and "needs a person's approval" in text_of(wiped)
    assert "guard.tool_policy" in text_of(wiped)
    rotated = await session.call_tool("rotate_logs", {"keep": 2})  # explicitly allowed
    assert not rotated.is_error and text_of(rotated) == "rotated, kept 2"
    denied = await session.call_tool("read_secrets", {})
    assert denied.is_error and "unknown tool 'read_secrets'" in text_of(denied)
    exploded = await session.call_tool("explode", {"reason": "boom"})
    assert exploded.is_error and "boom" in text_of(exploded)
    bad = await session.call_tool("add", {"a": "x"})
    assert bad.is_error and "missing required argument 'b'" in text_of(bad)


async def test_jianmu_tools_served_and_consumed_by_jianmu() -> None:
    provider = MCPToolProvider(
        "local", command=sys.executable, args=[SERVE_APP], env={"PYTHONPATH": str(REPO)},
        cwd=str(REPO), timeout=20, trust="all",  # our own server: its hints round-trip
    )
    toolset = await ToolSet.from_providers([provider])
    try:
        assert toolset["local__add"].category == "read"
        assert toolset["local__wipe_disk"].category == "dangerous"
        assert toolset["local__explode"].effect_tags == ("http",)
        result = await toolset.execute("local__add", {"a": 20, "b": 22})
        assert result.ok and result.output == "42"
    finally:
        await provider.close()


async def test_http_transport(http_server: HttpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("SERVE_APP_TOKEN", "t0ken-for-the-test")
    http_server([SERVE_APP], port)
    provider = MCPToolProvider("web", url=f"http://127.0.0.1:{port}/mcp", timeout=20,
                               headers={"Authorization": "Bearer t0ken-for-the-test"})
    toolset = await ToolSet.from_providers([provider])
    try:
        assert "web__read_secrets" not in toolset
        result = await toolset.execute("web__add", {"a": 1, "b": 2})
        assert result.ok and result.output == "3"
    finally:
        await provider.close()


# -- build_mcp_server in-process (the SDK's in-memory client) ---------------------------------


@tool
def lookup(key: str) -> dict[str, str]:
    """Look a key up.

    Args:
        key: The key.
    """
    return {"key": key, "value": key.upper()}


@tool(permission="admin_only", category="write")
def reset(scope: str) -> str:
    """Reset something (admins only).

    Args:
        scope: What to reset.
    """
    return f"reset {scope}"


async def test_structured_results_roles_and_call_limits() -> None:
    toolset = ToolSet.from_tools([lookup, reset])
    server = build_mcp_server(toolset, guard=GuardConstraints(max_tool_calls=1))
    async with Client(server) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["lookup"]
        first = await client.call_tool("lookup", {"key": "k"})
        assert first.structured_content == {"key": "k", "value": "K"}
        second = await client.call_tool("lookup", {"key": "k"})
        assert second.is_error and "max_tool_calls=1" in text_of(second)
    admin = build_mcp_server(toolset, user_roles={"admin"}, name="admin")
    async with Client(admin) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["lookup", "reset"]
        result = await client.call_tool("reset", {"scope": "cache"})
        assert not result.is_error and text_of(result) == "reset cache"


async def test_bad_arguments_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    toolset = ToolSet.from_tools([lookup])
    with pytest.raises(ValueError, match="unknown MCP transport 'pipe'"):
        await serve(toolset, transport="pipe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"1\.\.65535"):
        await serve(toolset, transport="http", port=0, token="t")
    for token in (None, "", "  "):
        with pytest.raises(ValueError, match="needs a bearer token"):
            await serve(toolset, transport="http", port=8000, token=token)
    with pytest.raises(TypeError, match="serves a ToolSet"):
        build_mcp_server([lookup])  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="await serve"):
        serve_sync(toolset)
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(MissingExtraError, match=r"jianmu\[mcp\]"):
        build_mcp_server(toolset)


# -- one runner per client ---------------------------------------------------------------------


class FakeRunner:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, 0

    async def close(self) -> None:
        self.closed += 1


class Request:
    def __init__(self, session: str | None) -> None:
        self.headers = {} if session is None else {"mcp-session-id": session}


def _runners() -> tuple[ClientRunners, FakeRunner, list[FakeRunner]]:
    shared, made = FakeRunner("shared"), []

    def make() -> Any:
        made.append(FakeRunner(f"client{len(made)}"))
        return made[-1]

    return ClientRunners(shared, make), shared, made  # type: ignore[arg-type]


async def test_stdio_uses_the_shared_runner_and_each_http_session_its_own() -> None:
    runners, shared, made = _runners()
    async with runners.runner_for(None) as got:
        assert got is shared
    for session in ("s1", "s2", "s1"):
        async with runners.runner_for(Request(session)) as got:
            assert got.name == {"s1": "client0", "s2": "client1"}[session]  # type: ignore[attr-defined]
    async with runners.runner_for(Request(None)) as got:  # no session: this call's own
        assert got is made[2]
    assert made[2].closed == 1 and made[0].closed == 0
    await runners.close()
    assert [r.closed for r in (shared, *made)] == [1, 1, 1, 1]


async def test_a_runner_passed_in_serves_every_client() -> None:
    shared = FakeRunner("given")
    runners = ClientRunners(shared, None)  # type: ignore[arg-type]
    async with runners.runner_for(Request("s1")) as got:
        assert got is shared


async def test_idle_clients_close_and_the_busy_are_never_evicted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_server, "MAX_CLIENTS", 2)
    runners, _shared, made = _runners()
    async with runners.runner_for(Request("busy")):
        async with runners.runner_for(Request("idle")):
            pass
        async with runners.runner_for(Request("new")) as got:  # room: the idle one goes
            assert got is made[2] and made[1].closed == 1 and made[0].closed == 0
            async with runners.runner_for(Request("more")) as extra:  # all busy: its own
                assert extra is made[3]
            assert made[3].closed == 1
    monkeypatch.setattr(mcp_server, "IDLE_S", -1.0)
    async with runners.runner_for(Request("later")):
        assert made[0].closed == 1 and made[2].closed == 1  # idle past IDLE_S: closed


async def test_a_dict_result_holding_models_is_served_as_their_fields() -> None:
    from datetime import datetime

    from pydantic import BaseModel

    class Line(BaseModel):
        line_id: str
        roaming: bool

    @tool
    def enable_roaming(line_id: str) -> dict[str, Any]:
        """Turn roaming on (tau2-bench's telecom tools return dicts holding their models).

        Args:
            line_id: The line.
        """
        return {"line": Line(line_id=line_id, roaming=True), "at": datetime(2025, 1, 15, 10, 30)}

    server = build_mcp_server(ToolSet.from_tools([enable_roaming]))
    async with Client(server) as client:
        result = await client.call_tool("enable_roaming", {"line_id": "L1"})
    expected = {"line": {"line_id": "L1", "roaming": True}, "at": "2025-01-15T10:30:00"}
    assert result.structured_content == expected
    assert json.loads(text_of(result)) == expected


async def test_a_dict_holding_nan_or_infinity_is_served_as_strict_json() -> None:
    @tool
    def stats(x: float) -> dict[str, Any]:
        """Statistics of nothing: an empty mean is NaN.

        Args:
            x: A number.
        """
        return {"mean": float("nan"), "max": float("inf"), "x": x}

    def strict(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    server = build_mcp_server(ToolSet.from_tools([stats]),
                              guard=GuardConstraints(tool_policy={"stats": "allow"}))
    async with Client(server) as client:
        result = await client.call_tool("stats", {"x": 2})
    # the text a client parses (JSON.parse refuses NaN) says what the structured content says
    assert not result.is_error
    assert json.loads(text_of(result), parse_constant=strict) == result.structured_content
    assert result.structured_content == {"mean": None, "max": None, "x": 2.0}
