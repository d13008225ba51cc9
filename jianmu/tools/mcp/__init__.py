"""Deprecated: MCP moved to its own package, `jianmu.mcp`; this path goes in the next release.

A package rather than an ``mcp.py`` file, so that git sees the old file renamed.
"""

from __future__ import annotations

from jianmu._moved import moved

__all__: tuple[str, ...] = ()  # an old path offers nothing to star-import

_NAMES = (
    "TRUST_LEVELS", "MCPCallResult", "MCPClient", "MCPTool", "MCPToolInfo", "MCPToolProvider",
    "build_mcp_server", "mcp_result_value", "mcp_tool_names", "providers_from_config", "serve",
    "serve_sync",
)
# tools sits below mcp: the names are looked up by module name on first use, not imported
__getattr__ = moved(__name__, dict.fromkeys(_NAMES, "jianmu.mcp"))
