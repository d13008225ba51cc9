"""Red team, work that finished before a tick read it: it is never done again.

- A run that suspends lets the work under way in its other branches finish first, and saves
  its checkpoint: a `ToolNode` whose write finished there was saved RUNNING, with nothing to say
  it was done, so the run restored in another process (``jianmu resume --approve``) made the
  write again. The same for a model turn finished there: the model was asked (and billed) again.
- A ``cancel()`` landing after a `ToolNode`'s write returned but before a tick read it stopped
  the node as if it had not run: the next ``run()`` made the write again.

The node now keeps the status its work ended with, in the checkpoint too, and the run that goes
on reads it where it next ticks the node.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import py_trees
import pytest
from py_trees.common import ParallelPolicy, Status

from jianmu import AgentState, AsyncNode, ReactiveRunner, SQLiteCheckpointer, StateManager, tool
from jianmu.llm import ScriptedLLM
from jianmu.nodes import ToolNode, create_react_node
from jianmu.runtime import RunStatus
from jianmu.runtime.context import ApprovalRequest

SHIPPED: list[str] = []


class Ask(AsyncNode):
    """Waits for a person's yes to "deploy"."""

    async def update_async(self) -> Status:
        if self.ctx.interaction.decision("deploy") is None:
            self.ctx.interaction.suspend(ApprovalRequest(id="deploy", summary="deploy?"))
            return Status.RUNNING
        return Status.SUCCESS


class Gate:
    """Lets the write go on once the other branch has asked its question."""

    asked: asyncio.Event | None = None


@tool(category="write")
async def ship(item: str = "box") -> str:
    """Ship a parcel.

    Args:
        item: what to ship.
    """
    SHIPPED.append(item)
    if Gate.asked is not None:
        await Gate.asked.wait()  # still under way as the run suspends
    return "shipped"


class AskFirst(Ask):
    async def update_async(self) -> Status:
        status = await super().update_async()
        if Gate.asked is not None:
            Gate.asked.set()
        return status


def _suspending_tree(other: py_trees.behaviour.Behaviour) -> py_trees.behaviour.Behaviour:
    return py_trees.composites.Parallel(
        "both", policy=ParallelPolicy.SuccessOnAll(), children=[AskFirst("ask"), other])


def _suspended(runner: ReactiveRunner) -> RunStatus:
    """Run ``runner`` with its branches gated: the work under way finishes as it suspends."""

    async def start() -> RunStatus:
        Gate.asked = asyncio.Event()
        try:
            return (await runner.run(timeout=60)).status
        finally:
            Gate.asked = None

    return asyncio.run(start())


def test_a_write_finished_as_the_run_suspended_is_not_made_again_after_a_restore(
    tmp_path: Path,
) -> None:
    SHIPPED.clear()

    def tree() -> py_trees.behaviour.Behaviour:
        return _suspending_tree(ToolNode("ship", ship, input_key=None, output_key="receipt"))

    with SQLiteCheckpointer(tmp_path / "cp.db") as store:
        first = ReactiveRunner(tree(), StateManager(AgentState), checkpointer=store)
        assert _suspended(first) is RunStatus.SUSPENDED
        assert SHIPPED == ["box"]
        # another process: the tree built anew, the run restored from its checkpoint
        again = ReactiveRunner.restore(tree(), store, first.run_id)
        again.approve("deploy")
        result = again.run_sync(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert SHIPPED == ["box"] and again.state.get("receipt") == "shipped"


def test_a_model_turn_finished_as_the_run_suspended_is_not_asked_again(tmp_path: Path) -> None:
    asked: list[str] = []

    class Model(ScriptedLLM):
        async def send(self, request):  # type: ignore[no-untyped-def]
            asked.append("asked")
            if Gate.asked is not None:
                await Gate.asked.wait()
            return await super().send(request)

    def tree() -> py_trees.behaviour.Behaviour:
        return _suspending_tree(create_react_node(Model(["the answer"] * 3), [], name="reader"))

    def state() -> StateManager:
        return StateManager(AgentState, {"messages": [{"role": "user", "content": "read"}]})

    with SQLiteCheckpointer(tmp_path / "cp.db") as store:
        first = ReactiveRunner(tree(), state(), checkpointer=store)
        assert _suspended(first) is RunStatus.SUSPENDED
        again = ReactiveRunner.restore(tree(), store, first.run_id)
        again.approve("deploy")
        result = again.run_sync(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert asked == ["asked"]
    assert [(m.role, m.content) for m in again.state.get("messages")] == [
        ("user", "read"), ("assistant", "the answer")]


def test_a_write_that_returned_as_the_run_was_cancelled_is_not_made_again(
    tmp_path: Path,
) -> None:
    shipped: list[str] = []
    runners: list[ReactiveRunner] = []

    @tool(category="write")
    async def send_parcel(item: str = "box") -> str:
        """Ship a parcel.

        Args:
            item: what to ship.
        """
        shipped.append(item)
        runners[0].cancel()  # a person presses Cancel just as the call returns
        return "shipped"

    tree = py_trees.composites.Sequence("flow", memory=True, children=[
        ToolNode("ship", send_parcel, input_key=None, output_key="receipt"),
        py_trees.behaviours.Success("after")])
    with SQLiteCheckpointer(tmp_path / "cp.db") as store:
        runner = ReactiveRunner(tree, StateManager(AgentState), checkpointer=store)
        runners.append(runner)
        assert runner.run_sync(timeout=60).status is RunStatus.CANCELLED
        assert runner.run_sync(timeout=60).status is RunStatus.SUCCESS
        assert shipped == ["box"]
        # and restored elsewhere from that cancelled run's checkpoint, the same
        shipped.clear()
        fresh = py_trees.composites.Sequence("flow", memory=True, children=[
            ToolNode("ship", send_parcel, input_key=None, output_key="receipt"),
            py_trees.behaviours.Success("after")])
        other = ReactiveRunner(fresh, StateManager(AgentState), checkpointer=store)
        runners[0] = other
        assert other.run_sync(timeout=60).status is RunStatus.CANCELLED
        again = ReactiveRunner.restore(
            py_trees.composites.Sequence("flow", memory=True, children=[
                ToolNode("ship", send_parcel, input_key=None, output_key="receipt"),
                py_trees.behaviours.Success("after")]),
            store, other.run_id)
        assert again.run_sync(timeout=60).status is RunStatus.SUCCESS
        assert shipped == ["box"]


@pytest.mark.parametrize("stream", [False, True])
def test_an_agents_answer_that_came_as_the_run_was_cancelled_is_not_asked_again(
    tmp_path: Path, stream: bool,
) -> None:
    """The model's answer came just as a person pressed Cancel: the agent's loop, entered
    again by the next run, started afresh and asked the model (and paid) again."""
    asked: list[str] = []
    runners: list[ReactiveRunner] = []

    class Model(ScriptedLLM):
        async def send(self, request):  # type: ignore[no-untyped-def]
            asked.append("asked")
            said = await super().send(request)
            runners[0].cancel()  # a person presses Cancel just as the answer comes
            return said

    def tree() -> py_trees.behaviour.Behaviour:
        return create_react_node(Model(["the answer", "again"]), [], name="reader",
                                 stream=stream)

    def state() -> StateManager:
        return StateManager(AgentState, {"messages": [{"role": "user", "content": "read"}]})

    with SQLiteCheckpointer(tmp_path / "cp.db") as store:
        runner = ReactiveRunner(tree(), state(), checkpointer=store)
        runners.append(runner)
        assert runner.run_sync(timeout=60).status is RunStatus.CANCELLED
        result = runner.run_sync(timeout=60)
        assert result.status is RunStatus.SUCCESS, result.error
        assert asked == ["asked"] and runner.state.get("final_answer") == "the answer"
        # and restored elsewhere from such a cancelled run's checkpoint, the same
        asked.clear()
        runners[0] = other = ReactiveRunner(tree(), state(), checkpointer=store)
        assert other.run_sync(timeout=60).status is RunStatus.CANCELLED
        again = ReactiveRunner.restore(tree(), store, other.run_id)
        result = again.run_sync(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert asked == ["asked"]
    assert [(m.role, m.content) for m in again.state.get("messages")] == [
        ("user", "read"), ("assistant", "the answer")]


def test_a_kept_turn_of_calls_is_not_run_after_the_person_sends_a_new_message(
    tmp_path: Path,
) -> None:
    """The model's calls came just as a person pressed Cancel, who then said "don't": the
    kept turn still ran its payments after that message. The conversation has moved on: its
    calls are closed as not run, and the model answers the new message."""
    paid: list[str] = []
    runners: list[ReactiveRunner] = []

    @tool(category="write")
    def pay(key: str) -> str:
        """Pay.

        Args:
            key: which payment.
        """
        paid.append(key)
        return f"paid {key}"

    def calls(messages: Any) -> Any:
        runners[0].cancel()  # pressed while the model answers
        return [{"name": "pay", "arguments": {"key": "k0"}},
                {"name": "pay", "arguments": {"key": "k1"}}]

    def answer(messages: Any) -> str:
        return f"answering: {messages[-1].content}"

    with SQLiteCheckpointer(tmp_path / "cp.db") as store:
        for restored in (False, True):
            paid.clear()
            state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pay"}]})
            runner = ReactiveRunner(create_react_node(ScriptedLLM([calls, answer]), [pay]),
                                    state, checkpointer=store)
            runners[:] = [runner]
            assert runner.run_sync(timeout=60).status is RunStatus.CANCELLED
            if restored:
                runner = ReactiveRunner.restore(
                    create_react_node(ScriptedLLM([answer]), [pay]), store, runner.run_id)
            runner.send("stop! do not pay anything")
            result = runner.run_sync(timeout=60)
            assert result.status is RunStatus.SUCCESS, result.error
            assert paid == []
            assert result.output is None and runner.state.get("final_answer") == (
                "answering: stop! do not pay anything")


def test_a_kept_status_serves_the_next_run_only() -> None:
    """A run that does not reach the node again drops what it kept: a later entry is new."""
    made: list[int] = []
    runners: list[ReactiveRunner] = []
    gate = {"open": False}

    class Work(AsyncNode):
        async def update_async(self) -> Status:
            await asyncio.sleep(0)  # ends after the tick that started it, as real work does
            made.append(1)
            if len(made) == 1:
                runners[0].cancel()
            return Status.SUCCESS

    class Door(AsyncNode):
        async def update_async(self) -> Status:
            return Status.SUCCESS if gate["open"] else Status.FAILURE

    tree = py_trees.composites.Sequence("flow", memory=False, children=[Door("door"),
                                                                         Work("work")])
    gate["open"] = True
    runner = ReactiveRunner(tree, StateManager(AgentState))
    runners.append(runner)
    assert runner.run_sync(timeout=60).status is RunStatus.CANCELLED  # work done, unread
    assert tree.children[1]._finished is Status.SUCCESS  # kept for the next run
    gate["open"] = False
    assert runner.run_sync(timeout=60).status is RunStatus.FAILURE  # the door: never reached
    gate["open"] = True
    runner.state.update({"final_answer": None})  # new input: the finished run goes on
    assert runner.run_sync(timeout=60).status is RunStatus.SUCCESS
    assert len(made) == 2  # done anew: the kept status was the second run's only
