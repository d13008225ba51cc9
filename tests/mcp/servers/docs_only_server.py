"""An MCP server (official SDK, low-level ``Server``) of resources only: it declares no
``tools`` capability and answers ``tools/list`` with ``Method not found``, as the spec lets it.

Run: ``python docs_only_server.py``; one resource, ``docs://readme``.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

README = "docs://readme"


async def list_resources(_ctx: Any, _params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri=README, name="readme")])


async def read_resource(_ctx: Any, params: Any) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[
        types.TextResourceContents(uri=str(params.uri), mime_type="text/plain", text="Read me.")
    ])


async def main() -> None:
    server = Server("docs", on_list_resources=list_resources, on_read_resource=read_resource)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
