"""ToolRunner: sandbox choice from the constraints, timeouts, worker pool, workspace, and `bash`
and `python_repl` through each sandbox, chosen by the execution constraints alone."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import jianmu.execution.local_sandbox as local_mod
from jianmu.constraints import ExecutionConstraints
from jianmu.errors import SandboxUnavailableError, ToolExecutionError, ToolTimeoutError
from jianmu.execution import (
    DockerSandbox,
    ExecCall,
    ExecResult,
    FakeSandbox,
    LocalSandbox,
    Sandbox,
    ToolRunner,
    current_workspace,
)
from jianmu.execution.local_sandbox import bwrap_available
from jianmu.nodes import AgentState, ToolExecutor
from jianmu.runtime import ReactiveRunner
from jianmu.state import StateManager
from jianmu.tools.base import Tool
from jianmu.tools.builtin.bash import BashTool
from jianmu.tools.builtin.python_repl import PythonREPLTool
from tests.execution._helpers import processes_with, require_docker, unique_tag, wait_gone

pytestmark = pytest.mark.anyio


class EchoTool(Tool):
    """Returns its input with the thread it ran on and the workspace it saw."""

    name = "echo"
    input_schema = {"type": "object", "properties": {"text": {"type": "string"}}}

    def run(self, text: str) -> dict[str, Any]:
        return {
            "text": text,
            "main_thread": threading.current_thread() is threading.main_thread(),
            "workspace": str(current_workspace()),
        }


class HangTool(Tool):
    """Waits forever (until cancelled)."""

    name = "hang"
    input_schema = {"type": "object", "properties": {}}
    timeout_seconds = 0.3

    async def run(self) -> None:
        await anyio.Event().wait()


class ShellTool(Tool):
    """A minimal sandboxed tool: runs a command through whichever sandbox it is given."""

    name = "shell"
    input_schema = {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
    }
    sandboxed = True
    timeout_seconds = 60

    def run(self, command: str) -> str:
        raise AssertionError("a runner must call run_sandboxed, not run")

    async def run_sandboxed(self, sandbox: Sandbox, **kwargs: Any) -> str:
        result = await sandbox.exec(kwargs["command"], timeout=kwargs.get("timeout"))
        return result.stdout


def test_local_by_default_and_signature(tmp_path: Path) -> None:
    runner = ToolRunner.from_execution_constraints(ExecutionConstraints(workdir=str(tmp_path)))
    assert isinstance(runner.sandbox, LocalSandbox) and runner.mode == "local"
    assert runner.sandbox.workspace == tmp_path
    assert runner.signature() == ("local", None, None, None, None, None, None, str(tmp_path),
                                  None)
    same = ToolRunner.from_execution_constraints(ExecutionConstraints(workdir=str(tmp_path)))
    assert same.signature() == runner.signature()
    other = ToolRunner(ExecutionConstraints(workdir=str(tmp_path), timeout_s=5))
    assert other.signature() != runner.signature()
    assert ToolRunner(None).workspace == Path.cwd()


def test_docker_mode_builds_a_docker_sandbox(tmp_path: Path) -> None:
    pytest.importorskip("docker")
    from jianmu.execution.docker_sandbox import DockerSandbox

    execution = ExecutionConstraints(mode="docker", workdir=str(tmp_path), memory_mb=256,
                                     pids=32, cpus=0.5, timeout_s=9)
    runner = ToolRunner.from_execution_constraints(execution)
    box = runner.sandbox
    assert isinstance(box, DockerSandbox)
    assert (box.network, box.memory_mb, box.pids, box.cpus, box.timeout) == (
        False, 256, 32, 0.5, 9)
    assert runner.signature()[:2] == ("docker", "jianmu-sandbox:latest")
    custom = ToolRunner(ExecutionConstraints(mode="docker", docker_image="mine:1", network=True))
    assert custom.sandbox.image == "mine:1" and custom.sandbox.network is True


async def test_network_false_without_isolation_refuses_every_sandboxed_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_mod, "bwrap_problem", lambda network: "bwrap is not installed")
    runner = ToolRunner.from_execution_constraints(
        ExecutionConstraints(network=False, workdir=str(tmp_path))
    )
    assert "not built" in repr(runner)  # nothing sandboxed ran yet: no sandbox either
    assert (await runner.run(EchoTool(), {"text": "hi"}))["text"] == "hi"
    for _ in range(2):  # every time, never a sandbox without the isolation it promises
        with pytest.raises(SandboxUnavailableError, match="network: false"):
            await runner.run(ShellTool(), {"command": "echo escaped"})
    with pytest.raises(SandboxUnavailableError, match="bwrap is not installed"):
        _ = runner.sandbox
    await runner.close()


def test_a_sandboxed_call_without_isolation_is_an_observation_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_mod, "bwrap_problem", lambda network: "bwrap is not installed")
    monkeypatch.chdir(tmp_path)  # the workspace; the network is unset: off
    state = StateManager(AgentState, {"actions": [
        {"id": "a", "name": "echo", "arguments": {"text": "in-process"}},
        {"id": "b", "name": "shell", "arguments": {"command": "echo escaped"}},
    ]})
    ReactiveRunner(ToolExecutor(tools=[EchoTool(), ShellTool()]), state).run_sync()
    said = {m.tool_call_id: m.content for m in state.get("messages")}
    assert "in-process" in said["a"]
    assert said["b"].startswith(
        "Error: SandboxUnavailableError: the sandbox's network is off"), said
    assert "bwrap is not installed" in said["b"]


def test_bad_max_workers(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_workers must be positive, got 0"):
        ToolRunner(ExecutionConstraints(workdir=str(tmp_path)), max_workers=0)


async def test_sync_tool_runs_in_a_worker_under_the_workspace(tmp_path: Path) -> None:
    async with ToolRunner(ExecutionConstraints(workdir=str(tmp_path))) as runner:
        result = await runner.run(EchoTool(), {"text": "hi"})
    assert result == {"text": "hi", "main_thread": False, "workspace": str(tmp_path)}


async def test_worker_pool_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    original = EchoTool.invoke

    async def spy(self: Tool, args: dict[str, Any], *, executor: Any = None, **kw: Any) -> Any:
        seen.append(executor)
        return await original(self, args, executor=executor)

    monkeypatch.setattr(EchoTool, "invoke", spy)
    runner = ToolRunner(ExecutionConstraints(workdir=str(tmp_path)), max_workers=3)
    await runner.run(EchoTool(), {"text": "a"})
    await runner.release()  # the end of a run keeps the pool
    await runner.run(EchoTool(), {"text": "b"})
    assert seen[0] is seen[1] and seen[0] is not None and seen[0].max_workers == 3
    await runner.close()


async def test_timeout_is_the_smaller_of_tool_and_constraints(tmp_path: Path) -> None:
    runner = ToolRunner(ExecutionConstraints(workdir=str(tmp_path), timeout_s=0.2))
    assert runner.timeout_for(HangTool()) == 0.2
    assert runner.timeout_for(ShellTool()) == 0.2
    assert ToolRunner(ExecutionConstraints(workdir=str(tmp_path))).timeout_for(HangTool()) == 0.3
    with pytest.raises(ToolTimeoutError, match=r"'hang' did not finish within 0.2s"):
        await runner.run(HangTool(), {})


async def test_sandboxed_tool_goes_through_the_sandbox(tmp_path: Path) -> None:
    def handler(call: ExecCall) -> ExecResult:
        return ExecResult(exit_code=0, stdout=f"ran {call.argv[-1]}")

    fake = FakeSandbox(handler, workspace=tmp_path)
    async with ToolRunner(ExecutionConstraints(workdir=str(tmp_path)), sandbox=fake) as runner:
        assert await runner.run(ShellTool(), {"command": "ls"}) == "ran ls"
    assert fake.started and fake.closed
    assert fake.calls == [ExecCall(argv=["/bin/sh", "-c", "ls"], timeout=None)]


async def test_tool_execute_uses_the_runner(tmp_path: Path) -> None:
    async with ToolRunner(ExecutionConstraints(workdir=str(tmp_path))) as runner:
        out = await ShellTool().execute({"command": "echo via-execute"}, runner=runner)
    assert out == "via-execute\n"


async def test_hung_sandboxed_tool_is_killed_and_the_next_call_works(tmp_path: Path) -> None:
    execution = ExecutionConstraints(workdir=str(tmp_path), timeout_s=0.5)
    tag = unique_tag()
    async with ToolRunner(execution) as runner:
        with pytest.raises(ToolTimeoutError, match="'shell'"):
            # The command asks for 60 s; the runner's 0.5 s bound wins and kills it.
            await runner.run(
                ShellTool(), {"command": f"sleep 1000.{tag}1 & sleep 1000.{tag}2", "timeout": 60}
            )
        assert await wait_gone(f"1000.{tag}")
        assert await runner.run(ShellTool(), {"command": "echo next"}) == "next\n"
    assert processes_with(f"1000.{tag}") == []


class FetchTool(Tool):
    """Stands for an in-process network tool (effect tag ``http``); records each call."""

    name = "fetch"
    input_schema = {"type": "object", "properties": {"url": {"type": "string"}}}
    effect_tags = ("http",)

    def __init__(self) -> None:
        self.calls: list[str] = []

    def run(self, url: str) -> str:
        self.calls.append(url)
        return "fetched"


def _no_exec(call: ExecCall) -> ExecResult:
    raise AssertionError("no command should run")


async def test_http_tools_are_refused_when_network_is_false(tmp_path: Path) -> None:
    from jianmu.tools.builtin import HTTPTool

    execution = ExecutionConstraints(network=False, workdir=str(tmp_path))
    tool = FetchTool()
    async with ToolRunner(execution, sandbox=FakeSandbox(_no_exec)) as runner:
        with pytest.raises(ToolExecutionError, match=r"tool 'fetch' uses the network.*"
                           r"execution\.network: false"):
            await runner.run(tool, {"url": "http://127.0.0.1:1/?leak=secret"})
        with pytest.raises(ToolExecutionError, match="'http_request' uses the network"):
            await runner.run(HTTPTool(), {"url": "http://127.0.0.1:1/"})
        assert await runner.run(EchoTool(), {"text": "still fine"})  # other tools run
    assert tool.calls == []


@pytest.mark.parametrize("network", [None, True])
async def test_http_tools_run_when_network_is_not_off(tmp_path: Path, network: bool | None) -> None:
    execution = ExecutionConstraints(network=network, workdir=str(tmp_path))
    tool = FetchTool()
    async with ToolRunner(execution, sandbox=FakeSandbox(_no_exec)) as runner:
        assert await runner.run(tool, {"url": "http://example.test/"}) == "fetched"
    assert tool.calls == ["http://example.test/"]


async def test_a_timed_out_sync_tool_is_reported_as_abandoned(tmp_path: Path) -> None:
    release = threading.Event()

    class BlockingTool(Tool):
        name = "blocking"
        description = "Block a thread until released."
        input_schema = {"type": "object", "properties": {}}
        # long enough for an idle thread to take the call on a loaded machine (one that has
        # not started by then is "did not start", another test's case)
        timeout_seconds = 2.0

        def run(self) -> str:
            release.wait(30)
            return "done"

    runner = ToolRunner(ExecutionConstraints(workdir=str(tmp_path)))
    try:
        with pytest.raises(ToolTimeoutError, match="abandoned"):
            await runner.run(BlockingTool(), {})
    finally:
        release.set()
        await runner.close()


async def test_a_sync_call_that_timed_out_waiting_for_a_thread_says_it_never_ran(
    tmp_path: Path,
) -> None:
    """Its place in the pool never came (every thread busy with a live call): it did not run,
    and is not reported as run past its timeout and abandoned."""
    release, started, ran = threading.Event(), threading.Event(), []

    class Busy(Tool):
        name = "busy"
        input_schema = {"type": "object", "properties": {}}

        def run(self) -> str:  # no timeout: it holds the only place until released
            started.set()
            release.wait(30)
            return "done"

    class Quick(Tool):
        name = "quick"
        input_schema = {"type": "object", "properties": {}}
        timeout_seconds = 0.05

        def run(self) -> str:
            ran.append("quick")
            return "quick"

    runner = ToolRunner(ExecutionConstraints(workdir=str(tmp_path)), max_workers=1)
    try:
        busy = asyncio.ensure_future(runner.run(Busy(), {}))
        assert await asyncio.to_thread(started.wait, 30)
        with pytest.raises(ToolTimeoutError, match=r"did not start within .* never ran") as e:
            await runner.run(Quick(), {})
        assert "abandoned" not in str(e.value)
        release.set()
        assert await busy == "done"
        assert await runner.run(Busy(), {}) == "done"  # the dropped call left no place taken
        assert ran == []
    finally:
        release.set()
        await runner.close()


async def test_a_tools_own_timeout_error_is_not_taken_for_the_runners(tmp_path: Path) -> None:
    class OwnTimeout(Tool):
        name = "own_timeout"
        input_schema = {"type": "object", "properties": {}}
        timeout_seconds = 30

        async def run(self) -> None:
            raise TimeoutError("the upstream service timed out")

    runner = ToolRunner(ExecutionConstraints(workdir=str(tmp_path)))
    with pytest.raises(TimeoutError, match="upstream") as caught:
        await runner.run(OwnTimeout(), {})
    assert not isinstance(caught.value, ToolTimeoutError)


async def test_a_cancel_from_outside_stays_a_cancel(tmp_path: Path) -> None:
    class Slow(HangTool):
        timeout_seconds = 30

    runner = ToolRunner(ExecutionConstraints(workdir=str(tmp_path)))
    with anyio.move_on_after(0.05) as scope:  # the caller gives up, not the tool's timeout
        await runner.run(Slow(), {})
    assert scope.cancelled_caught
    await anyio.sleep(0)  # the task carries no leftover cancel


async def test_a_tool_that_swallows_the_timeout_leaves_no_cancel_behind(tmp_path: Path) -> None:
    class Stubborn(Tool):
        name = "stubborn"
        input_schema = {"type": "object", "properties": {}}
        timeout_seconds = 0.05

        async def run(self) -> str:
            try:
                await anyio.Event().wait()
            except asyncio.CancelledError:
                return "kept going"
            return "unreachable"

    runner = ToolRunner(ExecutionConstraints(workdir=str(tmp_path)))
    assert await runner.run(Stubborn(), {}) == "kept going"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)  # would raise if the runner's cancel were still pending


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
    tag = unique_tag()
    with pytest.raises(ToolTimeoutError, match="timed out"):
        await BashTool().execute(
            {"command": f"sleep 1000.{tag}1 & sleep 1000.{tag}2", "timeout": 1}, runner=runner
        )
    assert await wait_gone(f"1000.{tag}")
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


# README's plain @tool call (its ToolExecutor snippet), traced in a fresh interpreter: the
# jianmu modules whose code runs, from the import to the end of both runs, and those imported
_TRACE = r"""
import json, re, sys, threading
ran = set()

def profile(frame, event, arg):
    if event == "call" and "/jianmu/" in frame.f_code.co_filename:
        ran.add(frame.f_code.co_filename)

sys.setprofile(profile)
threading.setprofile(profile)
from jianmu import AgentState, ReactiveRunner, StateManager, ToolExecutor, tool

@tool
def forecast(city: str, days: int = 1) -> str:
    '''Give the weather forecast.

    Args:
        city: The city's name.
        days: How many days ahead.
    '''
    return f"{city}: sunny for {days} day(s)"

@tool(category="write", permission="user_confirm")
def book(city: str) -> str:
    '''Book a trip (asks a person first).

    Args:
        city: Where to go.
    '''
    return f"booked {city}"

state = StateManager(AgentState, {"actions": [
    {"id": "c1", "name": "forecast", "arguments": '{"city": "Paris", "days": "2"}'},
    {"id": "c2", "name": "book", "arguments": {"city": "Paris"}},
]})
runner = ReactiveRunner(ToolExecutor(tools=[forecast, book]), state)
assert runner.run_sync().status.value == "suspended"
runner.approve("c2")
assert runner.run_sync().ok
assert [m.content for m in state.get("messages")] == ["Paris: sunny for 2 day(s)", "booked Paris"]
sys.setprofile(None)
threading.setprofile(None)
names = {re.sub(r"^.*/(jianmu/.*)[.]py$", r"\1", f).replace("/", ".") for f in ran}
print(json.dumps({"ran": sorted(n.removesuffix(".__init__") for n in names),
                  "imported": sorted(m for m in sys.modules if m.startswith("jianmu."))}))
"""
_IN_PROCESS = {"jianmu.execution", "jianmu.execution.runner", "jianmu.execution.threads"}


def test_a_plain_tool_call_touches_no_sandbox_module(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _TRACE], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert {"jianmu.execution.runner", "jianmu.tools.base"} <= set(seen["ran"])
    for kind in ("ran", "imported"):
        execution = {m for m in seen[kind] if m.startswith("jianmu.execution")}
        assert execution <= _IN_PROCESS, f"{kind}: {sorted(execution - _IN_PROCESS)}"
