"""An MCP server (official SDK) with resources, a prompt, tools added at runtime and bearer auth.

Run: ``python notes_server.py stdio`` or ``python notes_server.py http PORT``. Over HTTP, when
``NOTES_TOKEN`` is set, every request must carry ``Authorization: Bearer $NOTES_TOKEN`` and
``X-Team: blue`` (else 401), so a test can tell that headers and auth reach every request.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("notes", log_level="WARNING")

LOGO = bytes(range(256)) * 4  # 1024 bytes of binary data


@server.resource("notes://readme", name="readme", mime_type="text/markdown")
def readme() -> str:
    """The notes' readme."""
    return "# Notes\nRead me first."


@server.resource("notes://logo", name="logo", mime_type="image/png")
def logo() -> bytes:
    """A binary resource."""
    return LOGO


@server.prompt()
def summarise(topic: str) -> str:
    """Ask for a summary of a topic."""
    return f"Summarise what the notes say about {topic}."


@server.tool(structured_output=False)
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` (it answers its own name) and tell the client."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(
        added, name=name, description=f"Added at runtime: {name}.", structured_output=False
    )
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


def _guarded(app: Any, token: str) -> Any:
    """The ASGI app, refusing requests without the bearer token and the team header (401)."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if (
                headers.get(b"authorization") != f"Bearer {token}".encode()
                or headers.get(b"x-team") != b"blue"
            ):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    """Serve over the transport named on the command line."""
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
        return
    if transport != "http":
        raise SystemExit(f"unknown transport {transport!r}; use 'stdio' or 'http PORT'")
    import uvicorn

    app: Any = server.streamable_http_app()
    token = os.environ.get("NOTES_TOKEN")
    if token:
        app = _guarded(app, token)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")


if __name__ == "__main__":
    main()
