"""MCP resources and prompts: `MCPClient` and the read-only resource tools, against SDK servers
and, where npm can install it, the official ``@modelcontextprotocol/server-everything``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest

from jianmu.config import AppConfig, MCPConfig, MCPServerConfig
from jianmu.errors import MCPError, ToolUnavailableWarning
from jianmu.mcp import MCPClient, MCPToolProvider, resource_tools
from jianmu.mcp.resources import template_pattern
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.runtime.context import RunContext
from jianmu.skills.node import connect_mcp_tools
from jianmu.tools.registry import ToolSet
from tests.mcp.helpers import HERE, NOTES
from tests.support.forked_stdio import stdio_kwargs

DOCS_ONLY = str(HERE / "servers" / "docs_only_server.py")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for the whole module: its tests share one loop, so `notes` can be one."""
    return "asyncio"


@pytest.fixture(scope="module")
async def notes() -> AsyncIterator[MCPClient]:
    """One notes server for the module: its tests list and read, and nothing they do changes
    what it serves."""
    client = MCPClient(**stdio_kwargs(NOTES, "stdio"), name="notes", timeout=20)
    try:
        yield client
    finally:
        await client.close()


@pytest.mark.anyio
async def test_client_lists_and_reads_resources_and_prompts(notes: MCPClient) -> None:
    listed = {r.uri: r for r in await notes.list_resources()}
    assert listed["notes://readme"].mime_type == "text/markdown"
    [text] = await notes.read_resource("notes://readme")
    assert text.text == "# Notes\nRead me first." and text.describe() == text.text
    [blob] = await notes.read_resource("notes://logo")
    assert blob.blob == bytes(range(256)) * 4
    assert blob.describe() == "[binary resource notes://logo: image/png, 1024 bytes]"

    [prompt] = await notes.list_prompts()
    assert prompt.name == "summarise"
    assert prompt.arguments == [{"name": "topic", "required": True}]
    filled = await notes.get_prompt("summarise", {"topic": "owls"})
    assert filled.messages[0]["role"] == "user"
    assert filled.text() == "Summarise what the notes say about owls."
    with pytest.raises(MCPError, match="prompts/get 'nope'"):
        await notes.get_prompt("nope")
    with pytest.raises(MCPError, match="resources/read"):
        await notes.read_resource("notes://missing")


@pytest.mark.anyio
async def test_resource_tools_are_read_only_and_confined(notes: MCPClient) -> None:
    tools = ToolSet(resource_tools({"notes": notes}))
    listing, reading = tools["mcp_list_resources"], tools["mcp_read_resource"]
    for tool in (listing, reading):
        assert (tool.category, tool.permission, tool.parallel_safe) == ("read", "auto", True)
        assert tool.input_schema["properties"]["server"]["enum"] == ["notes"]
    out = await tools.execute("mcp_list_resources", {"server": "notes"})
    assert out.ok and "notes://readme — readme (text/markdown)" in str(out.output)
    out = await tools.execute("mcp_read_resource", {"server": "notes", "uri": "notes://logo"})
    assert out.ok and out.output == "[binary resource notes://logo: image/png, 1024 bytes]"
    # a URI the server does not list never reaches it; an unknown server is refused
    out = await tools.execute("mcp_read_resource", {"server": "notes", "uri": "file:///etc/passwd"})
    assert not out.ok and "does not list the resource" in str(out.error)
    out = await tools.execute("mcp_list_resources", {"server": "elsewhere"})
    assert not out.ok


def test_template_patterns() -> None:
    one = template_pattern("demo://resource/dynamic/text/{resourceId}")
    assert one.fullmatch("demo://resource/dynamic/text/7")
    assert not one.fullmatch("demo://resource/dynamic/text/7/../../x")
    assert template_pattern("file:///{+path}").fullmatch("file:///a/b.txt")


@pytest.mark.anyio
async def test_skill_runs_get_the_resource_tools_without_approval() -> None:
    server = MCPServerConfig(**stdio_kwargs(NOTES, "stdio"), timeout=20)
    ctx = RunContext(config=AppConfig(mcp=MCPConfig(servers={"notes": server})))
    executor = ToolExecutor()
    try:
        skill = SimpleNamespace(tools=["notes"])
        await connect_mcp_tools([skill], ctx, lambda: None, executor)  # type: ignore[list-item]
        names = executor.visible_toolset().names()
        assert {"mcp_list_resources", "mcp_read_resource", "notes__add_tool"} <= set(names)
        # the server's own tool asks first (trust none); the resource reader does not
        assert executor.toolset["notes__add_tool"].permission == "user_confirm"
        result = await executor.toolset.execute(
            "mcp_read_resource", {"server": "notes", "uri": "notes://readme"}
        )
        assert result.ok and result.output == "# Notes\nRead me first."
    finally:
        for closer in ctx.closers:
            await closer()


# -- the official "everything" server from npm --------------------------------------------------


@pytest.mark.anyio
async def test_official_everything_server(everything_bin: str) -> None:
    provider = MCPToolProvider(
        "everything", command=everything_bin, args=["stdio"], timeout=60, connect_timeout=60
    )
    try:
        # its one tool that only runs as a task is left out, saying why
        with pytest.warns(ToolUnavailableWarning, match="simulate-research-query"):
            await provider.initialize()
        client = provider.client
        listed = await client.list_resources()
        document = next(r for r in listed if r.uri.endswith("architecture.md"))
        [part] = await client.read_resource(document.uri)
        assert part.text and part.text.startswith("# Everything Server")
        prompts = {p.name: p for p in await client.list_prompts()}
        filled = await client.get_prompt("args-prompt", {"city": "Oslo"})
        assert "args-prompt" in prompts and "Oslo" in filled.text()

        tools = ToolSet(resource_tools([provider]))
        out = await tools.execute("mcp_list_resources", {"server": "everything"})
        assert out.ok and "template demo://resource/dynamic/blob/{resourceId}" in str(out.output)
        out = await tools.execute(
            "mcp_read_resource", {"server": "everything", "uri": "demo://resource/dynamic/blob/3"}
        )
        assert out.ok and str(out.output).startswith("[binary resource demo://resource/dynamic/")
        out = await tools.execute(
            "mcp_read_resource", {"server": "everything", "uri": "demo://resource/dynamic/text/2"}
        )
        assert out.ok and "2" in str(out.output) and not str(out.output).startswith("[binary")
    finally:
        await provider.close()


@pytest.mark.anyio
async def test_a_server_of_resources_only_has_no_tools_and_its_resources_are_read() -> None:
    """It declares no ``tools`` capability and refuses ``tools/list``: that failed the whole
    provider, so a skill naming the server could not run even its resource tools."""
    provider = MCPToolProvider("docs", **stdio_kwargs(DOCS_ONLY), timeout=20)
    try:
        assert (await ToolSet.from_providers([provider])).names() == []
        tools = ToolSet(resource_tools({"docs": provider.client}))
        read = await tools.execute("mcp_read_resource", {"server": "docs", "uri": "docs://readme"})
        assert read.ok and read.output == "Read me.", read
    finally:
        await provider.close()
