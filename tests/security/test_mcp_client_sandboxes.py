"""Issue 27, item 5: two clients of ``jianmu mcp serve --transport http`` share no sandbox.

One server process runs every client's calls, so each HTTP client gets a sandbox of its own:
while client A's command runs with a secret in its environment and in its ``/tmp``, client B's
command, running at the same time, finds neither (A's processes are in another pid namespace
or container, A's ``/tmp`` is not B's). The workspace is the server's, shared by design: B
tells A it is done through a file there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from jianmu.execution.local_sandbox import bwrap_available
from jianmu.mcp import MCPClient
from tests.execution._helpers import require_docker
from tests.mcp.helpers import free_port, wait_for_port

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.anyio

TOKEN = "test-token-0123456789abcdef"
HEADERS: dict[str, str] = {"Authorization": f"Bearer {TOKEN}"}
"""Sent by both clients with every request: the server's bearer token (``--token-env``)."""

# A makes a secret, keeps it in its environment and its /tmp, and waits (bounded) for B
FIRST = ("S=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \\n'); export S; "
         "echo \"$S\" > /tmp/a-secret; touch ready; n=0; "
         "while [ ! -e go ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done; echo \"A:$S\"")
# B looks for it everywhere it can, then lets A go
SECOND = ("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a '^S='; "
          "cat /tmp/a-secret 2>/dev/null; ls /tmp; touch go; echo B:done")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=[
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(the MCP URL of a running ``jianmu mcp serve --transport http``, its workspace)."""
    mode = request.param
    if mode == "docker":
        require_docker()
    elif not bwrap_available(network=False):
        pytest.skip("the local sandbox's network is off, which needs bubblewrap")
    ws = tmp_path / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    config = tmp_path / "jianmu-test.yaml"
    config.write_text(
        f"runtime:\n  checkpoint_path: {tmp_path / 'runs.sqlite'}\n"
        f"execution:\n  mode: {mode}\n  workdir: {ws}\n  timeout_s: 60\n"
        "guard:\n  tool_policy:\n    bash: allow\n", encoding="utf-8")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env["MCP_TEST_TOKEN"] = TOKEN
    proc = subprocess.Popen(
        [sys.executable, "-m", "jianmu.cli", "mcp", "serve", "--transport", "http",
         "--port", str(port), "--tools", "bash", "--config", str(config),
         "--token-env", "MCP_TEST_TOKEN"],
        env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp", ws
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()


async def test_two_http_clients_do_not_see_each_others_commands(
    server: tuple[str, Path],
) -> None:
    url, ws = server
    results: dict[str, str] = {}
    a = MCPClient(url=url, name="a", headers=HEADERS, timeout=90, connect_timeout=60)
    b = MCPClient(url=url, name="b", headers=HEADERS, timeout=90, connect_timeout=60)
    try:
        await a.connect()
        await b.connect()

        async def call(client: MCPClient, key: str, command: str) -> None:
            done = await client.call_tool("bash", {"command": command, "timeout": 60})
            assert not done.is_error, done
            results[key] = done.text()

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, a, "a", FIRST)
            with anyio.fail_after(120):
                while not (ws / "ready").exists():
                    await anyio.sleep(0.02)
            await call(b, "b", SECOND)
    finally:
        await a.close()
        await b.close()
    secret = results["a"].strip().rpartition("A:")[2]
    assert len(secret) == 24, results
    assert results["b"].strip().endswith("B:done") and secret not in results["b"], results
    assert "a-secret" not in results["b"], results  # not even its name in B's /tmp
