"""Red team, secrets in an MCP server's command line or URL: the config reads them with
``${VAR}`` in any string (``args: [--token, "${GH_TOKEN}"]``, as many servers take their
token; a URL's password or query), and the client named the server by its whole command line
or URL in its errors and repr. A server that died and would not start again answered the
model's next call with ``could not connect to MCP server 'gh' (command 'python srv.py --token
ghp_...')``: the token reached the model, and the run's error the logs.

Fixed here: the config keeps the values each server's ``${VAR}`` read (`MCPServerConfig.
from_environment`), and the client masks them, and any URL password or secret query value,
wherever it shows its command line or URL.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from jianmu.config import parse_config
from jianmu.errors import MCPError
from jianmu.mcp import MCPClient, MCPToolProvider

pytestmark = pytest.mark.anyio
TOKEN = "ghp_redteam_0123456789"


def server_of(text: str) -> MCPToolProvider:
    config = parse_config(text)
    return MCPToolProvider.from_config("gh", config.mcp.servers["gh"])


async def failure_of(provider: MCPToolProvider) -> str:
    with pytest.raises(MCPError) as raised:
        await provider.initialize()
    await provider.close()
    return str(raised.value)


async def test_a_token_in_a_stdio_servers_args_is_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    exe = Path(sys.executable).as_posix()
    provider = server_of(f"""
mcp:
  servers:
    gh:
      command: {exe}
      args: ["-c", "raise SystemExit(3)", "--token", "${{GH_TOKEN}}"]
      connect_timeout: 20
""")
    said = await failure_of(provider)
    assert "could not connect" in said and "--token ***" in said, said
    assert TOKEN not in said and TOKEN not in repr(provider.client)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_token_in_a_servers_url_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    url = f"http://me:${{GH_TOKEN}}@127.0.0.1:{free_port()}/mcp?key=${{GH_TOKEN}}"
    provider = server_of(f"""
mcp:
  servers:
    gh:
      url: "{url}"
      connect_timeout: 20
""")
    said = await failure_of(provider)
    assert "could not connect" in said and "me:***@127.0.0.1" in said, said
    assert TOKEN not in said and TOKEN not in repr(provider.client)


def test_a_clients_url_password_is_not_its_name_nor_in_its_repr() -> None:
    client = MCPClient(url="https://me:hunter22@example.com/mcp?token=abcdef")
    assert "hunter22" not in client.name and "abcdef" not in client.name
    assert "hunter22" not in repr(client) and "abcdef" not in repr(client)
