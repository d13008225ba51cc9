"""The run's points: what `TickRecorder` writes beside the checkpoints, and `RunHistory`
replaying it back to any point."""

from __future__ import annotations

import asyncio
import json
import operator
from pathlib import Path
from typing import Annotated, Any

import py_trees
import pytest
from py_trees.common import Status
from pydantic import BaseModel, Field

from jianmu.errors import CheckpointError
from jianmu.runtime import (
    ApprovalRequest,
    AsyncNode,
    Event,
    ReactiveRunner,
    RunStatus,
    SQLiteCheckpointer,
)
from jianmu.runtime.points import apply_ops, snapshot_ops
from jianmu.state import StateManager

pytestmark = pytest.mark.anyio


class Log(BaseModel):
    log: Annotated[list[str], operator.add] = Field(default_factory=list)
    count: int = 0
    approved: bool | None = None


class Note(AsyncNode):
    """Appends its name to ``log`` and counts."""

    async def update_async(self) -> Status:
        self.state.update({"log": [self.name], "count": (self.state.get("count") or 0) + 1})
        return Status.SUCCESS


class Ask(AsyncNode):
    async def update_async(self) -> Status:
        decision = self.ctx.interaction.decision("go")
        if decision is None:
            self.ctx.interaction.suspend(ApprovalRequest(
                id="go", summary="go?", payload={"tool": "launch", "arguments": {"n": 1}},
                node=self.path))
            return Status.RUNNING
        self.state.write_port("approved", decision.approved)
        return Status.SUCCESS


class Wait(py_trees.behaviour.Behaviour):
    """RUNNING for ``n`` ticks without changing anything (a polled timer)."""

    def __init__(self, n: int) -> None:
        super().__init__("wait")
        self.n = n
        self.left = n

    def update(self) -> Status:
        self.left -= 1
        return Status.SUCCESS if self.left <= 0 else Status.RUNNING


def tree(*children: py_trees.behaviour.Behaviour) -> py_trees.behaviour.Behaviour:
    return py_trees.composites.Sequence("root", memory=True, children=list(children))


def watch(runner: ReactiveRunner) -> list[tuple[int, dict[str, Any], dict[str, str]]]:
    """The state and statuses after every tick, seen from outside the recorder."""
    seen: list[tuple[int, dict[str, Any], dict[str, str]]] = []

    def on_tick(event: Event) -> None:
        statuses = {runner.node_key(n): n.status.name for n in runner.root.iterate()}
        seen.append((event.fields["tick"], runner.state.snapshot(), statuses))

    runner.ctx.events.subscribe("run.ticked", on_tick)
    return seen


async def test_every_point_replays_to_the_state_and_statuses_of_its_tick(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    runner = ReactiveRunner(tree(Note("a"), Note("b"), Note("c")), StateManager(Log),
                            checkpointer=store)
    seen = watch(runner)
    assert (await runner.run()).ok
    history = store.history
    points = history.points(runner.run_id)
    assert [p.number for p in points] == list(range(len(points)))
    assert points[0].tick == 0 and history.frame(runner.run_id, 0).state["root"]["log"] == []
    by_tick = {tick: (state, statuses) for tick, state, statuses in seen}
    for point in points[1:]:
        frame = history.frame(runner.run_id, point.number)
        state, statuses = by_tick[point.tick]
        assert frame.state == state, point
        assert frame.statuses == statuses, point
    last = history.frame(runner.run_id, points[-1].number)
    assert last.state == runner.state.snapshot()
    assert last.tree["0/1"]["path"] == "root/b" and last.tree["0"]["kind"] == "sequence"
    assert last.written["root/b"] == ["count", "log"]  # who wrote what, where known
    store.close()


async def test_a_tick_that_changes_nothing_is_no_point(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    runner = ReactiveRunner(tree(Wait(20), Note("after")), StateManager(Log), checkpointer=store)
    result = await runner.run()
    assert result.ok and runner.ticks >= 20
    points = store.history.points(runner.run_id)
    assert len(points) < 8, [(p.tick, p.keys, p.nodes) for p in points]
    store.close()


async def test_an_appended_list_stores_only_its_new_items(tmp_path: Path) -> None:
    class Many(AsyncNode):
        async def update_async(self) -> Status:
            for i in range(200):
                self.state.update({"log": [f"entry {i} " + "x" * 50]})
                await self.ctx_tick()
            return Status.SUCCESS

        async def ctx_tick(self) -> None:
            import asyncio

            await asyncio.sleep(0)  # lets the runner tick between writes

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    runner = ReactiveRunner(tree(Many("many")), StateManager(Log), checkpointer=store)
    assert (await runner.run()).ok
    with store._lock:
        sizes = [len(r[0]) for r in store._db.execute(
            "SELECT data FROM jianmu_points WHERE run_id = ? AND point > 0",
            (runner.run_id,)).fetchall()]
    assert len(sizes) > 10
    assert max(sizes) < 2000, sizes  # one point holds the entries of its tick, not the list
    final = store.history.frame(runner.run_id, store.history.last_point(runner.run_id) or 0)
    assert len(final.state["root"]["log"]) == 200
    store.close()


async def test_a_restored_run_continues_its_points(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    first = ReactiveRunner(tree(Note("a"), Ask("ask"), Note("b")), StateManager(Log),
                           checkpointer=SQLiteCheckpointer(path))
    assert (await first.run()).status is RunStatus.SUSPENDED
    first.checkpointer.close()  # type: ignore[union-attr]
    store = SQLiteCheckpointer(path)
    before = store.history.points(first.run_id)
    again = ReactiveRunner.restore(tree(Note("a"), Ask("ask"), Note("b")), store, first.run_id,
                                   state_manager=StateManager(Log))
    again.approve("go", "yes (approved by tester in Jianmu Studio)")
    assert (await again.run()).ok
    points = store.history.points(first.run_id)
    assert points[:len(before)] == before  # nothing rewritten, no second start
    assert [p.number for p in points] == list(range(len(points)))
    last = store.history.frame(first.run_id, points[-1].number)
    assert last.state == again.state.snapshot()
    assert last.statuses == {again.node_key(n): n.status.name for n in again.root.iterate()}
    names = [e["name"] for e in store.history.events(first.run_id)]
    assert names.index("interaction.asked") < names.index("interaction.approved")
    [approved] = [e for e in store.history.events(first.run_id)
                  if e["name"] == "interaction.approved"]
    assert approved["fields"]["message"] == "yes (approved by tester in Jianmu Studio)"
    assert approved["fields"]["tool"] == "launch"
    assert approved["point"] == len(before)  # it led to the first point after the pause
    store.close()


async def test_events_keep_the_order_they_happened_in(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    runner = ReactiveRunner(tree(Ask("ask"), Note("b")), StateManager(Log), checkpointer=store)
    await runner.run()
    runner.approve("go")
    await runner.run()
    events = store.history.events(runner.run_id)
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    assert [e["point"] for e in events] == sorted(e["point"] for e in events)
    assert not any(e["name"] in ("run.ticked", "llm.call.delta") for e in events)
    store.close()


async def test_runs_without_recorded_ticks_have_their_checkpoints_as_points(
        tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite", record_ticks=False)
    runner = ReactiveRunner(tree(Note("a"), Ask("ask"), Note("b")), StateManager(Log),
                            checkpointer=store)
    await runner.run()
    runner.approve("go")
    await runner.run()
    points = store.history.points(runner.run_id)
    assert {p.kind for p in points} == {"checkpoint"} and len(points) >= 2
    assert store.history.frame(runner.run_id, points[-1].number).state == \
        runner.state.snapshot()
    with pytest.raises(CheckpointError, match="no point 99: its points are 0 to"):
        store.history.frame(runner.run_id, 99)
    store.close()


async def test_a_cleared_namespace_is_dropped_at_its_point(tmp_path: Path) -> None:
    class Scoped(AsyncNode):
        async def update_async(self) -> Status:
            self.state_manager.scope("skill_runtime.x_0_1").update({"count": 5})
            return Status.SUCCESS

    class Clear(AsyncNode):
        async def update_async(self) -> Status:
            await asyncio.sleep(0)  # a tick after the one that wrote it: a point between
            self.state_manager.clear_namespace("skill_runtime.x_0_1")
            return Status.SUCCESS

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    runner = ReactiveRunner(tree(Scoped("scoped"), Clear("clear")), StateManager(Log),
                            checkpointer=store)
    assert (await runner.run()).ok
    history = store.history
    frames = [history.frame(runner.run_id, p.number) for p in history.points(runner.run_id)]
    had = [f for f in frames if "skill_runtime.x_0_1" in f.state["namespaces"]]
    assert had and had[0].state["namespaces"]["skill_runtime.x_0_1"]["count"] == 5
    assert "skill_runtime.x_0_1/*" in frames[-1].changed or \
        "skill_runtime.x_0_1" not in frames[-1].state["namespaces"]
    assert frames[-1].state == runner.state.snapshot()
    store.close()


def test_ops_rebuild_a_snapshot_without_touching_the_old_one() -> None:
    before = {"version": 1, "root": {"log": ["a"], "n": 1}, "namespaces": {"s": {"k": 1}}}
    kept = json.loads(json.dumps(before))
    after = apply_ops(before, [["add", None, "log", ["b"]], ["set", None, "n", 2],
                               ["del", "s", "k"], ["set", "t", "k", 3]])
    assert after == {"version": 1, "root": {"log": ["a", "b"], "n": 2},
                     "namespaces": {"s": {}, "t": {"k": 3}}}
    assert before == kept
    assert apply_ops(after, [["drop", "s"]])["namespaces"] == {"t": {"k": 3}}
    assert apply_ops({"version": 1, "root": {}, "namespaces": {}}, snapshot_ops(after)) == after


async def test_a_state_value_that_is_not_json_does_not_stop_the_run(tmp_path: Path) -> None:
    class Odd(AsyncNode):
        async def update_async(self) -> Status:
            self.state.update({"thing": object()})
            return Status.SUCCESS

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite", record_ticks=True)
    runner = ReactiveRunner(tree(Odd("odd")), StateManager(), checkpointer=store)
    result = await runner.run()
    # the state refuses the value (not JSON): the node fails; the recorder is not the cause
    assert result.status is RunStatus.FAILURE
    assert store.history.points(runner.run_id)
    store.close()


async def test_the_users_next_message_is_recorded_with_its_text(tmp_path: Path) -> None:
    from jianmu.nodes import AgentState

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    runner = ReactiveRunner(tree(Note("a")), StateManager(AgentState), checkpointer=store)
    assert (await runner.run()).ok
    runner.send("and now in French?")
    await runner.run()
    [said] = [e for e in store.history.events(runner.run_id) if e["name"] == "run.message"]
    assert said["fields"]["content"] == "and now in French?"
    store.close()


async def test_a_subtree_compiled_on_its_first_tick_appears_at_that_point(
        tmp_path: Path) -> None:
    from jianmu.skills.node import FlattenedAgentNode

    class Lazy(FlattenedAgentNode):
        def compile_subtree(self) -> py_trees.behaviour.Behaviour:
            return py_trees.composites.Sequence("inner", memory=True,
                                                children=[Note("x"), Note("y")])

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    runner = ReactiveRunner(tree(Note("a"), Lazy("lazy")), StateManager(Log),
                            checkpointer=store)
    assert (await runner.run()).ok
    history = store.history
    frames = [history.frame(runner.run_id, p.number) for p in history.points(runner.run_id)]
    assert "0/1/0" not in frames[0].tree and frames[0].tree["0/1"]["kind"] == "skill"
    grown = next(f for f in frames if "0/1/0" in f.tree)
    assert grown.tree["0/1/0/1"]["path"] == "root/lazy/inner/y"
    assert grown.tree["0/1/0/1"]["ns"].startswith("skill_runtime.lazy_0_1")
    assert frames[-1].statuses["0/1/0/1"] == "SUCCESS"
    store.close()
