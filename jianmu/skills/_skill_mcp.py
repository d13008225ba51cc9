"""The MCP tools that skills name: which configured servers, and fetching their tools."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from jianmu.constraints import Constraints
from jianmu.guard import visible_tools
from jianmu.mcp import MCPToolProvider
from jianmu.runtime.context import RunContext
from jianmu.skills.skill import Skill
from jianmu.tools.base import Tool

__all__ = ("connect_mcp_tools", "mcp_references")


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
    register: Callable[[Tool], None],
) -> None:
    """Start the MCP servers the skills name (closed with the run) and ``register`` the tools
    they asked for, minus those whose policy under ``constraints()`` is deny."""
    for server, names in mcp_references(skills, ctx).items():
        provider = MCPToolProvider.from_config(server, ctx.config.mcp.servers[server])
        ctx.on_close(provider.close)
        await provider.initialize()
        chosen = [t for t in provider.get_tools() if "*" in names or t.name.lower() in names]
        for mcp_tool in visible_tools(chosen, ctx, constraints() or Constraints()):
            register(mcp_tool)
