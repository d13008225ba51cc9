"""A hostile MCP server (official SDK, low level) whose tools' input schemas are shaped as no
model could call them, or named so their names meet once made safe.

Run: ``python given_shapes_server.py`` (stdio). Its tools:

- ``root_params``: xLAM's shape, parameters at the schema's root and no ``properties``;
- ``stray_param``: one parameter written beside ``properties``;
- ``null_properties``: ``{"type": "object", "properties": null}`` (rewritten on the wire);
- ``python_types``: a property of Python's type ``"str"``;
- ``ref_cycle``: two ``$defs`` that refer to each other, never descending;
- ``js_names``: arguments named ``__proto__``, ``constructor`` and ``self``; answers them;
- ``get.item``, ``get_item``, ``GET-item!``: three tools whose names meet once made safe;
- ``echo``: a plain tool, to show the server's other tools still work.

Every tool answers ``<name> got <its arguments as JSON>``.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

_TEXT = {"type": "string"}
_NULL = "x-null-properties"  # on the wire: "properties": null (the SDK's models drop it)

SCHEMAS: dict[str, dict[str, Any]] = {
    "root_params": {"type": "object",
                    "query": {"type": "string", "description": "What to find."},
                    "limit": {"type": "integer"}},
    "stray_param": {"type": "object", "properties": {"q": _TEXT}, "limit": {"type": "integer"}},
    "null_properties": {_NULL: True, "type": "object"},
    "python_types": {"type": "object", "properties": {"x": {"type": "str"}}},
    "ref_cycle": {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"},
                                              "b": {"$ref": "#/$defs/a"}},
                  "properties": {"x": {"$ref": "#/$defs/a"}}},
    "js_names": {"type": "object", "required": ["__proto__"],
                 "properties": {"__proto__": _TEXT, "constructor": _TEXT, "self": _TEXT}},
    "get.item": {"type": "object", "properties": {}},
    "get_item": {"type": "object", "properties": {}},
    "GET-item!": {"type": "object", "properties": {}},
    "echo": {"type": "object", "properties": {"text": _TEXT}},
}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[
        types.Tool(name=name, description=f"the {name} tool", input_schema=schema,
                   annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False))
        for name, schema in SCHEMAS.items()
    ])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = f"{params.name} got " + json.dumps(params.arguments or {}, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server: Server[Any] = Server("given", on_list_tools=list_tools, on_call_tool=call_tool)


def _on_the_wire() -> None:
    """Answer as a server without the SDK may: ``properties: null``, which the SDK's models
    drop (marked by an ``x-`` key, rewritten in the answer's JSON). A schema with no ``type``,
    or another than ``object``, cannot be sent so: the SDK's client refuses the whole
    listing for it."""
    dump = types.JSONRPCResponse.model_dump_json

    def rewritten(self: Any, **kwargs: Any) -> str:
        answer = json.loads(dump(self, **kwargs))
        for listed in (answer.get("result") or {}).get("tools") or ():
            schema = listed["inputSchema"]
            if schema.pop(_NULL, None):
                schema["properties"] = None
        return json.dumps(answer, separators=(",", ":"))

    types.JSONRPCResponse.model_dump_json = rewritten  # type: ignore[method-assign]


async def main() -> None:
    _on_the_wire()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
