"""The MCP tools that skills name: which configured servers, and fetching their tools."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from jianmu.constraints import Constraints
from jianmu.errors import MCPError
from jianmu.guard import visible_tools
from jianmu.mcp import MCPClient, MCPReadResourceTool, MCPToolProvider, resource_tools
from jianmu.runtime.context import RunContext
from jianmu.skills.skill import Skill

if TYPE_CHECKING:
    from jianmu.nodes.tool_executor import ToolExecutor

__all__ = ("connect_mcp_tools", "mcp_references")

logger = logging.getLogger("jianmu.mcp")


def mcp_references(skills: Iterable[Skill], ctx: RunContext) -> dict[str, set[str]]:
    """Configured MCP servers the skills name, with the tools asked for (``*``: all)."""
    servers = {name.lower(): name for name in ctx.config.mcp.servers}
    wanted: dict[str, set[str]] = {}
    for skill in skills:
        for ref in skill.tools:
            key = ref.strip().lower()
            server, _, tool_name = key.partition("__")
            if server in servers:
                wanted.setdefault(servers[server], set()).add(key if tool_name else "*")
    return wanted


async def connect_mcp_tools(
    skills: Iterable[Skill],
    ctx: RunContext,
    constraints: Callable[[], Constraints | None],
    executor: ToolExecutor,
) -> None:
    """Start the MCP servers the skills name (closed with the run) and register on
    ``executor`` the tools they asked for, minus those whose policy under ``constraints()``
    is deny. When a server says its tools changed, they are listed again before the model's
    next turn (tools it dropped are removed, new ones it added registered). The read-only
    ``mcp_list_resources`` and ``mcp_read_resource`` cover the servers named whole."""
    for server, names in mcp_references(skills, ctx).items():
        provider = MCPToolProvider.from_config(server, ctx.config.mcp.servers[server])
        ctx.on_close(provider.close)
        await provider.initialize()
        _Sync(provider, names, ctx, constraints, executor).attach()
        if "*" in names:  # a skill that names one tool of a server gets only that tool
            _add_resource_tools(provider, ctx, constraints, executor)


def _add_resource_tools(
    provider: MCPToolProvider, ctx: RunContext,
    constraints: Callable[[], Constraints | None], executor: ToolExecutor,
) -> None:
    """(Re-)register ``mcp_list_resources`` / ``mcp_read_resource`` over every server the
    run has connected so far, this one included (unless a policy denies them)."""
    existing = executor.toolset.get(MCPReadResourceTool.name)
    clients: dict[str, MCPClient] = (
        existing.clients if isinstance(existing, MCPReadResourceTool)  # type: ignore[assignment]
        else {}
    )
    clients[provider.name] = provider.client
    for tool in visible_tools(resource_tools(clients), ctx, constraints() or Constraints()):
        executor.register_tool(tool)


class _Sync:
    """Keeps an executor's tools of one MCP server in step with the server's list."""

    def __init__(
        self, provider: MCPToolProvider, names: set[str], ctx: RunContext,
        constraints: Callable[[], Constraints | None], executor: ToolExecutor,
    ) -> None:
        self.provider, self.names, self.ctx = provider, names, ctx
        self.constraints, self.executor = constraints, executor
        self.registered: set[str] = set()
        self.pending = False

    def attach(self) -> None:
        """Register the tools now and follow the server's changes."""
        self.provider.on_tools_changed(self._changed)
        self._register()

    def _register(self) -> None:
        wanted = self.names
        chosen = [t for t in self.provider.get_tools() if "*" in wanted or t.name.lower() in wanted]
        shown = visible_tools(chosen, self.ctx, self.constraints() or Constraints())
        now = {t.name for t in shown}
        for gone in self.registered - now:
            self.executor.unregister_tool(gone)
        for tool in shown:
            self.executor.register_tool(tool)
        self.registered = now

    def _changed(self) -> None:
        # runs on the session's loop: only schedule; the executor lists before the next turn
        if not self.pending:
            self.pending = True
            self.executor.add_tool_source(self._refresh)

    async def _refresh(self) -> None:
        self.pending = False
        try:
            await self.provider.refresh()
        except MCPError as exc:  # the model keeps the tools it had; a call says what failed
            logger.warning("MCP server %r: could not list its changed tools: %s",
                           self.provider.name, exc)
            return
        self._register()
