"""Red team, MCP client: a server whose answers misbehave.

A real server over stdio (tests/security/servers/outputs_server.py), its tools called through
`ToolExecutor` under a `ReactiveRunner`, as a model's actions would be.

- Media travel whole to the model, so what a server sends as media is checked at the door:
  data that is not base64 (every later request of the run would carry it, and a model API
  refuses the request) or a type that is not of its kind (``text/html`` as an image) is
  described in the text instead, and so are parts past `MAX_MEDIA_PARTS` or `MAX_MEDIA_CHARS`
  a result (a server could fill the run's state, its checkpoints and every request).
- An output schema is the server's too, and the SDK's client checks each result against it
  on the event loop, matching ``pattern`` with Python's ``re``: ``^(a+)+$`` on the answer
  ``'a' * 40 + '!'`` stopped the loop (and every timeout) for ages. A result is checked as the
  tools' arguments are (RE2, references inside the schema only), whoever calls, and an output
  schema that breaks those rules makes the tool refused when listed.
- A server's requests to the client (sampling, elicitation, roots) are refused; a flood of
  log and progress notifications does not stop the answer; structured content nested deeper
  than the run's records walk is still one observation.
"""

from __future__ import annotations

import base64
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.errors import MCPError, ToolUnavailableWarning
from jianmu.llm.messages import Message
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.registry import ToolSet
from tests.support.forked_stdio import stdio_kwargs

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).parent / "servers" / "outputs_server.py"
RUN_TIMEOUT = 60.0


SKIPPED: list[str] = []


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for the whole module: its tests share one loop, so one server serves them."""
    return "asyncio"


@pytest.fixture(scope="module")
async def tools() -> AsyncIterator[ToolSet]:
    """The server's tools, one server for the module: it keeps nothing between calls, and
    each test reads only the answers to its own calls (the tools refused at listing are in
    ``SKIPPED``)."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPToolProvider

    provider = MCPToolProvider(
        "out", **stdio_kwargs(str(SERVER)), trust="read_only",
        timeout=RUN_TIMEOUT,
    )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ToolUnavailableWarning)
            listed = await ToolSet.from_providers([provider])
        SKIPPED[:] = [str(w.message) for w in caught if w.category is ToolUnavailableWarning]
        yield listed
    finally:
        await provider.close()


async def _messages(tools: ToolSet, *names: str) -> dict[str, Message]:
    calls: list[dict[str, Any]] = [
        {"id": name, "name": f"out__{name}", "arguments": {}} for name in names
    ]
    state = StateManager(AgentState, {"actions": calls})
    runner = ReactiveRunner(ToolExecutor(tools=tools), state, interactive=False)
    result = await runner.run(timeout=RUN_TIMEOUT)
    assert result.status is RunStatus.SUCCESS, result.error
    return {m.tool_call_id or "": m for m in state.get("messages")}


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_media_that_is_not_base64_or_not_of_its_kind_is_described_not_carried(
    tools: ToolSet,
) -> None:
    seen = await _messages(tools, "not_base64")
    message = seen["not_base64"]
    assert not message.media
    text = message.content or ""
    assert text.startswith("two odd images")
    assert text.count("not shown") == 2 and "not base64" in text and "text/html" in text
    assert "%%%" not in text


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_media_past_the_bounds_of_a_result_are_described_not_carried(
    tools: ToolSet, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jianmu.mcp import data

    seen = await _messages(tools, "many_images")
    carried = seen["many_images"].media
    assert len(carried) == data.MAX_MEDIA_PARTS < 30
    assert all(base64.b64decode(p.data, validate=True)[:4] == b"\x89PNG" for p in carried)
    assert (seen["many_images"].content or "").count("not shown") == 30 - len(carried)
    one = len(carried[0].data)
    monkeypatch.setattr(data, "MAX_MEDIA_CHARS", 3 * one)
    seen = await _messages(tools, "many_images")
    assert len(seen["many_images"].media) == 3
    assert (seen["many_images"].content or "").count("not shown") == 27


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_server_requests_are_refused_and_floods_and_depth_do_not_stop_the_run(
    tools: ToolSet,
) -> None:
    seen = await _messages(
        tools, "ask_model", "ask_user", "ask_roots", "log_flood", "deep_structured", "echo",
    )
    for name in ("ask_model", "ask_user", "ask_roots"):
        assert (seen[name].content or "").startswith(f"{name} refused: MCPError"), seen[name]
    assert seen["log_flood"].content == "log_flood answered: flooded"
    assert (seen["deep_structured"].content or "").startswith('{"inner": {"inner"')
    assert seen["echo"].content == "echo answered: echo"


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_an_output_schema_that_backtracks_or_reaches_out_holds_no_run(
    tools: ToolSet,
) -> None:
    assert any("out__remote_output" in w and "output schema" in w
               and "does not point inside" in w for w in SKIPPED), SKIPPED
    assert "out__remote_output" not in tools.names()
    seen = await _messages(tools, "backtrack_output", "echo")
    assert "does not match" in (seen["backtrack_output"].content or "")
    assert seen["echo"].content == "echo answered: echo"


@pytest.mark.timeout(RUN_TIMEOUT + 1)
async def test_a_result_is_checked_against_its_output_schema_in_linear_time() -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPClient

    async with MCPClient(**stdio_kwargs(str(SERVER)), name="out",
                         timeout=RUN_TIMEOUT) as client:
        await client.list_tools()
        with pytest.raises(MCPError, match="does not match"):
            await client.call_tool("backtrack_output")  # the SDK checks it: RE2 matches
        with pytest.raises(MCPError, match="does not point inside"):
            await client.call_tool("remote_output")
        assert (await client.call_tool("echo")).text() == "echo answered: echo"
