"""`bash` and `python_repl` through each sandbox, chosen by the execution constraints alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jianmu.constraints import ExecutionConstraints
from jianmu.errors import ToolExecutionError, ToolTimeoutError
from jianmu.execution import DockerSandbox, LocalSandbox, ToolRunner
from jianmu.execution.local_sandbox import bwrap_available
from jianmu.tools.builtin.bash import BashTool
from jianmu.tools.builtin.python_repl import PythonREPLTool
from tests.execution._helpers import require_docker, wait_gone

pytestmark = pytest.mark.anyio

MODES = [
    pytest.param({"mode": "local"}, id="local"),  # network unset: off
    pytest.param({"mode": "local", "network": False}, id="local-no-network"),
    pytest.param({"mode": "local", "network": True}, id="local-network"),
    pytest.param({"mode": "docker"}, id="docker", marks=pytest.mark.docker),
]


@pytest.fixture(scope="module", params=MODES)
async def runner(
    request: pytest.FixtureRequest, shared_workspace: Path
) -> AsyncIterator[ToolRunner]:
    options = dict(request.param)
    if options["mode"] == "docker":
        require_docker()
    elif options.get("network") is not True and not bwrap_available(network=False):
        pytest.skip("no network needs bubblewrap, which cannot run here")
    execution = ExecutionConstraints(workdir=str(shared_workspace), memory_mb=256, **options)
    async with ToolRunner.from_execution_constraints(execution) as built:
        yield built


async def test_the_constraints_pick_the_sandbox(runner: ToolRunner) -> None:
    out = await BashTool().execute({"command": "cat /proc/net/dev | tail -n +3"}, runner=runner)
    interfaces = {line.split(":")[0].strip() for line in out.splitlines()}
    if runner.mode == "docker":
        assert isinstance(runner.sandbox, DockerSandbox)
        assert interfaces == {"lo"}
        assert (await BashTool().execute({"command": "pwd"}, runner=runner)) == "/workspace"
    else:
        assert isinstance(runner.sandbox, LocalSandbox)
        if runner.execution.network is not True:  # unset is off too
            assert runner.sandbox.uses_bwrap and interfaces == {"lo"}
        else:  # the operator turned it on: the host's network, bubblewrap only where it works
            assert runner.sandbox.uses_bwrap == bwrap_available()
            host = Path("/proc/net/dev").read_text().splitlines()[2:]
            assert interfaces == {line.split(":")[0].strip() for line in host}


async def test_bash_writes_into_the_workspace(runner: ToolRunner, marker: str) -> None:
    out = await BashTool().execute(
        {"command": f"echo hello > {marker}.txt && cat {marker}.txt && echo oops >&2"},
        runner=runner,
    )
    assert out == "hello\n[stderr]\noops"
    assert (runner.workspace / f"{marker}.txt").read_text() == "hello\n"
    with pytest.raises(ToolExecutionError, match="exited with code 4"):
        await BashTool().execute({"command": "exit 4"}, runner=runner)


async def test_hung_bash_is_killed_and_the_next_call_works(runner: ToolRunner) -> None:
    with pytest.raises(ToolTimeoutError, match="timed out"):
        await BashTool().execute(
            {"command": "sleep 1000.9191 & sleep 1000.9192", "timeout": 1}, runner=runner
        )
    assert await wait_gone("1000.919")
    assert await BashTool().execute({"command": "echo alive"}, runner=runner) == "alive"


async def test_python_repl_keeps_state_between_calls(runner: ToolRunner) -> None:
    repl = PythonREPLTool()
    try:
        first = await repl.execute({"code": "import os\nx = 20\nx + 1"}, runner=runner)
        assert "21" in first
        second = await repl.execute({"code": "print(x * 2)\nos.getcwd()"}, runner=runner)
        assert "40" in second
        expected = "/workspace" if runner.mode == "docker" else str(runner.workspace)
        assert expected in second
    finally:
        repl.reset()


async def test_python_repl_memory_limit(runner: ToolRunner) -> None:
    repl = PythonREPLTool()
    try:
        with pytest.raises(ToolExecutionError, match="memory"):
            await repl.execute({"code": "blob = b'x' * (1024 * 2**20)"}, runner=runner)
    finally:
        repl.reset()
