"""Red team, MCP client: a stdio server's helper processes outlive it.

The SDK stops a stdio server by closing its stdin and, only when the server has not exited
within its grace period, by killing its process group. A server that exits at once, as the
spec asks, left every process it had started (a language server, a browser, a ``sleep``)
running after the client closed, and so did a server that crashed under a call: orphans that
no run owns and nothing ever stops. The server's process group is now killed once its session
ends, whether the server exited, crashed or had to be killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
from pathlib import Path

import pytest

from jianmu.errors import MCPError
from jianmu.mcp import MCPClient

pytestmark = pytest.mark.anyio
SERVER = str(Path(__file__).parent / "servers" / "helpers_server.py")
WITHIN = 15.0  # the SDK's shutdown (about 6 s at worst) and a few seconds more


def ended(pid: int, within: float = WITHIN) -> bool:
    """Whether process ``pid`` (not our child) ends within ``within`` seconds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], within)  # readable once it exits
        return bool(readable)
    finally:
        os.close(fd)


async def spawned(client: MCPClient) -> int:
    result = await client.call_tool("spawn", {})
    assert not result.is_error, result
    return int(json.loads(result.content[0]["text"]))


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd_open: Linux")
async def test_closing_the_client_ends_the_processes_its_server_started() -> None:
    client = MCPClient(command=sys.executable, args=[SERVER], name="helpers")
    await client.connect()
    helper = await spawned(client)
    try:
        await client.close()
        assert ended(helper), "the server's helper outlived the closed client"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, 9)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd_open: Linux")
async def test_a_server_that_crashed_leaves_no_helper_once_the_next_call_reconnects() -> None:
    client = MCPClient(command=sys.executable, args=[SERVER], name="helpers")
    await client.connect()
    helper = await spawned(client)
    try:
        with pytest.raises(MCPError):
            await client.call_tool("crash", {})
        fresh = await spawned(client)  # a new server: the dead one's session is over
        assert ended(helper), "the crashed server's helper outlived its session"
        assert not ended(fresh, within=0), "the live server's helper must stay"
        await client.close()
        assert ended(fresh)
    finally:
        await client.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, 9)
