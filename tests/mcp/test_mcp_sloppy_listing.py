"""A sloppy server's listing: its good tools work, each broken one is named and skipped.

The SDK checked the whole ``tools/list`` answer at once, so one broken tool (an input schema
that is a string, no name, a number for a description, an entry that is not an object) made
every tool of the server unusable. A real server process over stdio
(tests/mcp/servers/sloppy_server.py, bare JSON-RPC: the SDK would not send such a list), two
pages long.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

from jianmu.errors import ToolUnavailableWarning
from jianmu.mcp import MCPClient, MCPToolProvider
from jianmu.tools.registry import ToolSet

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
SLOPPY = str(Path(__file__).parent / "servers" / "sloppy_server.py")


async def test_the_good_tools_of_every_page_are_listed_and_the_bad_ones_named() -> None:
    async with MCPClient(command=sys.executable, args=[SLOPPY], name="sloppy") as client:
        infos = await client.list_tools()
        assert [i.name for i in infos] == ["good_one", "extra_field", "good_two"]
        skipped = "\n".join(client.skipped_tools)
        assert len(client.skipped_tools) == 6
        twice = "'good_one' of server 'sloppy' is listed more than once; the first is kept"
        assert twice in skipped
        assert "'schema_string'" in skipped and "inputSchema" in skipped
        assert "'number_description'" in skipped and "description" in skipped
        assert "'odd_dialect'" in skipped
        assert "no name" in skipped  # the nameless one, by its place in the listing
        assert "not an object" in skipped  # the 42
        assert "an object, honestly" not in skipped  # what was sent is not echoed
        done = await client.call_tool("good_two", {"text": "hi"})
        assert done.text() == 'good_two got {"text": "hi"}'


async def test_a_provider_offers_the_good_tools_and_warns_of_each_bad_one() -> None:
    provider = MCPToolProvider("sloppy", command=sys.executable, args=[SLOPPY], trust="all")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ToolUnavailableWarning)
            tools = await ToolSet.from_providers([provider])
        said = [str(w.message) for w in caught if w.category is ToolUnavailableWarning]
        assert sorted(t.name for t in tools) == [
            "sloppy__extra_field", "sloppy__good_one", "sloppy__good_two"
        ]
        assert len(said) == 6 and all("'sloppy'" in s and "skipped" in s for s in said)
        assert any("'schema_string'" in s for s in said)
        good = tools.get("sloppy__good_one")
        assert good is not None
        assert await good.run(text="x") == 'good_one got {"text": "x"}'
        assert good.description == "a good tool"  # the first of a name listed twice
        # listing again (after tools/list_changed) names them again, and keeps the good ones
        with warnings.catch_warnings(record=True) as again:
            warnings.simplefilter("always", ToolUnavailableWarning)
            assert len(await provider.refresh()) == 3
        assert len([w for w in again if w.category is ToolUnavailableWarning]) == 6
    finally:
        await provider.close()


async def test_a_listing_of_only_broken_tools_is_empty_not_an_error() -> None:
    async with MCPClient(command=sys.executable, args=[SLOPPY, "all_bad"]) as client:
        assert await client.list_tools() == []
        assert len(client.skipped_tools) == 2
