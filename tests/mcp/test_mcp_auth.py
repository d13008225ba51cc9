"""Headers and bearer auth for streamable-HTTP MCP servers: sent on every request, never shown."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from jianmu.config import MCPServerConfig, parse_config
from jianmu.errors import ConfigError, MCPError
from jianmu.mcp import MCPClient, MCPToolProvider
from tests.mcp.helpers import NOTES, HttpServer, free_port

TOKEN = "s3cr3t-t0ken-7f2a9c"


@pytest.fixture
def guarded_url(http_server: HttpServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A notes server that answers 401 without ``Bearer TOKEN`` and ``X-Team: blue``."""
    port = free_port()
    monkeypatch.setenv("NOTES_TOKEN", TOKEN)
    http_server([NOTES], port)
    monkeypatch.delenv("NOTES_TOKEN")
    yield f"http://127.0.0.1:{port}/mcp"


def _config(url: str) -> str:
    return (
        "mcp:\n  servers:\n    notes:\n"
        f"      url: {url}\n      timeout: 20\n"
        "      headers:\n        X-Team: ${TEAM}\n"
        "      auth:\n        type: bearer\n        token: ${NOTES_API_TOKEN}\n"
    )


@pytest.mark.anyio
async def test_refused_without_the_token_with_a_clear_error(
    guarded_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = MCPClient(url=guarded_url, name="notes", headers={"X-Team": "blue"},
                      bearer_token="wrong-" + TOKEN, connect_timeout=20)
    with pytest.raises(MCPError) as info:
        await wrong.connect()
    await wrong.close()
    text = str(info.value)
    assert "401 Unauthorized" in text and "mcp.servers.notes.auth" in text, text
    assert "Authorization" in text and TOKEN not in text
    assert TOKEN not in repr(wrong) and TOKEN not in caplog.text

    bare = MCPClient(url=guarded_url, name="notes", connect_timeout=20)
    with pytest.raises(MCPError, match=r"401 Unauthorized \(no headers sent\)"):
        await bare.connect()
    await bare.close()


@pytest.mark.anyio
async def test_config_headers_and_bearer_token_reach_every_request(
    guarded_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TEAM", "blue")
    monkeypatch.setenv("NOTES_API_TOKEN", TOKEN)
    config = parse_config(_config(guarded_url))
    server = config.mcp.servers["notes"]
    for shown in (repr(config), str(config), repr(server), server.model_dump_json()):
        assert TOKEN not in shown and "blue" not in shown
    provider = MCPToolProvider.from_config("notes", server)
    try:
        await provider.initialize()  # the handshake and tools/list
        tool = {t.name: t for t in provider.get_tools()}["notes__add_tool"]
        # a call, then a resource read: later requests carry the headers too
        assert await tool.run(name="extra") == "added extra"
        assert [r.uri for r in await provider.client.list_resources()] == [
            "notes://readme", "notes://logo",
        ]
    finally:
        await provider.close()
    for shown in (repr(provider), repr(provider.client), repr(provider.client._headers)):
        assert TOKEN not in shown
    assert TOKEN not in caplog.text


def test_secrets_stay_out_of_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTES_API_TOKEN", TOKEN)
    bad = (
        "mcp:\n  servers:\n    notes:\n      url: http://127.0.0.1:1/mcp\n"
        "      auth: Bearer ${NOTES_API_TOKEN}\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(bad)
    assert "mcp.servers.notes.auth" in str(info.value) and TOKEN not in str(info.value)
    with pytest.raises(ConfigError, match="is not set"):
        os.environ.pop("NOTES_API_TOKEN")
        parse_config(_config("http://127.0.0.1:1/mcp").replace("${TEAM}", "blue"))


def test_headers_are_for_http_servers_only() -> None:
    with pytest.raises(ValueError, match="streamable-HTTP servers"):
        MCPClient(command="x", bearer_token=TOKEN)
    with pytest.raises(ValueError, match="valid HTTP header name") as info:
        MCPClient(url="http://127.0.0.1:1/mcp", headers={"Bad Name": TOKEN})
    assert TOKEN not in str(info.value)
    with pytest.raises(ValueError, match="one-line") as info:
        MCPClient(url="http://127.0.0.1:1/mcp", headers={"X-A": TOKEN + "\r\nX-B: 1"})
    assert TOKEN not in str(info.value)
    # in a config file, refused as it loads, with its line
    with pytest.raises(ConfigError, match=r":3: mcp\.servers\.s: headers and auth are for a url"):
        parse_config("mcp:\n  servers:\n    s:\n      command: x\n      headers: {A: b}\n")
    server = MCPServerConfig(command="x", headers={"A": "b"})
    with pytest.raises(ConfigError, match=r"mcp\.servers\.s: .*streamable-HTTP"):
        MCPToolProvider.from_config("s", server)
