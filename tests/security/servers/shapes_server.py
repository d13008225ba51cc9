"""A hostile MCP server (official SDK, low level) whose tools' schemas are oddly shaped.

Run: ``python shapes_server.py`` (stdio). Its tools:

- ``python_names``: arguments named like Python's own (``self``, ``cls``, ``args``,
  ``kwargs``); answers the arguments it got, as JSON;
- ``nested_required`` / ``any_of_number``: a keyword the checker walks holds the wrong kind of
  value below the top (``required: 5`` in a property, ``anyOf: 5``), which the SDK lets through;
- ``echo``: a plain tool, to show the server's other tools still work.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

_TEXT = {"type": "string"}

SCHEMAS: dict[str, dict[str, Any]] = {
    "python_names": {
        "type": "object",
        "properties": {"self": _TEXT, "cls": _TEXT, "args": _TEXT, "kwargs": _TEXT},
        "required": ["self"],
    },
    "nested_required": {"type": "object", "properties": {"x": {"type": "object", "required": 5}}},
    "any_of_number": {"type": "object", "properties": {"x": {"anyOf": 5}}},
    "echo": {"type": "object", "properties": {"text": _TEXT}},
}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[
        types.Tool(
            name=name, description=f"the {name} tool", input_schema=schema,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        for name, schema in SCHEMAS.items()
    ])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = f"{params.name} got " + json.dumps(params.arguments or {}, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server: Server[Any] = Server("shapes", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
