"""The step seam: `RunContext.step`, a `StepRecorder`, and AsyncNode's whole-node step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pytest
from py_trees.common import Status

from jianmu.llm.messages import Message
from jianmu.llm.scripted import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime import AsyncNode, ReactiveRunner, RunStatus
from jianmu.runtime.context import RunContext, StepRecorder
from jianmu.state import StateManager
from jianmu.tools import tool

pytestmark = pytest.mark.anyio

T = TypeVar("T")


class FakeSteps:
    """A `StepRecorder` in memory: records every step (numbered per key, as the contract
    says), replays what it was given."""

    def __init__(self, recorded: dict[str, Any] | None = None) -> None:
        self.recorded = dict(recorded or {})
        self.keys: list[str] = []
        self.ran: list[str] = []
        self.started: list[str] = []
        self._counts: dict[str, int] = {}

    async def run(self, key: str, factory: Callable[[], Awaitable[T]]) -> T:
        self.keys.append(key)
        count = self._counts[key] = self._counts.get(key, 0) + 1
        name = key if count == 1 else f"{key}#{count}"
        if name in self.recorded:
            return self.recorded[name]  # type: ignore[no-any-return]
        self.ran.append(name)
        value = await factory()
        self.recorded[name] = value
        return value

    async def mark_started(self, keys: Sequence[str]) -> None:
        self.started.extend(keys)

    def maybe_repeated(self, key: str) -> bool:
        return key in self.in_flight

    in_flight: frozenset[str] = frozenset()


def test_fake_is_a_step_recorder() -> None:
    assert isinstance(FakeSteps(), StepRecorder)


async def test_step_without_a_recorder_awaits_the_factory() -> None:
    ctx = RunContext()
    assert ctx.steps is None
    calls = []

    async def factory() -> int:
        calls.append(1)
        return 42

    assert await ctx.step("anything", factory) == 42
    assert await ctx.step("anything", factory) == 42
    assert calls == [1, 1]  # nothing is recorded: each step runs


async def test_react_run_records_model_turns_and_tool_calls_by_key() -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Note something."""
        ran.append(text)
        return "noted"

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "call_a", "name": "note", "arguments": {"text": "a"}},
                     {"id": "call_b", "name": "note", "arguments": {"text": "b"}}]
        return "done"

    node = create_react_node(ScriptedLLM([turn] * 3), [note])
    runner = ReactiveRunner(node, StateManager(AgentState))
    steps = FakeSteps()
    runner.ctx.steps = steps
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS, result.error
    model_keys = [k for k in steps.keys if k.startswith("model:")]
    tool_keys = [k for k in steps.keys if k.startswith("tool:")]
    assert len(model_keys) == 2 and len(set(model_keys)) == 1  # one node, two turns
    assert sorted(tool_keys) == ["tool:call_a", "tool:call_b"]
    assert sorted(steps.started) == ["tool:call_a", "tool:call_b"]
    # the agent's own nodes record their steps: no whole-node step wraps them
    assert not [k for k in steps.keys if k.startswith("node:")]
    assert sorted(ran) == ["a", "b"]

    # the same run again from the record: no tool runs, the model is not asked
    asked: list[int] = []

    def counted(messages: list[Message]) -> Any:
        asked.append(1)
        return turn(messages)

    again = FakeSteps(steps.recorded)
    runner2 = ReactiveRunner(create_react_node(ScriptedLLM([counted] * 3), [note]),
                             StateManager(AgentState))
    runner2.ctx.steps = again
    result = await runner2.run(timeout=30)
    assert result.status is RunStatus.SUCCESS, result.error
    assert again.ran == [] and asked == [] and sorted(ran) == ["a", "b"]
    assert runner2.state.get("final_answer") == "done"


async def test_a_call_in_flight_at_a_crash_is_marked_maybe_repeated() -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Note something."""
        ran.append(text)
        return "noted"

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "call_a", "name": "note", "arguments": {"text": "a"}},
                    {"id": "call_b", "name": "note", "arguments": {"text": "b"}}]
        return "done"

    # call_a finished before the crash (recorded); call_b was running (started, no result)
    first = FakeSteps()
    runner = ReactiveRunner(create_react_node(ScriptedLLM([turn] * 3), [note]),
                            StateManager(AgentState))
    runner.ctx.steps = first
    assert (await runner.run(timeout=30)).ok
    recorded = {k: v for k, v in first.recorded.items() if k != "tool:call_b"}
    recorded = {k: v for k, v in recorded.items() if not k.endswith("#2")}  # before turn 2
    again = FakeSteps(recorded)
    again.in_flight = frozenset({"tool:call_b"})
    repeated: list[dict[str, Any]] = []
    runner2 = ReactiveRunner(create_react_node(ScriptedLLM([turn] * 3), [note]),
                             StateManager(AgentState))
    runner2.ctx.steps = again
    runner2.ctx.events.subscribe("tool.call.repeated", lambda event: repeated.append(event))
    ran.clear()
    assert (await runner2.run(timeout=30)).ok
    assert ran == ["b"]  # only the call without a result runs again
    assert [e.fields["call_id"] for e in repeated] == ["call_b"]
    results = {k: v for k, v in again.recorded.items() if k.startswith("tool:")}
    assert results["tool:call_b"].maybe_repeated is False  # the stored result is the fresh one


async def test_a_payment_in_flight_at_a_crash_is_recorded_as_maybe_done_not_run_again() -> None:
    """A durable run recovered while a call that may not run twice was in flight: the call is
    not run again (it may have taken effect); its step records it as maybe done, the model
    reads that, and an event says so. Such a call is marked started on its own, as it begins,
    not with its batch: a call of the batch that never began is not in doubt."""
    ran: list[str] = []

    @tool(category="write")
    def pay(to: str) -> str:
        """Pay someone."""
        ran.append(to)
        return "paid"

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "call_a", "name": "pay", "arguments": {"to": "a"}},
                    {"id": "call_b", "name": "pay", "arguments": {"to": "b"}}]
        return "done"

    first = FakeSteps()
    runner = ReactiveRunner(create_react_node(ScriptedLLM([turn] * 3), [pay]),
                            StateManager(AgentState))
    runner.ctx.steps = first
    assert (await runner.run(timeout=30)).ok
    assert sorted(first.started) == ["tool:call_a", "tool:call_b"]  # each as it began
    recorded = {k: v for k, v in first.recorded.items() if k != "tool:call_b"}
    recorded = {k: v for k, v in recorded.items() if not k.endswith("#2")}  # before turn 2
    again = FakeSteps(recorded)
    again.in_flight = frozenset({"tool:call_b"})
    failed: list[Any] = []
    runner2 = ReactiveRunner(create_react_node(ScriptedLLM([turn] * 3), [pay]),
                             StateManager(AgentState))
    runner2.ctx.steps = again
    runner2.ctx.events.subscribe("tool.call.failed", failed.append)
    ran.clear()
    assert (await runner2.run(timeout=30)).ok
    assert ran == []  # not paid again
    result = again.recorded["tool:call_b"]
    assert result.maybe_done and not result.ok and "whether it did its work" in result.error
    assert [(e.fields["call_id"], e.fields.get("in_doubt")) for e in failed] == [
        ("call_b", True)]
    told = [m.content for m in runner2.state.get("messages") if m.role == "tool"]
    assert told[0] == "paid" and "may or may not have taken effect" in told[1]


async def test_a_tool_node_step_in_flight_at_a_crash_fails_as_maybe_done() -> None:
    """A workflow's step that may not run twice is marked started as it begins; recovered
    while it was in flight, it fails saying it may be done, and does not run again."""
    import py_trees

    from jianmu.nodes import ToolNode

    ran: list[int] = []

    @tool(category="write")
    def pay(amount: int) -> str:
        """Pay."""
        ran.append(amount)
        return "paid"

    def steps() -> Any:
        return py_trees.composites.Sequence("steps", memory=True, children=[
            ToolNode("pay", pay, input_key="amount", guarded=False)])

    first = FakeSteps()
    runner = ReactiveRunner(steps(), StateManager(AgentState, {"amount": {"amount": 5}}))
    runner.ctx.steps = first
    assert (await runner.run(timeout=30)).ok
    (key,) = first.started
    again = FakeSteps()  # nothing recorded: the worker died in the call
    again.in_flight = frozenset({key})
    runner2 = ReactiveRunner(steps(), StateManager(AgentState, {"amount": {"amount": 5}}))
    runner2.ctx.steps = again
    result = await runner2.run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert "whether it did its work is unknown" in (result.error or "")
    assert ran == [5]  # once
    assert again.recorded[key].maybe_done


async def test_durable_marks_name_each_run_of_a_step_that_runs_twice() -> None:
    """A step key a run uses twice (a workflow's step in a loop) is started, and found in
    flight, per run: the first run's mark says nothing of the second."""
    pytest.importorskip("dbos")
    from jianmu.durable._workflow import DBOSSteps
    from jianmu.tools.calls import ToolResult

    done = ToolResult(tool="pay", ok=True, output="paid")
    steps = DBOSSteps({"jianmu:tool:p": done}, {"tool:p"})
    assert not steps.maybe_repeated("tool:p")  # its first run finished: replayed

    async def never() -> ToolResult:
        raise AssertionError("a recorded step runs again")

    assert await steps.run("tool:p", never) is done
    assert not steps.maybe_repeated("tool:p")  # the second run never began before
    began = DBOSSteps({"jianmu:tool:p": done}, {"tool:p", "tool:p#2"})
    assert await began.run("tool:p", never) is done
    assert began.maybe_repeated("tool:p")  # ...here it did, and recorded nothing


def test_durable_steps_say_which_run_of_a_step_replays() -> None:
    """`DBOSSteps.replays`, seen under a namespace too (`ScopedSteps`): a call whose step
    replays starts no sandbox (`jianmu.nodes._before_run`)."""
    pytest.importorskip("dbos")
    from jianmu.durable._workflow import DBOSSteps
    from jianmu.runtime.scopes import ScopedSteps

    steps = DBOSSteps({"jianmu:left/tool:p": "paid"}, set())
    scoped = ScopedSteps(steps, "left/")
    assert scoped.replays("tool:p") and not scoped.replays("tool:q")
    assert not steps.replays("tool:p")  # another namespace's call of that id
    assert not ScopedSteps(FakeSteps(), "left/").replays("tool:p")  # a recorder that can't say


class Writer(AsyncNode):
    """A plain node: its update_async writes to the state, and counts its runs."""

    def __init__(self) -> None:
        super().__init__("writer")
        self.runs = 0

    async def update_async(self) -> Status:
        self.runs += 1
        self.state.replace({"greeting": f"hello {self.runs}"})
        return Status.SUCCESS


def _writer_run(steps: FakeSteps) -> tuple[Writer, ReactiveRunner]:
    node = Writer()
    runner = ReactiveRunner(node, StateManager())
    runner.ctx.steps = steps
    return node, runner


async def test_plain_async_node_is_one_step_with_its_writes() -> None:
    steps = FakeSteps()
    node, runner = _writer_run(steps)
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    assert node.runs == 1
    key = f"node:{node.path or node.name}"
    assert steps.keys == [key]
    status, writes = steps.recorded[key]
    assert status == "SUCCESS"
    assert writes == {"greeting": "hello 1"}


async def test_replayed_plain_node_restores_its_writes_without_running() -> None:
    first = FakeSteps()
    _node, runner = _writer_run(first)
    await runner.run(timeout=30)
    key = first.keys[0]

    # a recovered run: the recorder hands back the recorded step, the node does not run
    again = FakeSteps({key: ("SUCCESS", {"greeting": "recorded hello"})})
    node2, runner2 = _writer_run(again)
    result = await runner2.run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    assert node2.runs == 0
    assert again.ran == []
    assert runner2.state.get("greeting") == "recorded hello"


async def test_replayed_failure_status_comes_back() -> None:
    node, runner = _writer_run(FakeSteps({"node:writer": ("FAILURE", {})}))
    result = await runner.run(timeout=30)
    assert node.runs == 0
    assert result.status is RunStatus.FAILURE
