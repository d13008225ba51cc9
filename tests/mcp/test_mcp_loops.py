"""One MCP server shared by runs on several event loops (``run_sync()``, ``asyncio.run``), and
closed after calls given up.

Real server processes over stdio and HTTP (tests/mcp/servers/weather_server.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import anyio
import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.errors import ToolTimeoutError
from jianmu.mcp import MCPClient, MCPToolProvider
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.registry import ToolSet
from tests.mcp.helpers import WEATHER, HttpServer, free_port
from tests.support.forked_stdio import stdio_kwargs

pytestmark = pytest.mark.timeout(180)


def _server_pid(toolset: ToolSet) -> int:
    """Run ``weather__server_pid`` with ``run_sync()`` and return what it said."""
    actions: list[dict[str, Any]] = [{"id": "a", "name": "weather__server_pid", "arguments": {}}]
    state = StateManager(AgentState, {"actions": actions})
    result = ReactiveRunner(ToolExecutor(tools=toolset), state, interactive=False).run_sync(
        timeout=60
    )
    assert result.status is RunStatus.SUCCESS, result.error
    return int(state.get("messages")[-1].content or "")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_closing_from_another_loop_after_run_sync_stops_the_server() -> None:
    """The session lives on ``run_sync()``'s loop, which is stopped between runs: a close
    from ``asyncio.run`` handed its shutdown to that loop and waited forever."""
    provider = MCPToolProvider(
        "weather", **stdio_kwargs(WEATHER, "stdio"), trust="all", timeout=20
    )

    async def listed() -> ToolSet:
        return await ToolSet.from_providers([provider])

    toolset = asyncio.run(listed())
    first = _server_pid(toolset)
    assert _server_pid(toolset) == first  # successive run_sync() calls share the session

    async def close() -> None:
        with anyio.fail_after(60):  # a bound for the old hang, not a measure of speed
            await provider.close()

    asyncio.run(close())
    assert not _alive(first)
    asyncio.run(close())  # idempotent


class _Records(logging.Handler):
    """Keeps the records of the SDK's HTTP client logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.anyio
async def test_an_http_call_given_up_leaves_no_error_traceback_when_closing(
    http_server: HttpServer,
) -> None:
    """A call that timed out over HTTP still has its answer stream open; closing the client,
    the SDK logged the answer it could no longer deliver as an ERROR with a traceback
    ("Error parsing SSE message"): nothing had failed to parse, and nothing was wrong."""
    port = free_port()
    http_server([WEATHER], port)
    seen = _Records()
    sdk = logging.getLogger("mcp.client.streamable_http")
    sdk.addHandler(seen)
    try:
        for _ in range(3):  # the answer races the close: a few rounds show it
            client = MCPClient(url=f"http://127.0.0.1:{port}/mcp", timeout=1)
            await client.connect()
            with pytest.raises(ToolTimeoutError):
                await client.call_tool("wait", {"seconds": 600})
            await client.close()
    finally:
        sdk.removeHandler(seen)
    loud = [r for r in seen.records if r.levelno >= logging.WARNING or r.exc_info]
    assert not loud, [r.getMessage() for r in loud]
