"""The MCP server `bench_mcp` calls: one ``echo`` tool, written with the official SDK, stdio."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run("stdio")
