"""A sandboxed call whose sandbox cannot start never ran: it is refused with the reason, is not
in ``usage.tool_calls`` (in the run, nor in its checkpoint), and says no ``tool.call.started``.

Before, the sandbox was started inside the call: a missing isolation (no bubblewrap or Docker),
or a plug-in sandbox that raised, failed the call as if the tool had raised, so it counted as
executed and its events said it had started.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jianmu import (
    Agent,
    AgentState,
    Constraints,
    ReactiveRunner,
    ScriptedLLM,
    StateManager,
    ToolExecutor,
    ToolNode,
    plugins,
    tool,
)
from jianmu.errors import SandboxUnavailableError
from jianmu.execution import ExecResult, Sandbox
from jianmu.runtime.checkpoint import SQLiteCheckpointer
from jianmu.runtime.events import Event
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolResult

pytestmark = pytest.mark.anyio

ran: list[str] = []


class Unstartable:
    """A sandbox mode whose sandbox never starts: the isolation it needs is missing."""

    isolation_rank = 10

    def __init__(self, workspace: str | os.PathLike[str], **options: Any) -> None:
        self.workspace = Path(workspace)

    async def start(self) -> None:
        raise SandboxUnavailableError("no isolation on this machine (test)")

    async def exec(self, command: Any, **options: Any) -> ExecResult:
        raise AssertionError("a sandbox that did not start runs nothing")


class Unbuildable(Unstartable):
    """A sandbox mode whose class raises when it is built."""

    def __init__(self, workspace: str | os.PathLike[str], **options: Any) -> None:
        raise RuntimeError("the sandbox plug-in is misconfigured (test)")


class Shell(Tool):
    """A sandboxed tool: its command runs in the run's sandbox."""

    name = "shell"
    description = "Run a command."
    input_schema = {"type": "object", "properties": {"command": {"type": "string"}},
                    "required": ["command"]}
    sandboxed = True

    def run(self, command: str) -> str:
        raise AssertionError("a runner calls run_sandboxed")

    async def run_sandboxed(self, sandbox: Sandbox, **kwargs: Any) -> str:
        ran.append(kwargs["command"])
        return (await sandbox.exec(kwargs["command"])).stdout


@tool
def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    ran.append(city)
    return f"sunny in {city}"


def constraints(mode: str, tmp_path: Path) -> Constraints:
    return Constraints.model_validate({"execution": {"mode": mode, "workdir": str(tmp_path)}})


BATCH = [{"id": "s1", "name": "shell", "arguments": {"command": "ls"}},
         {"id": "l1", "name": "lookup", "arguments": {"city": "Oslo"}}]


@pytest.mark.parametrize(("mode", "why"), [
    (Unstartable, "no isolation on this machine"), (Unbuildable, "misconfigured")])
async def test_a_call_whose_sandbox_cannot_start_is_refused_not_counted(
    tmp_path: Path, mode: type, why: str,
) -> None:
    ran.clear()
    with plugins.registered("sandbox", "unstartable", mode):
        state = StateManager(AgentState, {"actions": BATCH})
        runner = ReactiveRunner(
            ToolExecutor(tools=[Shell(), lookup], constraints=constraints("unstartable", tmp_path)),
            state)
        seen: list[Event] = []
        runner.ctx.events.subscribe("tool.call.*", seen.append)
        result = await runner.run()
    assert result.ok, result.error
    assert ran == ["Oslo"]  # the in-process call still ran
    assert state.get("usage").tool_calls == 1
    said = {m.tool_call_id: m.content or "" for m in state.get("messages") if m.role == "tool"}
    assert why in said["s1"] and said["l1"] == "sunny in Oslo"
    shell = [e.name for e in seen if e.fields.get("call_id") == "s1"]
    assert shell == ["tool.call.failed"], shell  # never said to have started
    assert state.get("guard_ledger").calls_made == 1  # nor spent from max_tool_calls


async def test_an_agents_checkpointed_usage_leaves_out_a_call_whose_sandbox_did_not_start(
    tmp_path: Path,
) -> None:
    ran.clear()

    def agent(*script: Any) -> Agent:
        return Agent(ScriptedLLM(list(script)), tools=[Shell(), lookup],
                     constraints=constraints("unstartable", tmp_path),
                     checkpointer=SQLiteCheckpointer(tmp_path / "runs.db"))

    with plugins.registered("sandbox", "unstartable", Unstartable):
        done = await agent([{"name": "shell", "arguments": {"command": "ls"}}],
                           [{"name": "shell", "arguments": {"command": "pwd"}},
                            {"name": "lookup", "arguments": {"city": "Oslo"}}],
                           "No shell here.").run("List the files.")
        assert done.ok and ran == ["Oslo"] and done.usage.tool_calls == 1
        assert agent().restore(done.run_id).usage.tool_calls == 1


async def test_a_tool_node_whose_sandbox_cannot_start_fails_and_counts_nothing(
    tmp_path: Path,
) -> None:
    ran.clear()
    with plugins.registered("sandbox", "unstartable", Unstartable):
        state = StateManager(AgentState, {"input": {"command": "ls"}})
        node = ToolNode("step", Shell(), constraints=constraints("unstartable", tmp_path))
        runner = ReactiveRunner(node, state)
        seen: list[Event] = []
        runner.ctx.events.subscribe("tool.call.*", seen.append)
        result = await runner.run()
    assert not result.ok and ran == []
    assert "no isolation on this machine" in node.feedback_message
    assert node.result is not None and not node.result.ok
    assert state.get("usage").tool_calls == 0
    assert [e.name for e in seen] == ["tool.call.failed"]  # never said to have started


class Recorded:
    """A durable run's steps where the shell call's step was recorded by an earlier attempt."""

    def __init__(self, result: ToolResult) -> None:
        self.steps = {"tool:s1": result}

    async def run(self, key: str, factory: Any) -> Any:
        if key in self.steps:
            return self.steps.pop(key)
        return await factory()

    async def mark_started(self, keys: Any) -> None:
        pass

    def maybe_repeated(self, key: str) -> bool:
        return False

    def replays(self, key: str) -> bool:
        return key in self.steps


async def test_a_durable_calls_recorded_result_replays_without_starting_its_sandbox(
    tmp_path: Path,
) -> None:
    """The sandbox is started before a call only when the call will run: a call that ran in
    an earlier attempt of a durable run replays its result, on a worker that cannot start it."""
    ran.clear()
    with plugins.registered("sandbox", "unstartable", Unstartable):
        state = StateManager(AgentState, {"actions": BATCH[:1]})
        runner = ReactiveRunner(
            ToolExecutor(tools=[Shell()], constraints=constraints("unstartable", tmp_path)),
            state)
        runner.ctx.steps = Recorded(ToolResult(tool="shell", ok=True, output="a.txt",
                                               call_id="s1"))
        result = await runner.run()
    assert result.ok and ran == []
    said = [m.content for m in state.get("messages") if m.role == "tool"]
    assert said == ["a.txt"] and state.get("usage").tool_calls == 1


class ReplaysEveryCall(Recorded):
    """An earlier attempt recorded every tool step, whatever its key."""

    async def run(self, key: str, factory: Any) -> Any:
        return self.steps["tool:s1"] if key.startswith("tool:") else await factory()

    def replays(self, key: str) -> bool:
        return key.startswith("tool:")


async def test_a_durable_tool_nodes_recorded_step_replays_without_starting_its_sandbox(
    tmp_path: Path,
) -> None:
    ran.clear()
    with plugins.registered("sandbox", "unstartable", Unstartable):
        state = StateManager(AgentState, {"input": {"command": "ls"}})
        node = ToolNode("step", Shell(), constraints=constraints("unstartable", tmp_path))
        runner = ReactiveRunner(node, state)
        runner.ctx.steps = ReplaysEveryCall(ToolResult(tool="shell", ok=True, output="a.txt"))
        result = await runner.run()
    assert result.ok and ran == [] and state.get("output") == "a.txt"
