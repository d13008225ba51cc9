"""Attacks on DockerSandbox's warm supervisor, from a command it runs (issue 16).

In the container the supervisor shares the commands' uid (the container may not change
users), so a hostile command may try to talk to it over its pipes, trace it, signal it, or
leave a process behind for the next call. It cannot reach the pipes or trace it (not
dumpable); catchable signals are ignored; a SIGKILL ends only that supervisor: the call says
so, everything of the user is swept from outside, and the next call starts a new one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jianmu.execution.docker_sandbox import DockerSandbox
from tests.execution._helpers import processes_with, require_docker, wait_gone

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def box(tmp_path: Path) -> AsyncIterator[DockerSandbox]:
    require_docker()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    workspace.chmod(0o777)
    async with DockerSandbox(workspace, pids=48, timeout=30) as sandbox:
        await sandbox.exec("true")  # the supervisor runs from here on
        assert sandbox.warm_problem is None
        yield sandbox


def _pid(box: DockerSandbox) -> int:
    sup = box._warm.supervisor
    assert sup is not None and sup.alive and sup.pid is not None
    return sup.pid


_PIPES = """
import ctypes, os, sys
pid = int(sys.argv[1])
for fd, mode in (("0", os.O_WRONLY), ("1", os.O_WRONLY), ("1", os.O_RDONLY)):
    try:
        f = os.open(f"/proc/{pid}/fd/{fd}", mode | os.O_NONBLOCK)
    except OSError as exc:
        print("DENIED", fd, exc.errno)
    else:
        os.write(f, b"\\x00\\x00\\x00\\x10\\x00\\x00\\x00\\x00" + b"{" * 16) if mode else 0
        print("OPENED", fd)
for name in ("mem", "environ"):
    try:
        open(f"/proc/{pid}/{name}", "rb").read(64)
        print("READ", name)
    except OSError as exc:
        print("DENIED", name, exc.errno)
libc = ctypes.CDLL(None, use_errno=True)
print("TRACED" if libc.ptrace(16, pid, 0, 0) == 0 else "NO-TRACE")  # PTRACE_ATTACH
"""


async def test_a_command_cannot_reach_or_trace_the_supervisor(box: DockerSandbox) -> None:
    pid = _pid(box)
    result = await box.exec(["python3", "-c", _PIPES, str(pid)])
    assert "DENIED 0" in result.stdout and "OPENED" not in result.stdout, result
    assert "READ" not in result.stdout and "NO-TRACE" in result.stdout, result
    assert (await box.exec("echo still")).stdout == "still\n"
    assert _pid(box) == pid and box.supervisor_starts == 1


async def test_catchable_signals_do_not_stop_the_supervisor(box: DockerSandbox) -> None:
    pid = _pid(box)
    result = await box.exec(
        f"for s in TERM INT HUP QUIT USR1 USR2 ALRM PIPE TSTP; do kill -$s {pid}; done; "
        "echo tried"
    )
    assert result.stdout == "tried\n", result
    assert (await box.exec("echo next")).stdout == "next\n"
    assert _pid(box) == pid and box.supervisor_starts == 1


@pytest.mark.parametrize("how", ["kill -9 $PPID", "kill -9 -1"])
async def test_killing_the_supervisor_leaves_nothing_behind(
    box: DockerSandbox, how: str
) -> None:
    tag = f"{uuid.uuid4().int % 10**6}"
    result = await box.exec(
        f"(setsid sleep 9000.{tag} &); nohup sleep 9001.{tag} >/dev/null 2>&1 & "
        f"sleep 0.2; {how}; sleep 9002.{tag}"
    )
    assert result.exit_code != 0 and "supervisor died" in result.stderr, result
    assert await wait_gone(f".{tag}"), processes_with(f".{tag}")
    after = await box.exec(f"echo next; ps 2>/dev/null | grep -c 900.{tag} || true")
    assert after.stdout.startswith("next\n") and box.supervisor_starts == 2


async def test_nothing_outlives_its_call(box: DockerSandbox) -> None:
    tag = f"{uuid.uuid4().int % 10**6}"
    first = await box.exec(
        f"nohup sleep 8000.{tag} >/dev/null 2>&1 & "
        "python3 -c 'import os, sys\nif os.fork() == 0:\n os.setsid()\n"
        f" os.execvp(\"sleep\", [\"sleep\", \"8001.{tag}\"])'; echo started"
    )
    assert first.stdout == "started\n", first
    assert processes_with(f".{tag}") == []  # gone before the call returned
    assert box.supervisor_starts == 1
