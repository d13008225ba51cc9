"""Red team, MCP client: a resource template that backtracks.

``mcp_read_resource`` reads only what a server lists: a listed URI, or one that fits one of
its URI templates. The template is the server's, and it was matched as a Python regex on the
event loop: ``r://{+p0}a{+p1}a...Z`` is ``.*a.*a...Z``, and a URI of ``a``'s took longer than
any run to refuse, with the loop (and so every timeout of the run) stopped. Templates are
matched by RE2 now, in linear time. A real server over stdio
(tests/security/servers/templates_server.py), called through `ToolExecutor`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).parent / "servers" / "templates_server.py"
RUN_TIMEOUT = 60.0


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_a_backtracking_template_refuses_a_uri_at_once() -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPToolProvider, resource_tools

    provider = MCPToolProvider("tpl", command=sys.executable, args=[str(SERVER)],
                               timeout=RUN_TIMEOUT)
    try:
        await provider.client.connect()
        tools = ToolSet(resource_tools([provider]))
        calls = [
            {"id": "trap", "name": "mcp_read_resource",
             "arguments": {"server": "tpl", "uri": "r://" + "a" * 200}},
            {"id": "fits", "name": "mcp_read_resource",
             "arguments": {"server": "tpl", "uri": "r://" + "xa" * 24 + "Z"}},
            {"id": "listed", "name": "mcp_read_resource",
             "arguments": {"server": "tpl", "uri": "notes://readme"}},
        ]
        state = StateManager(AgentState, {"actions": calls})
        runner = ReactiveRunner(ToolExecutor(tools=tools), state, interactive=False)
        result = await runner.run(timeout=RUN_TIMEOUT)
    finally:
        await provider.close()
    assert result.status is RunStatus.SUCCESS, result.error
    seen = {m.tool_call_id: m.content or "" for m in state.get("messages")}
    assert "does not list the resource" in seen["trap"]
    assert seen["fits"] == "read r://" + "xa" * 24 + "Z"
    assert seen["listed"] == "read notes://readme"
