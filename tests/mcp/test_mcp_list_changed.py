"""``notifications/tools/list_changed``: the provider lists again; the next model turn sees it."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from jianmu.config import AppConfig, MCPConfig, MCPServerConfig
from jianmu.mcp import MCPToolProvider
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.runtime.context import RunContext
from jianmu.skills.node import connect_mcp_tools
from tests.mcp.helpers import NOTES


@pytest.mark.anyio
async def test_provider_is_told_and_refreshes() -> None:
    provider = MCPToolProvider("notes", command=sys.executable, args=[NOTES, "stdio"], timeout=20)
    changed = anyio.Event()
    provider.on_tools_changed(changed.set)
    try:
        await provider.initialize()
        names = [t.name for t in provider.get_tools()]
        assert names == ["notes__add_tool"] and not provider.stale
        add = provider.get_tools()[0]
        assert await add.run(name="late") == "added late"
        await changed.wait()
        assert provider.stale
        fresh = {t.name: t for t in await provider.refresh()}
        assert sorted(fresh) == ["notes__add_tool", "notes__late"] and not provider.stale
        assert await fresh["notes__late"].run() == "I am late"
    finally:
        await provider.close()


@pytest.mark.anyio
async def test_the_next_model_turn_sees_the_new_tool() -> None:
    server = MCPServerConfig(command=sys.executable, args=[NOTES, "stdio"], timeout=20)
    ctx = RunContext(config=AppConfig(mcp=MCPConfig(servers={"notes": server})))
    executor = ToolExecutor()
    scheduled = anyio.Event()
    schedule = executor.add_tool_source

    def add_tool_source(source: Any) -> None:
        schedule(source)
        scheduled.set()

    executor.add_tool_source = add_tool_source  # type: ignore[method-assign]
    skill = SimpleNamespace(tools=["notes"])
    try:
        await connect_mcp_tools([skill], ctx, lambda: None, executor)  # type: ignore[list-item]
        served = [n for n in executor.visible_toolset().names() if n.startswith("notes__")]
        assert served == ["notes__add_tool"]
        assert await executor.toolset["notes__add_tool"].run(name="fresh") == "added fresh"
        await scheduled.wait()
        await executor.prepare_tools()  # what the LLM node awaits before each turn
        served = [n for n in executor.visible_toolset().names() if n.startswith("notes__")]
        assert served == ["notes__add_tool", "notes__fresh"]
    finally:
        for closer in ctx.closers:
            await closer()
