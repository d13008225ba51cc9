"""Red team, ``jianmu mcp serve``: a guard checker that asks a person first.

An MCP server has nobody to ask, so a call a checker leaves waiting for a person (PENDING, as
a plug-in checker may answer) is refused, exactly like a call the policy says to confirm;
before, only DENY was refused and the call ran unasked. A real server process
(tests/security/servers/asking_checker_server.py) and the official SDK's client.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.mcp.helpers import REPO, child_env

mcp = pytest.importorskip("mcp")

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).parent / "servers" / "asking_checker_server.py"


def _text(result: object) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")  # type: ignore[attr-defined]


async def test_a_call_a_checker_leaves_to_a_person_never_runs(tmp_path: Path) -> None:
    from mcp.client.stdio import stdio_client

    marker = tmp_path / "wired"
    params = mcp.StdioServerParameters(
        command=sys.executable, args=[str(SERVER), str(marker)], env=child_env(), cwd=str(REPO),
    )
    async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
        await session.initialize()
        for name in ("wire_money", "WIRE_MONEY"):
            refused = await session.call_tool(name, {"amount": 1_000_000})
            assert refused.is_error, _text(refused)
            assert "wires wait for a person" in _text(refused)
        added = await session.call_tool("add", {"a": 2, "b": 3})
        assert not added.is_error and _text(added) == "5"
    assert not marker.exists()
