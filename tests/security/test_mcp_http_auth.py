"""``jianmu mcp serve --transport http`` lets in only who holds its token (issue 27, item 12).

It had no authentication: anyone who could reach the port ran tools. Now every start has a
bearer token (generated and printed, or read from ``--token-env NAME``); every request must
carry ``Authorization: Bearer TOKEN`` (compared in constant time), anything else gets ``401``
with ``WWW-Authenticate: Bearer``, the shape of the MCP authorization spec. There is no HTTP
server without a token, on a loopback interface or any other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from jianmu import _secrets
from jianmu.mcp import MCPToolProvider, serve
from jianmu.mcp.server import BearerToken
from jianmu.tools import ToolSet
from tests.cli._helpers import REPO, make_config
from tests.mcp.helpers import free_port, wait_for_port

pytestmark = pytest.mark.anyio

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "attacker", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


def start(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[
        subprocess.Popen[str], int]:
    """``jianmu mcp serve --transport http`` on a free port, with the calculator served."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("JIANMU_")}
    clean.update(PYTHONPATH=str(REPO), **(env or {}))
    (tmp_path / "ws").mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jianmu.cli", "mcp", "serve", "--transport", "http",
         "--port", str(port), "--tools", "calculator", *args,
         "--config", str(make_config(tmp_path))],
        cwd=tmp_path, env=clean, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    return proc, port


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def printed_token(proc: subprocess.Popen[str]) -> str:
    """The token the server printed at start (the line says what clients must send)."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if "Authorization: Bearer " in line:
            return line.rsplit("Bearer ", 1)[1].strip()
    raise AssertionError(f"no token printed; exit code {proc.wait()}")


async def refused(url: str, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as client:
        return await client.post(url, json=INIT, headers={**MCP_HEADERS, **headers})


async def calls(url: str, token: str) -> str:
    provider = MCPToolProvider("served", url=url, timeout=20,
                               headers={"Authorization": f"Bearer {token}"})
    try:
        toolset = await ToolSet.from_providers([provider])
        result = await toolset.execute("served__calculator", {"expression": "6 * 7"})
    finally:
        await provider.close()
    assert result.ok, result.error
    return str(result.output)


async def test_a_request_without_the_printed_token_is_refused(
    tmp_path: Path, servers: list[subprocess.Popen[str]]
) -> None:
    proc, port = start(tmp_path)
    servers.append(proc)
    token = printed_token(proc)
    wait_for_port(port, proc)  # type: ignore[arg-type]
    url = f"http://127.0.0.1:{port}/mcp"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {token}x"},
                    {"Authorization": f"Bearer {token[:-1]}"}, {"Authorization": token},
                    {"Authorization": f"Basic {token}"}, {"X-Token": token}):
        response = await refused(url, **headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer "), response.headers
        assert "6 * 7" not in response.text
    async with httpx.AsyncClient(timeout=20) as client:  # every method, every path
        assert (await client.get(url)).status_code == 401
        assert (await client.delete(url)).status_code == 401
    assert await calls(url, token) == "42"


async def test_the_token_can_come_from_the_environment(
    tmp_path: Path, servers: list[subprocess.Popen[str]]
) -> None:
    secret = "a-token-the-operator-chose-0123456789"
    proc, port = start(tmp_path, "--token-env", "MCP_TOKEN", env={"MCP_TOKEN": secret})
    servers.append(proc)
    wait_for_port(port, proc)  # type: ignore[arg-type]
    url = f"http://127.0.0.1:{port}/mcp"
    assert (await refused(url)).status_code == 401
    assert await calls(url, secret) == "42"
    proc.terminate()
    proc.wait(timeout=30)
    assert proc.stderr is not None and secret not in proc.stderr.read()  # never printed


def test_a_token_variable_that_is_unset_is_a_clean_error(tmp_path: Path) -> None:
    proc, _port = start(tmp_path, "--token-env", "NO_SUCH_VARIABLE_HERE")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "NO_SUCH_VARIABLE_HERE" in err and "Traceback" not in err
    assert "serving" not in err  # checked before the banner: it never says it serves


async def test_no_http_server_without_a_token_on_any_interface() -> None:
    toolset = ToolSet.resolve(["calculator"])
    for host in ("0.0.0.0", "192.0.2.10", "::", "127.0.0.1", "localhost"):
        with pytest.raises(ValueError, match="needs a bearer token"):
            await serve(toolset, transport="http", host=host, port=8000)


async def test_the_token_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = _secrets.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(_secrets.hmac, "compare_digest", spy)
    verifier = BearerToken("right-token")
    assert await verifier.verify_token("wrong-token") is None
    assert await verifier.verify_token("right-token") is not None
    assert compared == [(b"wrong-token", b"right-token"), (b"right-token", b"right-token")]
    assert "right-token" not in repr(verifier)
