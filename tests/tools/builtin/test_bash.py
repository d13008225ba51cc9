"""Tests for jianmu/tools/builtin/bash.py: local runs, the timeout, and the sandbox contract."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from jianmu.errors import ToolExecutionError, ToolInputError, ToolTimeoutError
from jianmu.execution.sandbox import ExecResult
from jianmu.tools.builtin import BashTool

pytestmark = pytest.mark.anyio


def _live_processes_with(token: str, prefix: str = "") -> list[tuple[int, str]]:
    """(pid, state) of every live process whose command line contains ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat_line = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # exited while we looked
        state = stat_line.rsplit(")", 1)[1].split()[0]
        if token in cmdline and cmdline.startswith(prefix) and state not in ("Z", "X"):
            found.append((int(entry), state))
    return found


async def _wait_until_gone(token: str, limit: float = 10.0) -> list[tuple[int, str]]:
    """Poll the process table until nothing carries ``token`` (SIGKILL lands asynchronously)."""
    with anyio.move_on_after(limit):
        while _live_processes_with(token):
            await anyio.sleep(0.02)
    return _live_processes_with(token)


async def test_runs_in_the_workspace(ws: Path) -> None:
    (ws / "sub").mkdir()
    out = await BashTool().execute({"command": "pwd; echo hi; echo warn >&2"})
    assert out == f"{os.path.realpath(ws)}\nhi\n[stderr]\nwarn"
    sub = await BashTool().execute({"command": "basename $(pwd)", "cwd": "sub"})
    assert sub == "sub"


async def test_bash_syntax_is_available(ws: Path) -> None:
    out = await BashTool().execute({"command": "x=(a b c); echo ${#x[@]}"})
    assert out == "3"


async def test_no_output(ws: Path) -> None:
    assert await BashTool().execute({"command": "true"}) == "(no output; exit code 0)"


async def test_non_zero_exit_is_an_error_with_code_and_stderr(ws: Path) -> None:
    with pytest.raises(ToolExecutionError) as info:
        await BashTool().execute({"command": "echo partial; echo 'boom: bad thing' >&2; exit 3"})
    message = str(info.value)
    assert message.startswith("command exited with code 3")
    assert "[stderr]\nboom: bad thing" in message
    assert "partial" in message
    with pytest.raises(ToolExecutionError, match="code 127"):
        await BashTool().execute({"command": "definitely-not-a-command-xyz"})


async def test_timeout_kills_the_whole_process_group(ws: Path) -> None:
    token = f"30.{secrets.randbelow(10**6):06d}"  # a unique sleep length marks our processes
    with anyio.fail_after(20):  # far below the 30 s the sleeps would take
        with pytest.raises(ToolTimeoutError, match="timed out after 1s") as info:
            await BashTool().execute({"command": f"sleep {token} & sleep {token}", "timeout": 1})
    assert "killed with every process it started" in str(info.value)
    assert await _wait_until_gone(token) == []


async def test_cancellation_from_outside_kills_the_group(ws: Path) -> None:
    token = f"31.{secrets.randbelow(10**6):06d}"
    started = anyio.Event()

    async def watch() -> None:
        # Both sleeps running: the command is fully started inside the sandbox.
        while len(_live_processes_with(token, prefix="sleep ")) < 2:
            await anyio.sleep(0.02)
        started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)

        async def call() -> None:
            await BashTool().execute({"command": f"sleep {token} & sleep {token}"})

        tg.start_soon(call)
        with anyio.fail_after(20):
            await started.wait()
        tg.cancel_scope.cancel()
    assert await _wait_until_gone(token) == []


async def test_output_beyond_the_limit_is_cut_with_a_note(ws: Path) -> None:
    tool = BashTool()
    tool.max_result_length = 4000
    script = f"{sys.executable} -c \"print('x' * 100000)\""
    out = await tool.execute({"command": script})
    assert out.startswith("x" * 2000)
    assert "[truncated: " in out and "more characters]" in out
    assert len(out) < 2200


async def test_bad_inputs(ws: Path) -> None:
    (ws / "f.txt").write_text("x")
    with pytest.raises(ToolInputError, match="command is empty"):
        await BashTool().execute({"command": "  "})
    with pytest.raises(ToolInputError):
        await BashTool().execute({"command": "true", "timeout": 0})
    with pytest.raises(ToolInputError):
        await BashTool().execute({"command": "true", "timeout": 601})
    with pytest.raises(ToolInputError, match="not an existing folder"):
        await BashTool().execute({"command": "true", "cwd": "f.txt"})
    with pytest.raises(ToolInputError, match="outside the workspace"):
        await BashTool().execute({"command": "true", "cwd": "/"})


class _RecordingSandbox:
    """A handler-driven stand-in for the `Sandbox` protocol."""

    def __init__(self, workspace: Path, result: ExecResult) -> None:
        self.workspace = workspace
        self.result = result
        self.calls: list[dict[str, Any]] = []

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        stdin: str | bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        self.calls.append({"command": command, "cwd": cwd, "timeout": timeout})
        return self.result


async def test_run_sandboxed_uses_the_given_sandbox(ws: Path) -> None:
    (ws / "src").mkdir()
    box = _RecordingSandbox(ws, ExecResult(exit_code=0, stdout="done\n"))
    out = await BashTool().run_sandboxed(box, command="make", cwd="src", timeout=5)
    assert out == "done"
    (call,) = box.calls
    assert call["command"][-1] == "make" and call["command"][0] == "/bin/sh"
    assert call["cwd"] == "src" and call["timeout"] == 5


async def test_run_sandboxed_maps_timeouts_and_oom(ws: Path) -> None:
    timed = _RecordingSandbox(ws, ExecResult(exit_code=-9, stdout="so far", timed_out=True))
    with pytest.raises(ToolTimeoutError, match="output so far:\nso far"):
        await BashTool().run_sandboxed(timed, command="sleep 9", timeout=1)
    oom = _RecordingSandbox(ws, ExecResult(exit_code=-9, oom_killed=True))
    with pytest.raises(ToolExecutionError, match="memory limit"):
        await BashTool().run_sandboxed(oom, command="eat")


async def test_metadata_matches_the_issue() -> None:
    tool = BashTool()
    assert tool.category == "execute" and tool.permission == "user_confirm"
    assert tool.effect_tags == ("shell",) and tool.parallel_safe is False
    assert tool.sandboxed and tool.max_retries == 0
    tool.check_definition(require_parameter_descriptions=True)
