"""One MCP server shared by runs on several event loops: ``run_sync()`` and ``asyncio.run``.

A real server process over stdio (tests/mcp/servers/weather_server.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import anyio
import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.mcp import MCPToolProvider
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.registry import ToolSet
from tests.mcp.helpers import WEATHER

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
        "weather", command=sys.executable, args=[WEATHER, "stdio"], trust="all", timeout=20
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
