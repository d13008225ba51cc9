"""Every tool the official ``@modelcontextprotocol/server-everything`` lists, called as a model
would call it, over stdio and streamable HTTP (npm; skipped where npm cannot install it).

Its tool names change between versions, so they are listed first and each is called with
arguments made from its own schema. Each call ends with a result or a clear error: none hangs,
none fails the session (a long operation that ignores a cancel included), and the results a
model reads keep what the server sent: text, structured content, images whole, embedded
resources and resource links that say what they are. The tools that ask the client something
(sampling, elicitation, roots) are registered by the server only for a client declaring that
capability, which Jianmu does not: they are never offered.
"""

from __future__ import annotations

import os
import subprocess
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jianmu.errors import ToolUnavailableWarning
from jianmu.mcp import MCPToolProvider
from jianmu.tools.registry import ToolSet
from tests.mcp.helpers import free_port, wait_for_port

pytestmark = pytest.mark.anyio

QUICK = {"trigger-long-running-operation": {"duration": 1, "steps": 2}}
"""Arguments that keep a slow tool short (its default runs for ten seconds)."""


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """A value for each required parameter, of its type (an enum's first member)."""
    out: dict[str, Any] = {}
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        spec = properties.get(name) or {}
        if spec.get("enum"):
            out[name] = spec["enum"][0]
        else:
            out[name] = {"number": 2, "integer": 2, "boolean": False}.get(spec.get("type"), "x")
    return out


@pytest.fixture(params=["stdio", "http"])
async def everything(request: pytest.FixtureRequest, everything_bin: str) -> AsyncIterator[
    tuple[MCPToolProvider, ToolSet]
]:
    """The server over one transport, and its tools (trust ``all``: the calls run unasked)."""
    server = None
    if request.param == "stdio":
        where: dict[str, Any] = {"command": everything_bin, "args": ["stdio"]}
    else:
        port = free_port()
        server = subprocess.Popen([everything_bin, "streamableHttp"],
                                  env={**os.environ, "PORT": str(port)},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(port, server)  # type: ignore[arg-type]
        except RuntimeError as exc:  # a version that names its HTTP mode otherwise
            pytest.skip(f"mcp-server-everything streamableHttp did not serve: {exc}")
        where = {"url": f"http://127.0.0.1:{port}/mcp"}
    provider = MCPToolProvider("ev", **where, trust="all", timeout=60, connect_timeout=60)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ToolUnavailableWarning)  # its task-only tool
            tools = await ToolSet.from_providers([provider])
        yield provider, tools
    finally:
        await provider.close()
        if server is not None:
            server.kill()
            server.wait(timeout=60)


async def test_every_listed_tool_answers_with_a_result_or_a_clear_error(
    everything: tuple[MCPToolProvider, ToolSet],
) -> None:
    provider, tools = everything
    listed = {t.remote_name: t for t in provider.get_tools()}  # type: ignore[attr-defined]
    assert {"echo", "get-sum", "get-tiny-image", "get-structured-content"} <= set(listed)
    # asked of a client that declares the capability only: never offered to Jianmu's model
    assert not {"trigger-sampling-request", "trigger-elicitation-request",
                "get-roots-list"} & set(listed)
    results = {}
    for remote, made in listed.items():
        args = QUICK.get(remote) or arguments(made.input_schema)
        result = await tools.execute(made.name, args)
        assert result.ok or (result.error or "").strip(), (remote, result)
        results[remote] = result
    assert results["echo"].output == "Echo: x"
    assert [m.kind for m in results["get-tiny-image"].media] == ["image"]
    assert isinstance(results["get-structured-content"].output, dict)
    assert results["trigger-long-running-operation"].ok
    # a link names what it links, not its URI alone
    links = str(results["get-resource-links"].output)
    assert "[resource link demo://resource/" in links and "Resource 1" in links, links


async def test_a_long_operation_that_ignores_its_cancel_leaves_the_session_working(
    everything: tuple[MCPToolProvider, ToolSet],
) -> None:
    """Its operation runs on after the call timed out (it reads no cancel) and answers late;
    the late answer is dropped and the next call runs on the same session."""
    provider, tools = everything
    slow = next(t for t in provider.get_tools()
                if t.remote_name == "trigger-long-running-operation")  # type: ignore[attr-defined]
    slow.timeout_seconds = 0.5
    timed_out = await tools.execute(slow.name, {"duration": 2, "steps": 2})
    assert not timed_out.ok and "did not answer" in (timed_out.error or "")
    connections = provider.client.connections
    slow.timeout_seconds = 60
    # started after the first, it ends after the first's late answer came
    again = await tools.execute(slow.name, {"duration": 2, "steps": 2})
    assert again.ok and "completed" in str(again.output), again
    echoed = await tools.execute("ev__echo", {"message": "still here"})
    assert echoed.ok and echoed.output == "Echo: still here"
    assert provider.client.connections == connections
