"""MCP in both directions: tools of MCP servers as Jianmu tools, and Jianmu tools served over MCP.

`MCPClient` talks to one server, `MCPToolProvider` turns its tools into `MCPTool`s, and
`build_mcp_server` / `serve` (what ``jianmu mcp serve`` runs) serve a `ToolSet` with the guard
applied, and skills beside it: prompt skills as MCP prompts, skill files as MCP resources.
``import mcp`` in these modules is the official SDK (the ``mcp`` extra), imported only when a
server is connected or served.

Its names load on first use (module ``__getattr__``): importing one imports only the module
that holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu._lazy import lazy_names

if TYPE_CHECKING:
    from jianmu.mcp.client import MCPClient, MCPServerOptions
    from jianmu.mcp.data import (
        MCPCallResult,
        MCPPrompt,
        MCPPromptInfo,
        MCPResourceContent,
        MCPResourceInfo,
        MCPToolInfo,
    )
    from jianmu.mcp.provider import (
        TRUST_LEVELS,
        MCPTool,
        MCPToolProvider,
        mcp_result_value,
        mcp_tool_names,
        providers_from_config,
    )
    from jianmu.mcp.resources import MCPListResourcesTool, MCPReadResourceTool, resource_tools
    from jianmu.mcp.server import build_mcp_server, serve, serve_sync
    from jianmu.mcp.skill_content import (
        SKILL_URI_SCHEME,
        FileSource,
        PromptSource,
        skill_resource_uri,
    )

__all__ = (
    "SKILL_URI_SCHEME",
    "TRUST_LEVELS",
    "FileSource",
    "MCPCallResult",
    "MCPClient",
    "MCPListResourcesTool",
    "MCPPrompt",
    "MCPPromptInfo",
    "MCPReadResourceTool",
    "MCPResourceContent",
    "MCPResourceInfo",
    "MCPServerOptions",
    "MCPTool",
    "MCPToolInfo",
    "MCPToolProvider",
    "PromptSource",
    "build_mcp_server",
    "mcp_result_value",
    "mcp_tool_names",
    "providers_from_config",
    "resource_tools",
    "serve",
    "serve_sync",
    "skill_resource_uri",
)

_HOLDERS = {
    "jianmu.mcp.client": ("MCPClient", "MCPServerOptions"),
    "jianmu.mcp.data": (
        "MCPCallResult",
        "MCPPrompt",
        "MCPPromptInfo",
        "MCPResourceContent",
        "MCPResourceInfo",
        "MCPToolInfo",
    ),
    "jianmu.mcp.provider": (
        "TRUST_LEVELS",
        "MCPTool",
        "MCPToolProvider",
        "mcp_result_value",
        "mcp_tool_names",
        "providers_from_config",
    ),
    "jianmu.mcp.resources": ("MCPListResourcesTool", "MCPReadResourceTool", "resource_tools"),
    "jianmu.mcp.server": ("build_mcp_server", "serve", "serve_sync"),
    "jianmu.mcp.skill_content": (
        "SKILL_URI_SCHEME",
        "FileSource",
        "PromptSource",
        "skill_resource_uri",
    ),
}
__getattr__, __dir__ = lazy_names(__name__, _HOLDERS, __all__)
