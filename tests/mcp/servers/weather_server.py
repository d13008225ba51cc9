"""A small MCP server written with the official SDK (``MCPServer``), for Jianmu's client tests.

Run: ``python weather_server.py stdio`` or ``python weather_server.py http PORT``.

Its tools cover what the client must handle: structured output, plain text, a tool error
(``isError``), annotations (read-only, destructive, open-world), a name that is not safe for
model APIs, and the server's process id (so a test can tell a reconnect started a new one).
"""

from __future__ import annotations

import os
import sys
from typing import TypedDict

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("weather", log_level="WARNING")

_TEMPERATURES = {"paris": 18.5, "oslo": 4.0, "cairo": 31.0}


class Forecast(TypedDict):
    """A forecast."""

    city: str
    days: int
    temperature_c: float


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
def get_forecast(city: str, days: int = 1) -> Forecast:
    """Forecast for a city: temperature in Celsius over the next days."""
    key = city.strip().lower()
    if key not in _TEMPERATURES:
        # ToolError text reaches the client; other exceptions are reported without detail
        raise ToolError(f"unknown city {city!r}; known: {', '.join(sorted(_TEMPERATURES))}")
    return {"city": key, "days": days, "temperature_c": _TEMPERATURES[key]}


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_station(station: str) -> str:
    """Delete a weather station (pretend)."""
    return f"deleted {station}"


@server.tool(name="alerts.list", structured_output=False)
def alerts_list(region: str) -> str:
    """List weather alerts of a region."""
    return f"no alerts in {region}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def server_pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
async def wait(seconds: float) -> str:
    """Wait, then answer (for timeouts)."""
    await anyio.sleep(seconds)
    return f"waited {seconds}"


def main() -> None:
    """Serve over the transport named on the command line."""
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
    elif transport == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        raise SystemExit(f"unknown transport {transport!r}; use 'stdio' or 'http PORT'")


if __name__ == "__main__":
    main()
