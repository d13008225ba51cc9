"""A hostile MCP server (official SDK, low level) whose tools' schemas are oddly shaped.

Run: ``python shapes_server.py`` (stdio). Its tools:

- ``python_names``: arguments named like Python's own (``self``, ``cls``, ``args``,
  ``kwargs``); answers the arguments it got, as JSON;
- ``nested_required`` / ``any_of_number``: a keyword the checker walks holds the wrong kind of
  value below the top (``required: 5`` in a property, ``anyOf: 5``), which the SDK lets through;
- ``not_a_number``: ``NaN`` and ``Infinity`` in its schema, which JSON has no words for (a
  server without the SDK sends them; this one rewrites its answers' JSON text to do so);
- ``odd_dialect``, only when run as ``python shapes_server.py odd``: a ``$schema`` that is a
  number, not a dialect's URI (rewritten on the wire like ``NaN``), which the SDK's client
  refuses (that tool alone is left out);
- ``long_told``: a description and a title of a million characters each (every request to a
  model offers the tool's description);
- ``echo``: a plain tool, to show the server's other tools still work.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

_TEXT = {"type": "string"}
_NAN = "__NaN__"  # written as the bare words NaN and Infinity on the wire (see _bare_words)
_INFINITY = "__Infinity__"
_FIVE = "__five__"  # written as the number 5

SCHEMAS: dict[str, dict[str, Any]] = {
    "python_names": {
        "type": "object",
        "properties": {"self": _TEXT, "cls": _TEXT, "args": _TEXT, "kwargs": _TEXT},
        "required": ["self"],
    },
    "nested_required": {"type": "object", "properties": {"x": {"type": "object", "required": 5}}},
    "any_of_number": {"type": "object", "properties": {"x": {"anyOf": 5}}},
    "not_a_number": {
        "type": "object",
        "properties": {"x": {"type": "number", "maximum": _NAN, "enum": [1, _INFINITY]}},
    },
    "long_told": {"type": "object", "properties": {}},
    "echo": {"type": "object", "properties": {"text": _TEXT}},
}
LONG = "Read this. " + "x" * 1_000_000
if sys.argv[1:] == ["odd"]:
    SCHEMAS["odd_dialect"] = {"$schema": _FIVE, "type": "object", "properties": {}}


def _bare_words() -> None:
    """Answer as a server without the SDK may: ``NaN`` and ``Infinity`` as bare words (which
    Python's and pydantic's JSON readers accept), where the SDK would write ``null``; and a
    number where the SDK's models want a string."""
    dump = types.JSONRPCResponse.model_dump_json

    def with_bare_words(self: Any, **kwargs: Any) -> str:
        text = dump(self, **kwargs)
        text = text.replace(f'"{_NAN}"', "NaN").replace(f'"{_INFINITY}"', "Infinity")
        return text.replace(f'"{_FIVE}"', "5")

    types.JSONRPCResponse.model_dump_json = with_bare_words  # type: ignore[method-assign]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[
        types.Tool(
            name=name, input_schema=schema,
            description=LONG if name == "long_told" else f"the {name} tool",
            title=LONG if name == "long_told" else None,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        for name, schema in SCHEMAS.items()
    ])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = f"{params.name} got " + json.dumps(params.arguments or {}, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server: Server[Any] = Server("shapes", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    _bare_words()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
