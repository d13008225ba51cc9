"""`fork_run`: a new run from any point of another, which stays as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import py_trees
import pytest
from py_trees.common import Status

from jianmu import AgentState, AsyncNode, ToolExecutor, tool
from jianmu.errors import CheckpointError, StateValidationError
from jianmu.runtime import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.runtime.fork import fork_run
from jianmu.state import StateManager

pytestmark = pytest.mark.anyio

CALLS: list[str] = []


@tool(category="write")
def record(text: str) -> str:
    """Record a line (the test counts the calls).

    Args:
        text: What to record.
    """
    CALLS.append(text)
    return f"recorded {text}"


@tool(category="write", permission="user_confirm")
def deploy(target: str) -> str:
    """Deploy (asks a person first).

    Args:
        target: Where.
    """
    CALLS.append(f"deploy {target}")
    return f"deployed {target}"


class Plan(AsyncNode):
    def __init__(self, name: str, call: dict[str, Any]) -> None:
        super().__init__(name)
        self.call = call

    async def update_async(self) -> Status:
        self.state.update({"actions": [self.call]})
        return Status.SUCCESS


class Report(AsyncNode):
    async def update_async(self) -> Status:
        tools = [m.content for m in self.state.get("messages") or [] if m.role == "tool"]
        self.state.update({"final_answer": " | ".join(str(t) for t in tools)})
        return Status.SUCCESS


def build(tool_name: str = "record") -> py_trees.behaviour.Behaviour:
    tools = [record, deploy]
    call = {"id": "c1", "name": tool_name, "arguments": {"text": "one"} if tool_name ==
            "record" else {"target": "prod"}}
    return py_trees.composites.Sequence("flow", memory=True, children=[
        Plan("plan", call), ToolExecutor("execute", tools), Report("report")])


@pytest.fixture(autouse=True)
def _calls() -> None:
    CALLS.clear()


async def _finished(store: SQLiteCheckpointer, tool_name: str = "record") -> ReactiveRunner:
    runner = ReactiveRunner(build(tool_name), StateManager(AgentState), checkpointer=store)
    result = await runner.run()
    if result.status is RunStatus.SUSPENDED:
        runner.approve("c1")
        result = await runner.run()
    assert result.ok
    return runner


def _point(store: SQLiteCheckpointer, run_id: str, node: str, status: str) -> int:
    """The first point where ``node`` (a key) has ``status``."""
    for point in store.history.points(run_id):
        if store.history.frame(run_id, point.number).statuses.get(node) == status:
            return point.number
    raise AssertionError(f"no point where {node} is {status}")


async def _restore(store: SQLiteCheckpointer, fork_id: str, tool_name: str = "record"
                   ) -> ReactiveRunner:
    return ReactiveRunner.restore(build(tool_name), store, fork_id,
                                  state_manager=StateManager(AgentState))


async def test_a_call_finished_before_the_point_does_not_run_again(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    original = await _finished(store)
    kept = store.load(original.run_id)
    kept_points = store.history.points(original.run_id)
    after_call = _point(store, original.run_id, "0/1", "SUCCESS")
    fork_id = fork_run(store, original.run_id, after_call)
    assert fork_id != original.run_id
    fork = await _restore(store, fork_id)
    assert (await fork.run()).ok
    assert CALLS == ["one"]  # the original's call only
    assert fork.state.get("final_answer") == "recorded one"
    assert store.load(original.run_id) == kept  # the original is untouched
    assert store.history.points(original.run_id) == kept_points
    assert store.history.run(fork_id)["parent"] == original.run_id
    assert store.history.run(fork_id)["parent_point"] == after_call
    [forked] = [e for e in store.history.events(fork_id) if e["name"] == "run.forked"]
    assert forked["point"] == 0 and forked["fields"]["run"] == original.run_id
    store.close()


async def test_a_call_after_the_point_runs_again_with_new_arguments(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    original = await _finished(store)
    before_call = _point(store, original.run_id, "0/1", "RUNNING")
    fork_id = fork_run(store, original.run_id, before_call, values={
        "actions": [{"id": "c1", "name": "record", "arguments": {"text": "two"}}]})
    fork = await _restore(store, fork_id)
    assert (await fork.run()).ok
    assert CALLS == ["one", "two"]
    assert fork.state.get("final_answer") == "recorded two"
    store.close()


async def test_an_approval_of_the_original_allows_nothing_in_the_fork(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    original = await _finished(store, "deploy")
    assert CALLS == ["deploy prod"]
    # the point where the executor already has its approval and is about to run the call
    approved = max(e["point"] for e in store.history.events(original.run_id)
                   if e["name"] == "interaction.approved")
    fork_id = fork_run(store, original.run_id, approved)
    fork = await _restore(store, fork_id, "deploy")
    result = await fork.run()
    assert result.status is RunStatus.SUSPENDED  # the guard asks again, in the fork
    assert [r.id for r in result.pending] == ["c1"]
    assert CALLS == ["deploy prod"]
    fork.reject("c1", "not again")
    assert (await fork.run()).ok
    assert CALLS == ["deploy prod"]
    store.close()


async def test_a_fork_may_be_forked(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    original = await _finished(store)
    first = fork_run(store, original.run_id, 1)
    await (await _restore(store, first)).run()
    second = fork_run(store, first, 0)
    assert (await (await _restore(store, second)).run()).ok
    assert store.history.run(second)["parent"] == first
    store.close()


async def test_bad_points_and_states_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    original = await _finished(store)
    runs = {r[0] for r in store.list_runs()}
    last = store.history.last_point(original.run_id)
    with pytest.raises(CheckpointError, match=f"no point 999: its points are 0 to {last}"):
        fork_run(store, original.run_id, 999)
    with pytest.raises(CheckpointError, match="no run 'nope'"):
        fork_run(store, "nope", 0)
    with pytest.raises(CheckpointError, match="'root' must be a JSON object"):
        fork_run(store, original.run_id, 0, state={"root": [1, 2]})
    with pytest.raises(CheckpointError, match="unknown parts"):
        fork_run(store, original.run_id, 0, state={"root": {}, "extra": 1})
    with pytest.raises(CheckpointError, match=r"no namespace 'skill_runtime\.x'"):
        fork_run(store, original.run_id, 0, values={"skill_runtime.x/key": 1})
    assert {r[0] for r in store.list_runs()} == runs
    fork_id = fork_run(store, original.run_id, 0, values={"rounds": "many"})
    with pytest.raises(StateValidationError, match="rounds"):  # the schema is checked on restore
        await _restore(store, fork_id)
    store.close()


async def test_a_fork_is_edited_only_when_its_state_differs(tmp_path: Path) -> None:
    import json

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    original = await _finished(store)
    state = store.history.frame(original.run_id, 1).state
    sent_back = json.loads(json.dumps(state))  # what the studio's fork box sends unchanged

    def edited(fork_id: str) -> bool:
        (forked,) = [e for e in store.history.events(fork_id) if e["name"] == "run.forked"]
        return bool(forked["fields"]["edited"])

    assert not edited(fork_run(store, original.run_id, 1))
    assert not edited(fork_run(store, original.run_id, 1, state=sent_back))
    assert not edited(fork_run(store, original.run_id, 1, values={
        "rounds": state["root"].get("rounds", 0)}))
    assert edited(fork_run(store, original.run_id, 1, values={"rounds": 7}))
    sent_back["root"]["final_answer"] = "changed by a person"
    assert edited(fork_run(store, original.run_id, 1, state=sent_back))
    store.close()


async def test_a_run_saved_by_another_version_is_not_forked(tmp_path: Path) -> None:
    """The fork was made, stamped with the other version's number, then refused under its own
    new id ("run 'NEW' was saved by another version"), naming a run nobody had heard of."""
    import json
    import sqlite3

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    original = await _finished(store)
    saved = store.load(original.run_id)
    assert saved is not None
    newer = {**saved, "version": 2}
    with sqlite3.connect(tmp_path / "runs.sqlite") as db:
        db.execute("UPDATE checkpoints SET data = ? WHERE run_id = ?",
                   (json.dumps(newer), original.run_id))
    db.close()
    runs = {r[0] for r in store.list_runs()}
    with pytest.raises(CheckpointError, match=f"cannot fork run {original.run_id!r}: its "
                       "checkpoint is version 2"):
        fork_run(store, original.run_id, 0)
    assert {r[0] for r in store.list_runs()} == runs
    store.close()
