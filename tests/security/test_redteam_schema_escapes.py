"""Red team: a schema's property names carry terminal escapes into the errors that name them.

A schema's author names its properties, and an error about a property's schema names its path
(``properties/<name>/type``). The path was written as the name was: a property named
``"\\x1b[2J"`` with a bad ``type`` made an error holding ESC, which Python prints as it is.
An MCP server's tool is refused so with a `ToolUnavailableWarning`, which Python writes to
stderr, a terminal, as it is: the server cleared the screen, or wrote a line of its own
(an OSC 8 link, a bidi override) under the run's. Now a path and each such warning show every
character that is not printable as its escape (`jianmu._text.visible`).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from jianmu.errors import ToolDefinitionError, ToolUnavailableWarning
from jianmu.tools.base import Tool
from tests.security.servers.answers_http_server import TOOL, answering

pytestmark = pytest.mark.anyio
HOSTILE = "\x1b[2J\x1b]8;;http://e\x07z\x9b31m\u202eq"
RAW = ("\x1b", "\x9b", "\x07", "\u202e")
"""What must never reach a terminal raw: ESC, C1 CSI, BEL, a bidi override."""
SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {HOSTILE: {"type": "strin"}}},  # another vocabulary's
    {"type": "object", "properties": {HOSTILE: {"minLength": "x"}}},  # the meta-schema's
]


def shows_as_written(text: str) -> bool:
    return not any(raw in text for raw in RAW) and "\\u001b[2J" in text


@pytest.mark.parametrize("schema", SCHEMAS)
def test_an_error_names_a_hostile_property_by_its_escapes(schema: dict[str, Any]) -> None:
    with pytest.raises(ToolDefinitionError) as refused:
        Tool.from_schema(lambda **_: None, name="t", description="d", input_schema=schema)
    assert shows_as_written(str(refused.value)), str(refused.value)


async def test_an_mcp_server_s_refused_tool_is_named_in_a_warning_by_its_escapes() -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPToolProvider

    hostile = [{"name": f"bad{i}", "description": "d", "inputSchema": schema}
               for i, schema in enumerate(SCHEMAS)]
    with answering("plain", tools=[*hostile, TOOL]) as server:
        host, port = server.server_address[:2]
        provider = MCPToolProvider("srv", url=f"http://{host!s}:{port}/mcp", timeout=60)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ToolUnavailableWarning)
                await provider.initialize()
            names = [t.name for t in provider.get_tools()]
        finally:
            await provider.close()
    said = [str(w.message) for w in caught if w.category is ToolUnavailableWarning]
    assert names == ["srv__flood"] and len(said) == 2, (names, said)
    assert all(shows_as_written(text) for text in said), said
