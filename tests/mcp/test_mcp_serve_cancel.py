"""`jianmu mcp serve` over HTTP when a client gives a call up and leaves at once.

A client whose call timed out (or was cancelled) sends ``notifications/cancelled``, and one
that then closes ends its session (``DELETE``). The SDK's transport answers the notification
``202`` before it hands it on; when the session ended in between, the hand-over fails, and the
SDK answered the same request a second time (``500``), which the HTTP server refuses: every
such call printed two tracebacks to the server's terminal ("Error handling POST request",
"Exception in ASGI application"), though nothing had gone wrong: the call was given up and
its session was over. Jianmu's own client does exactly this after a call timed out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from jianmu.mcp import MCPToolProvider
from jianmu.mcp.server import answered_once
from jianmu.tools.registry import ToolSet
from tests.mcp.helpers import child_env, free_port, wait_for_port

pytestmark = pytest.mark.anyio
TOKEN = "t0ken-of-the-cancel-test"


async def test_a_call_given_up_by_a_client_that_leaves_prints_no_traceback(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = tmp_path / "jianmu.yaml"
    config.write_text(f"execution:\n  workdir: {workspace}\nguard:\n  tool_policy:\n"
                      "    bash: allow\n", encoding="utf-8")
    port = free_port()
    errors = tmp_path / "server.err"
    with errors.open("wb") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "jianmu.cli", "mcp", "serve", "--tools", "bash",
             "--config", str(config), "--transport", "http", "--port", str(port),
             "--token-env", "SERVE_TOKEN"],
            env={**child_env(), "SERVE_TOKEN": TOKEN}, cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=sink,
        )
    try:
        wait_for_port(port, server)  # type: ignore[arg-type]
        for round_ in range(8):  # the race is the transport's: each round gives it a chance
            provider = MCPToolProvider("srv", url=f"http://127.0.0.1:{port}/mcp",
                                       bearer_token=TOKEN, timeout=60, connect_timeout=60)
            tools = await ToolSet.from_providers([provider])
            began = workspace / f"began{round_}"
            async with anyio.create_task_group() as calls:
                command = f"touch {began.name}; sleep 60"
                calls.start_soon(tools.execute, "srv__bash", {"command": command})
                while not began.exists():  # the command runs: the call is under way
                    await anyio.sleep(0.02)
                calls.cancel_scope.cancel()  # given up: notifications/cancelled
            await provider.close()  # and gone: DELETE
    finally:
        server.terminate()
        server.wait(timeout=60)
    said = errors.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in said and "Error handling" not in said, said


async def test_what_an_app_sends_after_its_answer_is_dropped_and_a_closed_session_quiet() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        if sent and sent[-1]["type"] == "http.response.body" and not sent[-1].get("more_body"):
            raise RuntimeError("Unexpected ASGI message sent, after response already completed.")
        sent.append(message)

    async def twice(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        await send({"type": "http.response.start", "status": 500, "headers": []})
        raise anyio.ClosedResourceError  # the session the message was for has ended

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    await answered_once(twice)({"type": "http"}, receive, send)
    assert [m.get("status") for m in sent] == [202, None]

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise anyio.ClosedResourceError  # before any answer: a real failure, raised

    with pytest.raises(anyio.ClosedResourceError):
        await answered_once(broken)({"type": "http"}, receive, send)
