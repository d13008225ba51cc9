"""A stdio MCP server that leaves helper processes behind it (official SDK, `MCPServer`).

Run: ``python helpers_server.py``. Its tools:

- ``spawn``: starts a helper (``sleep 300``) in the server's process group, as a server that
  runs a language server or a browser does, and answers its pid;
- ``crash``: the server exits at once, under the call, its helpers left running.

On stdin's end the server exits as the MCP spec asks, without stopping its helpers.
"""

from __future__ import annotations

import os
import subprocess

from mcp.server.mcpserver import MCPServer

server = MCPServer("helpers")
_helpers: list[subprocess.Popen[bytes]] = []


@server.tool()
def spawn() -> int:
    """Start a helper process; its pid."""
    helper = subprocess.Popen(["sleep", "300"])
    _helpers.append(helper)  # kept: a collected Popen would not matter, but be plain
    return helper.pid


@server.tool()
def crash() -> str:
    """Exit under the call."""
    os._exit(3)


if __name__ == "__main__":
    server.run()
