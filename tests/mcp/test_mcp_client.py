"""MCPClient and MCPToolProvider against real MCP servers (official SDK) over stdio and HTTP."""

from __future__ import annotations

import io
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.config import AppConfig, MCPServerConfig, parse_config
from jianmu.errors import ConfigError, MCPError, MissingExtraError, ToolInputError
from jianmu.mcp import (
    MCPCallResult,
    MCPClient,
    MCPTool,
    MCPToolProvider,
    mcp_result_value,
    mcp_tool_names,
    providers_from_config,
)
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.calls import MediaPart, ToolOutput
from jianmu.tools.registry import ToolSet
from tests.mcp.helpers import WEATHER, HttpServer, free_port
from tests.support.forked_stdio import stdio_kwargs

SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def weather(*, cold: bool = False, **kwargs: Any) -> MCPToolProvider:
    """The weather server over stdio: forked with the SDK imported (`stdio_kwargs`), or,
    ``cold``, started as ``python weather_server.py`` (tests of the server's own process)."""
    kwargs.setdefault("timeout", 20)
    started = ({"command": sys.executable, "args": [WEATHER, "stdio"]} if cold
               else stdio_kwargs(WEATHER, "stdio"))
    return MCPToolProvider("weather", **started, **kwargs)


@pytest.fixture
async def stdio_tools() -> AsyncIterator[tuple[MCPToolProvider, ToolSet]]:
    # cold: two of its tests kill the server's process
    provider = weather(trust="all", cold=True)  # its hints believed: each hint's mapping shows
    toolset = await ToolSet.from_providers([provider])
    try:
        yield provider, toolset
    finally:
        await provider.close()


# -- names, arguments and configuration (no server) -------------------------------------------


def test_names_are_safe_bounded_unique_and_stable() -> None:
    tools = ["get", "alerts.list", "alerts_list", "x" * 90, "Get", "über/tool", "..."]
    names = mcp_tool_names("my.server", tools)
    # the tool whose name needs no change keeps it, whichever is listed first
    assert names[:3] == ["my_server__get", names[1], "my_server__alerts_list"]
    assert names[1] != names[2] and names[1].startswith("my_server__alerts_list_")
    assert all(SAFE.match(n) for n in names), names
    assert len({n.casefold() for n in names}) == len(names)
    assert len(names[3]) == 64
    assert names == mcp_tool_names("my.server", tools)  # hashes are stable across runs


def test_bad_client_arguments_say_what_to_change() -> None:
    with pytest.raises(ValueError, match="exactly one of command="):
        MCPClient()
    with pytest.raises(ValueError, match="exactly one of command="):
        MCPClient(command="x", url="http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError, match="must start with http"):
        MCPClient(url="ftp://host/mcp")
    with pytest.raises(ValueError, match="positive number of seconds"):
        MCPClient(command="x", timeout=0)
    with pytest.raises(ValueError, match="list of strings"):
        MCPClient(command="x", args="--flag")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty name"):
        MCPToolProvider(" ", command="x")


def test_providers_from_config() -> None:
    config = parse_config(
        "mcp:\n  servers:\n"
        "    weather:\n      command: python\n      args: [server.py]\n      env: {A: b}\n"
        "    remote:\n      url: http://127.0.0.1:9/mcp\n      timeout: 5\n"
    )
    providers = providers_from_config(config)
    assert [(p.name, p.client.transport) for p in providers] == [
        ("weather", "stdio"), ("remote", "http"),
    ]
    assert providers[0].client.args == ["server.py"] and providers[0].client.env == {"A": "b"}
    assert providers[1].client.timeout == 5
    assert providers_from_config(AppConfig()) == []
    with pytest.raises(ConfigError, match=r"mcp\.servers\.both: .*exactly one of command="):
        MCPToolProvider.from_config("both", MCPServerConfig(command="x", url="http://h/mcp"))


def test_get_tools_before_initialize_is_an_error() -> None:
    with pytest.raises(RuntimeError, match=r"await provider\.initialize"):
        weather().get_tools()


def test_result_conversion() -> None:
    assert mcp_result_value(MCPCallResult(structured_content={"a": 1}, content=[
        {"type": "text", "text": '{"a": 1}'}])) == {"a": 1}
    assert mcp_result_value(MCPCallResult(content=[
        {"type": "text", "text": "one"},
        {"type": "image", "mimeType": "image/png", "data": "AAAA"},
    ])) == ToolOutput(value="one", media=(MediaPart(kind="image", mime_type="image/png",
                                                    data="AAAA"),))
    with pytest.raises(Exception, match="went wrong"):
        mcp_result_value(
            MCPCallResult(is_error=True, content=[{"type": "text", "text": "went wrong"}])
        )


def test_call_result_keeps_every_block_as_on_the_wire() -> None:
    from mcp import types

    from jianmu.mcp.data import call_result

    blocks = [
        types.TextContent(type="text", text="plain"),
        types.TextContent(type="text", text="noted",
                          annotations=types.Annotations(audience=["user"], priority=0.5)),
        types.TextContent(type="text", text="meta", _meta={"k": 1}),
        types.ImageContent(type="image", data="AAAA", mime_type="image/png"),
    ]
    got = call_result(types.CallToolResult(content=blocks, structured_content={"a": 1}))
    assert got.content == [
        b.model_dump(by_alias=True, exclude_none=True, mode="json") for b in blocks
    ]
    assert got.content[0] == {"type": "text", "text": "plain"}
    assert got.content[1]["annotations"] == {"audience": ["user"], "priority": 0.5}
    assert got.structured_content == {"a": 1} and got.is_error is False


@pytest.mark.anyio
async def test_missing_extra_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # makes `import mcp` raise ImportError
    with pytest.raises(MissingExtraError, match=r"jianmu\[mcp\]"):
        await weather().initialize()


def test_import_jianmu_does_not_import_mcp() -> None:
    code = (
        "import sys, jianmu, jianmu.mcp\n"
        "bad = [m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- stdio ------------------------------------------------------------------------------------


class TestOneStdioServer:
    """Tests that only list and call a stdio server's tools (none kills it, none changes a
    tool): one server for the class, each test meeting it on its first connection."""

    @pytest.fixture(scope="class")
    @classmethod
    def anyio_backend(cls) -> str:
        """asyncio, for the class: its tests share one loop, so one session serves them."""
        return "asyncio"

    @pytest.fixture(scope="class")
    @classmethod
    async def shared_tools(cls) -> AsyncIterator[tuple[MCPToolProvider, ToolSet]]:
        provider = weather(trust="all")  # its hints believed: the mapping of each hint shows
        toolset = await ToolSet.from_providers([provider])
        try:
            yield provider, toolset
        finally:
            await provider.close()

    @pytest.mark.anyio
    async def test_stdio_tools_keep_schema_and_map_annotations(
        self, shared_tools: tuple[MCPToolProvider, ToolSet],
    ) -> None:
        _, toolset = shared_tools
        assert toolset.names() == [
            "weather__get_forecast", "weather__echo", "weather__delete_station",
            "weather__alerts_list", "weather__server_pid", "weather__wait",
        ]
        forecast = toolset["weather__get_forecast"]
        assert isinstance(forecast, MCPTool) and forecast.remote is True
        assert forecast.get_description().startswith("Forecast for a city")
        assert forecast.input_schema["required"] == ["city"]
        assert forecast.input_schema["properties"]["days"]["default"] == 1
        assert (forecast.category, forecast.permission, forecast.parallel_safe) == (
            "read", "auto", True,
        )
        assert forecast.effect_tags == ("http",) and forecast.max_retries == 2
        assert forecast.metadata["mcp_tool"] == "get_forecast"
        delete = toolset["weather__delete_station"]
        assert (delete.category, delete.permission, delete.parallel_safe) == (
            "dangerous", "user_confirm", False,
        )
        echo = toolset["weather__echo"]  # no hints: the spec's defaults (destructive, open world)
        assert (echo.category, echo.permission, echo.max_retries, echo.effect_tags) == (
            "dangerous", "user_confirm", 0, ("http",),
        )
        assert toolset["weather__alerts_list"].metadata["mcp_tool"] == "alerts.list"
        # runtime objects the executor injects never reach the server
        assert echo.bind_args({"text": "mine"}, {"ctx": object(), "text": "theirs"}) == {
            "text": "mine"}

    @pytest.mark.anyio
    async def test_stdio_calls_structured_text_and_errors(
        self, shared_tools: tuple[MCPToolProvider, ToolSet],
    ) -> None:
        _, toolset = shared_tools
        forecast = await toolset.execute("weather__get_forecast", {"city": "Paris", "days": "3"})
        assert forecast.ok and forecast.output == {"city": "paris", "days": 3,
                                                   "temperature_c": 18.5}
        echo = await toolset.execute("weather__echo", {"text": "hello"})
        assert echo.ok and echo.output == "hello"
        dotted = await toolset.execute("WEATHER__ALERTS_LIST", {"region": "north"})
        assert dotted.ok and dotted.output == "no alerts in north"
        failed = await toolset.execute("weather__get_forecast", {"city": "Atlantis"})
        assert not failed.ok and "unknown city 'Atlantis'" in (failed.error or "")
        bad_args = await toolset.execute("weather__echo", {})
        assert not bad_args.ok and "text" in (bad_args.error or "")

    @pytest.mark.anyio
    async def test_concurrent_calls_share_one_session(
        self, shared_tools: tuple[MCPToolProvider, ToolSet],
    ) -> None:
        provider, toolset = shared_tools
        results: dict[int, Any] = {}

        async def call(i: int) -> None:
            results[i] = await toolset.execute("weather__echo", {"text": f"n{i}"})

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(call, i)
        assert {i: r.output for i, r in results.items()} == {i: f"n{i}" for i in range(8)}
        assert provider.client.connections == 1

    @pytest.mark.anyio
    async def test_mcp_tools_through_the_tool_executor(
        self, shared_tools: tuple[MCPToolProvider, ToolSet],
    ) -> None:
        _, toolset = shared_tools
        exporter = InMemorySpanExporter()
        tracing = TracerProvider()
        tracing.add_span_processor(SimpleSpanProcessor(exporter))
        state = StateManager(AgentState, {"actions": [
            {"id": "a", "name": "weather__get_forecast", "arguments": '{"city": "cairo"}'},
            {"id": "b", "name": "weather__get_forecast", "arguments": {"city": "Atlantis"}},
        ]})
        runner = ReactiveRunner(ToolExecutor(tools=toolset), state, tracer_provider=tracing)
        result = await runner.run(timeout=60)
        assert result.status is RunStatus.SUCCESS
        messages = {m.tool_call_id: m.content for m in state.get("messages")}
        assert '"temperature_c": 31.0' in (messages["a"] or "")
        assert "unknown city 'Atlantis'" in (messages["b"] or "")
        assert state.get("tool_effects") == {"http": 1}
        spans = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
        assert spans and all((s.attributes or {}).get("gen_ai.tool.type") == "extension"
                             for s in spans)


@pytest.mark.anyio
async def test_argument_checks_follow_a_replaced_schema(
    stdio_tools: tuple[MCPToolProvider, ToolSet],
) -> None:
    _, toolset = stdio_tools
    echo = toolset["weather__echo"]
    sent = {"text": "hi"}
    assert echo.bind_args(sent) == sent and echo.bind_args(sent) is not sent
    assert echo.bind_args('{"text": "hi"}') == sent
    for bad in ({"text": 3}, {"text": "hi", "other": 1}, {}, {"text": None}, [1]):
        with pytest.raises(ToolInputError):
            echo.bind_args(bad)
    # a schema the plan cannot cover (a bound) is checked in full, from the next call on
    echo.input_schema = {"type": "object", "required": ["text"],
                         "properties": {"text": {"type": "string", "maxLength": 3}}}
    with pytest.raises(ToolInputError, match="at most 3"):
        echo.bind_args({"text": "long"})
    assert echo.bind_args({"text": "ok"}) == {"text": "ok"}


@pytest.mark.anyio
async def test_timeout_fails_the_call_and_keeps_the_session() -> None:
    # The server starts under its own connect_timeout (30 s by default), so a busy machine
    # cannot fail the handshake; only the hung call gets the short budget, and it never
    # answers whatever the machine's speed.
    provider = weather(timeout=60)
    toolset = await ToolSet.from_providers([provider])
    assert provider.client.connect_timeout == 30
    wait = toolset["weather__wait"]
    try:
        wait.timeout_seconds = 1
        hung = await toolset.execute("weather__wait", {"seconds": 10**6})
        assert not hung.ok and "1s" in (hung.error or "")
        wait.timeout_seconds = 60
        fine = await toolset.execute("weather__wait", {"seconds": 0})
        assert fine.ok and fine.output == "waited 0.0"
        assert provider.client.connections == 1
    finally:
        await provider.close()


def test_connect_timeout_is_its_own_setting() -> None:
    config = parse_config(
        "mcp:\n  servers:\n    slow:\n      command: python\n      timeout: 1\n"
        "      connect_timeout: 120\n      trust: read_only\n"
    )
    (provider,) = providers_from_config(config)
    assert (provider.client.timeout, provider.client.connect_timeout) == (1, 120)
    assert provider.trust == "read_only"
    with pytest.raises(ValueError, match="connect_timeout= must be a positive"):
        MCPClient(command="x", connect_timeout=0)
    with pytest.raises(ConfigError, match=r"mcp\.servers\.slow\.conect_timeout: unknown key; "
                       r"did you mean 'connect_timeout'\?"):
        parse_config("mcp:\n  servers:\n    slow:\n      command: x\n      conect_timeout: 5\n")


class _Closed(logging.Handler):
    """Sets ``seen`` when an MCP client logs that its server closed the connection."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "closed the connection" in record.getMessage():
            self.seen.set()


@pytest.mark.anyio
async def test_a_stdio_server_killed_between_calls_is_started_again_for_the_next(
    stdio_tools: tuple[MCPToolProvider, ToolSet],
) -> None:
    provider, toolset = stdio_tools
    closed = _Closed()
    log = logging.getLogger("jianmu.mcp")
    level = log.level
    log.addHandler(closed)
    log.setLevel(logging.INFO)
    try:
        first_pid = int((await toolset.execute("weather__server_pid")).output)
        os.kill(first_pid, signal.SIGKILL)
        with anyio.fail_after(60):  # between two turns: the client has seen the server go
            await closed.seen.wait()
    finally:
        log.removeHandler(closed)
        log.setLevel(level)
    again = await toolset.execute("weather__echo", {"text": "back"})  # not lost
    assert (again.ok, again.output) == (True, "back")
    assert int((await toolset.execute("weather__server_pid")).output) != first_pid
    assert provider.client.connections == 2


@pytest.mark.anyio
async def test_a_stdio_server_that_dies_under_a_call_fails_it_then_reconnects(
    stdio_tools: tuple[MCPToolProvider, ToolSet],
) -> None:
    provider, toolset = stdio_tools
    pid = int((await toolset.execute("weather__server_pid")).output)
    async with anyio.create_task_group() as tg:
        outcome: list[Any] = []

        async def call() -> None:
            outcome.append(await toolset.execute("weather__wait", {"seconds": 120}))

        tg.start_soon(call)  # sent before the loop next looks at the server's pipe
        os.kill(pid, signal.SIGKILL)
    [failed] = outcome
    assert not failed.ok and "closed the connection" in (failed.error or "")
    assert "next call reconnects" in (failed.error or "")  # it may have run: not sent again
    again = await toolset.execute("weather__echo", {"text": "back"})
    assert again.ok and again.output == "back"
    assert provider.client.connections == 2


@pytest.mark.anyio
async def test_closed_provider_refuses_calls() -> None:
    provider = weather()
    toolset = await ToolSet.from_providers([provider])
    await provider.close()
    await provider.close()  # idempotent
    result = await toolset.execute("weather__echo", {"text": "x"})
    assert not result.ok and "is closed" in (result.error or "")
    with pytest.raises(RuntimeError, match="closed"):
        await provider.initialize()


@pytest.mark.anyio
async def test_unstartable_servers_raise_mcp_error() -> None:
    missing = MCPToolProvider("ghost", command="/nonexistent/jianmu-mcp-server")
    with pytest.raises(MCPError, match=r"could not connect to MCP server 'ghost'.*nonexistent"):
        await missing.initialize()
    quitter = MCPToolProvider("quitter", command=sys.executable, args=["-c", "pass"], timeout=10)
    with pytest.raises(MCPError, match="could not connect to MCP server 'quitter'"):
        await quitter.initialize()


@pytest.mark.anyio
async def test_a_line_on_stdout_that_is_not_json_rpc_names_its_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With several servers, a warning that said only "an MCP stdio server" left the user to
    guess which one printed the line."""
    babbler = MCPToolProvider("babbler", command=sys.executable,
                              args=["-c", "print('Server ready!')"], timeout=10)
    with caplog.at_level(logging.WARNING, logger="mcp.client.stdio"):
        with pytest.raises(MCPError, match="could not connect to MCP server 'babbler'"):
            await babbler.initialize()
    said = [r.getMessage() for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    assert said == ["MCP stdio server 'babbler' wrote a line to stdout that is not JSON-RPC: "
                    "'Server ready!'; a stdio server writes only protocol messages there (its "
                    "logs go to stderr)"]


@pytest.mark.anyio
async def test_a_long_line_from_a_stdio_server_is_read_in_one_piece(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK's reader joined every 64 KiB chunk to the line so far and split it all again:
    a 20 MB result took longer than the call's timeout, and its reading went on after. A line
    past the bound ends the session, not the memory, and the next call starts a new one."""
    import mcp.client.stdio

    from jianmu.mcp._transport import WholeLines

    monkeypatch.setattr(WholeLines, "limit", 3 << 20)

    chunks: list[int] = []

    class Counted(mcp.client.stdio.TextReceiveStream):  # type: ignore[misc]
        async def receive(self) -> str:
            chunk: str = await super().receive()
            chunks.append(len(chunk))
            return chunk

    monkeypatch.setattr(mcp.client.stdio, "TextReceiveStream", Counted)
    text = "é" * (1 << 19)  # 1 MiB of UTF-8 on the wire: 16 chunks of 64 KiB or more
    async with MCPClient(command=sys.executable, args=[WEATHER, "stdio"], timeout=20,
                         name="weather") as client:
        echoed = await client.call_tool("echo", {"text": text})
        assert not echoed.is_error and echoed.text() == text
        assert max(chunks) > len(text)  # the whole line at once
        assert len(chunks) <= 2, chunks  # the handshake's answer, the call's
        with caplog.at_level(logging.WARNING, logger="mcp.client.stdio"):
            with pytest.raises(MCPError, match="closed the connection during tools/call 'echo'"):
                await client.call_tool("echo", {"text": text * 4})
        assert (await client.call_tool("echo", {"text": "again"})).text() == "again"
        assert client.connections == 2
    said = [r.getMessage() for r in caplog.records if "bytes to stdout" in r.getMessage()]
    assert said == ["MCP stdio server 'weather' wrote a line of more than 3,145,728 bytes to "
                    "stdout; its session is closed, and the next call starts the server again"]


def test_provider_outlives_the_event_loop_that_opened_it() -> None:
    provider = weather()

    async def open_() -> ToolSet:
        return await ToolSet.from_providers([provider])

    async def use(toolset: ToolSet) -> Any:
        return await toolset.execute("weather__echo", {"text": "other loop"})

    toolset = anyio.run(open_)
    try:
        assert anyio.run(use, toolset).output == "other loop"
    finally:
        anyio.run(provider.close)


def test_calls_from_trio_run_on_a_private_asyncio_loop() -> None:
    pytest.importorskip("trio")
    provider = weather(timeout=60)

    async def main() -> list[Any]:
        toolset = await ToolSet.from_providers([provider])
        try:
            echo = await toolset.execute("weather__echo", {"text": "from trio"})
            toolset["weather__wait"].timeout_seconds = 1
            hung = await toolset.execute("weather__wait", {"seconds": 10**6})
            return [echo, hung, provider.client.connections]
        finally:
            await provider.close()

    echo, hung, connections = anyio.run(main, backend="trio")
    assert echo.ok and echo.output == "from trio"
    assert not hung.ok and "within 1s" in (hung.error or "") and connections == 1


# -- streamable HTTP --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_http_server_list_call_error_and_restart(http_server: HttpServer) -> None:
    port = free_port()
    proc = http_server([WEATHER], port)
    provider = MCPToolProvider("remote", url=f"http://127.0.0.1:{port}/mcp", timeout=20)
    toolset = await ToolSet.from_providers([provider])
    try:
        assert "remote__get_forecast" in toolset.names()
        forecast = await toolset.execute("remote__get_forecast", {"city": "oslo"})
        assert forecast.ok and forecast.output["temperature_c"] == 4.0
        failed = await toolset.execute("remote__get_forecast", {"city": "Atlantis"})
        assert not failed.ok and "unknown city" in (failed.error or "")
        proc.kill()
        proc.wait(timeout=30)
        lost = await toolset.execute("remote__echo", {"text": "gone"})
        assert not lost.ok and "next call reconnects" in (lost.error or "")
        http_server([WEATHER], port)
        back = await toolset.execute("remote__echo", {"text": "back"})
        assert back.ok and back.output == "back"
        assert provider.client.connections == 2
    finally:
        await provider.close()


@pytest.mark.anyio
async def test_http_unreachable_url_raises_mcp_error() -> None:
    provider = MCPToolProvider("nobody", url=f"http://127.0.0.1:{free_port()}/mcp", timeout=10)
    with pytest.raises(MCPError, match=r"could not connect to MCP server 'nobody'.*URL"):
        await provider.initialize()


# -- more servers of their own (the ToolExecutor's test is in TestOneStdioServer) -----------


@pytest.mark.anyio
async def test_initialize_can_be_retried_once_the_server_is_up(http_server: HttpServer) -> None:
    port = free_port()
    provider = MCPToolProvider("late", url=f"http://127.0.0.1:{port}/mcp", timeout=20)
    with pytest.raises(MCPError, match="could not connect"):
        await provider.initialize()
    http_server([WEATHER], port)
    try:
        await provider.initialize()
        assert "late__echo" in [t.name for t in provider.get_tools()]
    finally:
        await provider.close()


@pytest.mark.anyio
async def test_stderr_without_a_file_descriptor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # e.g. a notebook or captured output
    provider = weather(cold=True)  # the server's stderr, as the SDK gives it
    toolset = await ToolSet.from_providers([provider])
    try:
        assert (await toolset.execute("weather__echo", {"text": "quiet"})).output == "quiet"
    finally:
        await provider.close()


@pytest.mark.anyio
async def test_arguments_named_like_injected_values_reach_the_server() -> None:
    """A server's ``state``/``ctx``/``call_id``/``context`` get the model's values, never the
    runtime's objects, through the executor as through a direct call."""
    import json

    script = os.path.join(os.path.dirname(WEATHER), "address_server.py")
    provider = MCPToolProvider(
        "addr", command=sys.executable, args=[script], timeout=20, trust="read_only"
    )
    toolset = await ToolSet.from_providers([provider])
    try:
        sent = {"state": "NY", "ctx": "c", "call_id": "model-id", "context": "x"}
        state = StateManager(AgentState, {"actions": [
            {"id": "a", "name": "addr__set_address", "arguments": dict(sent)},
        ]})
        runner = ReactiveRunner(ToolExecutor(tools=toolset), state)
        result = await runner.run(timeout=60)
        assert result.status is RunStatus.SUCCESS
        (message,) = state.get("messages")
        assert json.loads(message.content or "") == sent
        direct = await toolset.execute("addr__set_address", dict(sent),
                                       injected={"state": state.root, "ctx": runner.ctx})
        assert json.loads(direct.text) == sent
    finally:
        await provider.close()
