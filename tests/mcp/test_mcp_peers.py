"""Jianmu's MCP client against peers nobody here wrote, as a user's runs meet them.

- A tool that requires task-augmented calls (``execution.taskSupport: required``, MCP
  2025-11-25) cannot be called by a client that does not take tasks: the server refuses every
  plain call. It is left out, with a warning saying why, not offered to the model.
- A streamable-HTTP server that forgot our session (restarted while we were idle) answers
  ``404``; the spec asks the client to start a new session, so the call runs on one.
- Two providers whose tools would share a name (two servers of one name) are refused, not
  merged with one server's tools silently answering for the other's.
- The official ``@modelcontextprotocol/server-everything`` (npm; skipped where npm cannot
  install it) through an `Agent`'s ReAct run: text, sums, structured content, an image.
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from jianmu import Agent, ScriptedLLM
from jianmu.config import AppConfig, MCPConfig, MCPServerConfig
from jianmu.errors import ToolUnavailableWarning, ToolValidationError
from jianmu.mcp import MCPToolProvider
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.runtime.context import RunContext
from jianmu.skills.node import connect_mcp_tools
from jianmu.tools.registry import ToolSet
from tests.mcp.helpers import WEATHER, HttpServer, free_port

pytestmark = pytest.mark.anyio
TASKS = str(Path(__file__).parent / "servers" / "tasks_server.py")


async def test_a_tool_that_requires_tasks_is_left_out_saying_why() -> None:
    provider = MCPToolProvider("jobs", command=sys.executable, args=[TASKS], timeout=30)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ToolUnavailableWarning)
            tools = await ToolSet.from_providers([provider])
        assert tools.names() == ["jobs__quick", "jobs__plain"]
        [warning] = [str(w.message) for w in caught if w.category is ToolUnavailableWarning]
        assert "'job'" in warning and "task" in warning
        quick = await tools.execute("jobs__quick", {})
        assert quick.ok and quick.output == "quick ran"
    finally:
        await provider.close()


async def test_an_http_server_that_forgot_the_session_gets_a_new_one(
    http_server: HttpServer, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcp.client")
    port = free_port()
    first = http_server([WEATHER], port)
    provider = MCPToolProvider("remote", url=f"http://127.0.0.1:{port}/mcp", timeout=30,
                               trust="read_only")
    tools = await ToolSet.from_providers([provider])
    try:
        assert (await tools.execute("remote__echo", {"text": "one"})).output == "one"
        first.kill()  # restarted between two turns: the new process knows no session
        first.wait(timeout=30)
        second = http_server([WEATHER], port)
        again = await tools.execute("remote__echo", {"text": "two"})
        assert (again.ok, again.output, again.error) == (True, "two", None)
        assert provider.client.connections == 2
        second.kill()  # and a listing (not a call) is the first to meet the new process
        second.wait(timeout=30)
        http_server([WEATHER], port)
        listed = await provider.refresh()
        assert "remote__echo" in [t.name for t in listed]
        assert provider.client.connections == 3
    finally:
        await provider.close()
    # the old session's end (its DELETE) is answered 404, as the spec says for a session the
    # server does not know: what the client wanted, not a warning on the user's terminal
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [m for m in said if "Session termination failed" in m], said


async def test_providers_whose_tools_share_a_name_are_refused() -> None:
    one = MCPToolProvider("jobs", command=sys.executable, args=[TASKS], timeout=30)
    two = MCPToolProvider("Jobs", command=sys.executable, args=[TASKS], timeout=30)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ToolUnavailableWarning)
            assert (await ToolSet.from_providers([one, one])).names() == [
                "jobs__quick", "jobs__plain"
            ]  # the same provider twice gives the same tools: nothing clashes
            with pytest.raises(ToolValidationError, match=r"(?s)Jobs__quick.*'jobs'.*'Jobs'"):
                await ToolSet.from_providers([one, two])
    finally:
        await one.close()
        await two.close()


# -- the official "everything" server from npm --------------------------------------------------


async def test_an_agent_runs_the_official_everything_server(everything_bin: str) -> None:
    provider = MCPToolProvider("ev", command=everything_bin, args=["stdio"], trust="read_only",
                               timeout=60, connect_timeout=20)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ToolUnavailableWarning)
            tools = await ToolSet.from_providers([provider])
        names = tools.names()
        assert {"ev__echo", "ev__get-sum", "ev__get-tiny-image"} <= set(names)
        # it requires tasks, which Jianmu does not take: never offered to the model
        assert "ev__simulate-research-query" not in names
        assert any("simulate-research-query" in str(w.message) for w in caught)
        llm = ScriptedLLM([
            [{"name": "ev__echo", "arguments": {"message": "hi"}},
             {"name": "ev__get-sum", "arguments": {"a": 2, "b": 3}},
             {"name": "ev__get-structured-content", "arguments": {"location": "Chicago"}},
             {"name": "ev__get-tiny-image", "arguments": {}}],
            "done",
        ])
        result = await Agent(llm, tools=tools, interactive=False).run("try them")
        assert result.output == "done", result.error
        seen = [m for m in result.messages if m.role == "tool"]
        assert [m.content for m in seen[:2]] == ["Echo: hi", "The sum of 2 and 3 is 5."]
        assert '"humidity": 82' in (seen[2].content or "")
        assert [(p.kind, p.mime_type) for p in seen[3].media] == [("image", "image/png")]
    finally:
        await provider.close()



async def test_the_servers_a_skill_names_start_together(tmp_path: Path) -> None:
    # each server answers its handshake only once all three have started: started one by
    # one, the first would wait for the others until its connect_timeout
    rendezvous = str(Path(__file__).parent / "servers" / "rendezvous_server.py")
    folder = tmp_path / "started"
    folder.mkdir()
    names = ("alpha", "beta", "gamma")
    servers = {
        n: MCPServerConfig(command=sys.executable, args=[rendezvous, str(folder), "3", n],
                           timeout=60, connect_timeout=20)
        for n in names
    }
    ctx = RunContext(config=AppConfig(mcp=MCPConfig(servers=servers)))
    executor = ToolExecutor()
    try:
        skill = SimpleNamespace(tools=list(names))
        await connect_mcp_tools([skill], ctx, lambda: None, executor)  # type: ignore[list-item]
        served = [n for n in executor.visible_toolset().names() if "__" in n]
        assert served == ["alpha__whoami", "beta__whoami", "gamma__whoami"]  # the skill's order
        result = await executor.toolset.execute("gamma__whoami", {})
        assert result.output == "gamma"
    finally:
        for closer in ctx.closers:
            await closer()
