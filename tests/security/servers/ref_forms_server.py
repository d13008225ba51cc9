"""An MCP server (official SDK, low level) whose tools' schemas use every form of reference
and branch the lax checker claims to read, each limiting ``n`` to at most 5, and keywords it
does not read itself (``not``, draft 4's boolean bounds, ``multipleOf``, ``if``/``then``).

Run: ``python ref_forms_server.py`` (stdio). Each tool answers ``<name> ran with <arguments>``,
so a test sees whether a call that breaks the schema reached the server.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

SMALL = {"type": "integer", "maximum": 5}


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": SMALL}, "required": ["n"]}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    return schema


SCHEMAS: dict[str, dict[str, Any]] = {
    # a tree: "#" is the whole schema (the commonest recursive schema)
    "root_ref": {"type": "object", "properties": {"n": SMALL, "child": {"$ref": "#"}}},
    "anchor": {"type": "object", "$defs": {"s": {"$anchor": "small", **SMALL}},
               "properties": {"n": {"$ref": "#small"}}},
    "id_ref": {"type": "object", "$defs": {"s": {"$id": "small.json", **SMALL}},
               "properties": {"n": {"$ref": "small.json"}}},
    "escaped": {"type": "object", "$defs": {"a b": SMALL},
                "properties": {"n": {"$ref": "#/$defs/a%20b"}}},
    "dynamic": {"type": "object", "$dynamicAnchor": "node",
                "properties": {"n": SMALL, "c": {"$dynamicRef": "#node"}}},
    "at_root": {"type": "object", "$ref": "#/$defs/args",
                "$defs": {"args": {"properties": {"n": SMALL}}}},
    "root_all_of": {"type": "object", "allOf": [{"properties": {"n": SMALL}}]},
    "beside_any_of": {"type": "object", "properties": {
        "n": {"type": "integer", "maximum": 5, "anyOf": [{"type": "integer"}]}}},
    "deep": _nested(40),
    "forbidden": {"type": "object", "properties": {"n": False}},
    # keywords the lax checker does not read itself: the schema's own validator checks them
    "negated": {"type": "object", "properties": {
        "command": {"type": "string", "not": {"enum": ["rm", "shutdown"]}}}},
    "draft4_bounds": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                      "properties": {"n": {"type": "integer", "maximum": 5,
                                           "exclusiveMaximum": True}}},
    "multiple": {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}},
    "conditional": {"type": "object", "properties": {"mode": {"type": "string"},
                                                     "n": {"type": "integer"}},
                    "if": {"properties": {"mode": {"const": "small"}}},
                    "then": {"properties": {"n": SMALL}}},
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
    text = f"{params.name} ran with {params.arguments}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server: Server[Any] = Server("refs", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
