"""Attacks on LocalSandbox's warm supervisor, from a command it runs (issue 16).

The supervisor outlives each command, so a hostile command may try to talk to it over its
protocol pipes, kill it, leave its control group, or outlive its call. None of that works: the
commands run as another uid (root drops them), the supervisor is not dumpable, and every
command's control group is emptied before its call returns.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jianmu.execution._process import cgroup_support
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
from tests.execution._helpers import processes_with, wait_gone

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(cgroup_support() is None, reason="no control groups: no warm supervisor"),
]
KINDS = [
    pytest.param(False, id="no-bwrap"),
    pytest.param(True, id="bwrap", marks=pytest.mark.skipif(
        os.geteuid() != 0 or not bwrap_available(network=False),
        reason="a warm bubblewrap supervisor needs root and bubblewrap")),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=KINDS)
async def box(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    bwrap = request.param
    workspace = tmp_path / "ws"
    workspace.mkdir(mode=0o700)
    sandbox = LocalSandbox(workspace, use_bwrap=bwrap, network=not bwrap, pids=32, timeout=30)
    assert sandbox.warm, sandbox.warm_problem
    async with sandbox:
        await sandbox.exec("true")  # the supervisor runs from here on
        yield sandbox


def _supervisor(box: LocalSandbox) -> Any:
    assert box._warm is not None and box._warm.supervisor is not None
    return box._warm.supervisor


_PIPES = """
import os, sys
pid = sys.argv[1]
for fd, mode in (("0", os.O_WRONLY), ("1", os.O_WRONLY), ("1", os.O_RDONLY)):
    try:
        f = os.open(f"/proc/{pid}/fd/{fd}", mode | os.O_NONBLOCK)
    except OSError as exc:
        print("DENIED", fd, exc.errno)
    else:
        os.write(f, b"\\x00\\x00\\x00\\x10\\x00\\x00\\x00\\x00" + b"{" * 16) if mode else 0
        print("OPENED", fd)
for name in ("mem", "environ", "cmdline"):
    try:
        open(f"/proc/{pid}/{name}", "rb").read(64)
        print("READ", name)
    except OSError as exc:
        print("DENIED", name, exc.errno)
"""


async def test_a_command_cannot_reach_the_supervisors_pipes(box: LocalSandbox) -> None:
    sup = _supervisor(box)
    result = await box.exec([box.python, "-c", _PIPES, str(sup.pid)])
    assert "OPENED" not in result.stdout and "DENIED 0" in result.stdout, result
    assert "READ mem" not in result.stdout and "READ environ" not in result.stdout, result
    assert (await box.exec("echo still")).stdout == "still\n"
    assert _supervisor(box) is sup and sup.alive


async def test_a_command_cannot_kill_or_trace_the_supervisor(box: LocalSandbox) -> None:
    sup = _supervisor(box)
    result = await box.exec(
        f"kill -9 {sup.pid} 2>&1; kill -STOP {sup.pid} 2>&1; kill -9 -1 2>&1; echo tried"
    )
    assert "tried" in result.stdout
    after = await box.exec("echo next")
    assert after.stdout == "next\n"
    assert _supervisor(box) is sup and sup.alive and box.supervisor_starts == 1


async def test_a_command_cannot_leave_its_control_group(box: LocalSandbox) -> None:
    tag = f"{uuid.uuid4().int % 10**6}"
    # every cgroup.procs file it can find, itself moved into each: all refused. They exist
    # only in the cgroup file systems mounted where it runs (the walk of all of `/` took
    # seconds to find the same files)
    script = (
        "for f in $(find $(awk '$3 ~ /^cgroup/ {print $2}' /proc/self/mounts) "
        "-name cgroup.procs 2>/dev/null); do "
        "  echo $$ > $f 2>/dev/null && echo MOVED $f; done; "
        f"(setsid sleep 7000.{tag} &); echo done"
    )
    result = await box.exec(script)
    assert "done" in result.stdout and "MOVED" not in result.stdout, result
    assert processes_with(f"7000.{tag}") == []


async def test_nothing_outlives_its_call_across_calls(box: LocalSandbox) -> None:
    tag = f"{uuid.uuid4().int % 10**6}"
    first = await box.exec(
        f"nohup sleep 8000.{tag} >/dev/null 2>&1 & "
        f"{box.python} -c 'import os\nif os.fork() == 0:\n os.setsid()\n"
        f" os.execvp(\"sleep\", [\"sleep\", \"8001.{tag}\"])'; echo started"
    )
    assert "started" in first.stdout
    assert processes_with(f".{tag}") == []  # gone before the call returned
    second = await box.exec(f"ps -eo args 2>/dev/null | grep -c 800[01].{tag} || true")
    assert second.stdout.strip() in ("", "0")
    assert await wait_gone(f".{tag}")
