"""Red team, MCP client: a server whose listings never end.

Every page of its tools and resources holds 2,000 entries and a cursor to the next. The
client followed up to a thousand pages: two million tools in memory, each schema checked,
minutes before the run could start. A listing now stops past `MAX_LISTED` entries with an
`MCPError` naming the server. A server that answers each empty page just in time, forever,
is stopped by ``connect_timeout``, which bounds a whole listing, not each page. A real server
over stdio (tests/security/servers/paging_server.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.errors import MCPError
from tests.support.forked_stdio import stdio_kwargs

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).parent / "servers" / "paging_server.py"
TIMEOUT = 60.0


@pytest.mark.timeout(TIMEOUT + 1)
async def test_an_endless_listing_stops_with_a_clear_error() -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPClient
    from jianmu.mcp.data import MAX_LISTED

    async with MCPClient(**stdio_kwargs(str(SERVER)), name="paging",
                         timeout=TIMEOUT, connect_timeout=TIMEOUT) as client:
        with pytest.raises(MCPError, match=f"more than {MAX_LISTED:,}") as refused:
            await client.list_tools()
        assert "'paging'" in str(refused.value)
        with pytest.raises(MCPError, match=f"more than {MAX_LISTED:,}"):
            await client.list_resources()


@pytest.mark.timeout(TIMEOUT + 1)
async def test_a_listing_is_bounded_by_connect_timeout_whatever_its_pages() -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPClient

    async with MCPClient(**stdio_kwargs(str(SERVER), "slow"), name="paging",
                         timeout=TIMEOUT, connect_timeout=3) as client:
        with pytest.raises(MCPError, match="within 3s") as refused:
            await client.list_tools()
        assert "'paging'" in str(refused.value) and "connect_timeout" in str(refused.value)
