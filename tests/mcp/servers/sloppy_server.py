"""A sloppy MCP server over stdio, written as bare JSON-RPC (the SDK would not send its list).

Run: ``python sloppy_server.py``. ``tools/list`` comes in two pages (``nextCursor``), each
holding good tools beside broken ones, as hand-written servers send them:

- page 1: ``good_one``; ``schema_string`` (its ``inputSchema`` is a string); a tool with no
  name; ``number_description`` (its ``description`` is a number); ``extra_field`` (an
  unknown field ``colour``, which MCP allows); ``odd_dialect`` (a ``$schema`` that is a
  number, which the SDK's protocol check refuses);
- page 2: ``good_two``; an entry that is not an object at all (``42``); ``good_one`` again.

``tools/call`` answers ``<name> got <arguments as JSON>``. ``python sloppy_server.py
all_bad`` lists only broken tools (one page).
"""

from __future__ import annotations

import json
import sys
from typing import Any

_OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}}

PAGES: dict[str | None, dict[str, Any]] = {
    None: {
        "tools": [
            {"name": "good_one", "description": "a good tool", "inputSchema": _OBJECT},
            {"name": "schema_string", "inputSchema": "an object, honestly"},
            {"description": "a tool without a name", "inputSchema": _OBJECT},
            {"name": "number_description", "description": 5, "inputSchema": _OBJECT},
            {"name": "extra_field", "inputSchema": _OBJECT, "colour": "red"},
            {"name": "odd_dialect", "inputSchema": {"$schema": 5, "type": "object"}},
        ],
        "nextCursor": "page-2",
    },
    "page-2": {
        "tools": [
            {"name": "good_two", "description": "another good tool", "inputSchema": _OBJECT},
            42,
            {"name": "good_one", "description": "listed again", "inputSchema": {"type": "object"}},
        ],
    },
}
if sys.argv[1:] == ["all_bad"]:
    PAGES = {None: {"tools": [{"name": "schema_string", "inputSchema": "no"}, 42]}}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    """The result of ``request``; None for a notification."""
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "sloppy", "version": "1"},
        }
    elif method == "tools/list":
        result = PAGES.get(params.get("cursor"), {"tools": []})
    elif method == "tools/call":
        text = f"{params.get('name')} got {json.dumps(params.get('arguments') or {})}"
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request["id"],
                "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
