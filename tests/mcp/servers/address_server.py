"""An MCP server (official SDK) whose tool has arguments named like the runtime's own values.

Run: ``python address_server.py stdio``. Its one tool echoes what it received, so a test can
check that a model's ``state``, ``ctx``, ``call_id`` and ``context`` arrive unchanged.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("address", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def set_address(state: str, ctx: str, call_id: str, context: str) -> str:
    """Store an address (echoes what arrived)."""
    return json.dumps({"state": state, "ctx": ctx, "call_id": call_id, "context": context})


if __name__ == "__main__":
    server.run("stdio")
