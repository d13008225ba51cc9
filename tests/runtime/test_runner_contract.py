"""What `ReactiveRunner` promises and nothing else checked: resources closed at a run's end,
a restored composite resuming at the right child, checkpoints it refuses or writes, how long
a run took and why it failed (the mutation score of ``jianmu/runtime/runner.py`` rests here)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any

import py_trees
import pytest
from py_trees.common import ParallelPolicy, Status

from jianmu.errors import CheckpointError, RunClaimedError, RunFailed
from jianmu.runtime import (
    Event,
    ReactiveRunner,
    RunResult,
    RunStatus,
    SQLiteCheckpointer,
)
from jianmu.runtime.checkpoint import CHECKPOINT_VERSION
from jianmu.state import StateManager
from tests.runtime._runner_nodes import (
    Ask,
    Boom,
    Closes,
    Fails,
    Gate,
    Log,
    Raises,
    Store,
    checkpoint,
    composite,
    events_of,
)

pytestmark = pytest.mark.anyio


# -- resources closed when a run finishes --------------------------------------------------------
async def test_a_finished_run_awaits_every_closer_once_even_after_one_fails() -> None:
    closed: list[str] = []

    async def first() -> None:
        closed.append("first")

    async def broken() -> None:
        closed.append("broken")
        raise OSError("socket gone")

    async def last() -> None:
        closed.append("last")

    root = Closes("open", [first, broken, last, first])  # a closer registered twice runs once
    runner = ReactiveRunner(root)
    seen = events_of(runner)
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUCCESS
    assert closed == ["first", "broken", "last"]
    failed = [e for e in seen if e.name == "run.cleanup_failed"]
    assert [e.fields["error"] for e in failed] == ["OSError: socket gone"]
    assert runner.ctx.closers == []
    await runner.aclose()  # nothing left to close twice
    assert closed == ["first", "broken", "last"]


async def test_a_failed_or_cancelled_run_closes_its_resources_too() -> None:
    closed: list[str] = []

    async def close() -> None:
        closed.append("closed")

    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Closes("open", [close]), Fails("no")]
    )
    result = await ReactiveRunner(root).run(timeout=10)
    assert result.status is RunStatus.FAILURE and closed == ["closed"]

    gate = Gate("wait")
    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Closes("open", [close]), gate]
    )
    runner = ReactiveRunner(root)
    task = asyncio.create_task(runner.run(timeout=10))
    await gate.started.wait()
    runner.cancel()
    result = await task
    assert result.status is RunStatus.CANCELLED and closed == ["closed", "closed"]


async def test_a_suspended_run_keeps_its_resources_until_it_finishes() -> None:
    closed: list[str] = []

    async def close() -> None:
        closed.append("closed")

    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Closes("open", [close]), Ask("ask")]
    )
    runner = ReactiveRunner(root)
    assert (await runner.run(timeout=10)).status is RunStatus.SUSPENDED
    assert closed == [] and runner.ctx.closers == [close]
    runner.approve("deploy")
    assert (await runner.run(timeout=10)).status is RunStatus.SUCCESS
    assert closed == ["closed"]


async def test_aclose_closes_what_a_suspended_run_holds_and_gives_up_its_lease() -> None:
    closed: list[str] = []

    async def close() -> None:
        closed.append("closed")

    store = SQLiteCheckpointer(":memory:")
    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Closes("open", [close]), Ask("ask")]
    )
    async with ReactiveRunner(root, checkpointer=store, owner="me") as runner:
        assert (await runner.run(timeout=10)).status is RunStatus.SUSPENDED
        runner.approve("deploy")  # claims the run again
        assert store.holder(runner.run_id).owner == "me"  # type: ignore[union-attr]
    assert closed == ["closed"]
    assert store.holder(runner.run_id) is None


# -- a restored composite resumes at the right child ---------------------------------------------
@pytest.mark.parametrize("kind", [py_trees.composites.Sequence, py_trees.composites.Selector])
async def test_a_restored_composite_resumes_at_its_running_child(kind: type) -> None:
    store = Store()
    store.rows["r1"] = checkpoint(["SUCCESS" if kind is py_trees.composites.Sequence
                                   else "FAILURE", "SUCCESS", "RUNNING", "INVALID"])
    root = composite(kind, 4)
    runner = ReactiveRunner.restore(root, store, "r1", state_manager=StateManager())
    assert root.current_child is root.children[2]
    assert runner.ticks == 7 and runner.ctx.user_roles == frozenset({"admin"})
    assert [c.status for c in root.children] == [
        Status.SUCCESS if kind is py_trees.composites.Sequence else Status.FAILURE,
        Status.SUCCESS, Status.RUNNING, Status.INVALID]
    result = await runner.run(timeout=10)
    expected = ["c2", "c3"] if kind is py_trees.composites.Sequence else ["c2"]
    assert result.status is RunStatus.SUCCESS and runner.state.get("log") == expected


async def test_a_restored_sequence_with_no_running_child_resumes_at_its_first_unfinished() -> None:
    store = Store()
    store.rows["r1"] = checkpoint(["SUCCESS", "SUCCESS", "INVALID", "INVALID"])
    root = composite(py_trees.composites.Sequence, 4)
    runner = ReactiveRunner.restore(root, store, "r1", state_manager=StateManager())
    assert root.current_child is root.children[2]
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUCCESS and runner.state.get("log") == ["c2", "c3"]


async def test_a_restored_sequence_whose_children_all_succeeded_points_at_its_last() -> None:
    store = Store()
    store.rows["r1"] = checkpoint(["SUCCESS", "SUCCESS", "SUCCESS"])
    del store.rows["r1"]["ticks"]  # an older checkpoint without a count: none yet
    root = composite(py_trees.composites.Sequence, 3)
    runner = ReactiveRunner.restore(root, store, "r1", state_manager=StateManager())
    assert root.current_child is root.children[2] and runner.ticks == 0


async def test_a_composite_not_running_at_the_checkpoint_is_left_as_it_was() -> None:
    store = Store()
    store.rows["r1"] = checkpoint(["SUCCESS", "RUNNING"], root="SUCCESS")
    root = composite(py_trees.composites.Sequence, 2)
    ReactiveRunner.restore(root, store, "r1", state_manager=StateManager())
    assert root.status is Status.SUCCESS and root.current_child is None


async def test_a_restored_parallel_resumes_with_its_children_statuses() -> None:
    store = Store()
    store.rows["r1"] = checkpoint(["SUCCESS", "RUNNING"])
    root = py_trees.composites.Parallel(
        "Root", policy=ParallelPolicy.SuccessOnAll(synchronise=True),
        children=[Log("c0"), Log("c1")],
    )
    runner = ReactiveRunner.restore(root, store, "r1", state_manager=StateManager())
    assert root.current_child is root.children[1]
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUCCESS and runner.state.get("log") == ["c1"]


# -- checkpoints refused or written --------------------------------------------------------------
@pytest.mark.parametrize("version", [2, None, "1"])
def test_a_checkpoint_of_another_version_is_refused(version: Any) -> None:
    store = Store()
    store.rows["r1"] = checkpoint(["SUCCESS"], version=version)
    with pytest.raises(CheckpointError) as raised:
        ReactiveRunner.restore(composite(py_trees.composites.Sequence, 1), store, "r1")
    said = str(raised.value)
    assert said.startswith(f"unsupported checkpoint version {version!r}: run 'r1' "), said
    assert f"this one reads version {CHECKPOINT_VERSION}" in said, said


def test_a_refused_restore_gives_up_its_claim(tmp_path: Any) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    store.save("r1", checkpoint(["SUCCESS"], version=99))
    with pytest.raises(CheckpointError, match="unsupported checkpoint version 99"):
        ReactiveRunner.restore(composite(py_trees.composites.Sequence, 1), store, "r1",
                               owner="first")
    assert store.holder("r1") is None
    with pytest.raises(CheckpointError, match="no checkpoint for run 'r2'"):
        ReactiveRunner.restore(composite(py_trees.composites.Sequence, 1), store, "r2",
                               owner="first")
    assert store.holder("r2") is None


def test_restore_holds_the_claim_against_a_second_owner(tmp_path: Any) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    store.save("r1", checkpoint(["RUNNING"]))
    first = ReactiveRunner.restore(composite(py_trees.composites.Sequence, 1), store, "r1",
                                   owner="first")
    with pytest.raises(RunClaimedError, match="first"):
        ReactiveRunner.restore(composite(py_trees.composites.Sequence, 1), store, "r1",
                               owner="second")
    assert first.run_sync(timeout=10).status is RunStatus.SUCCESS
    assert store.holder("r1") is None  # the run returned: the lease is given up


async def test_the_checkpoint_names_every_node_and_what_the_run_was() -> None:
    store = Store()
    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Log("step"), Log("step"), Ask("ask")]
    )
    runner = ReactiveRunner(root, checkpointer=store, user_roles=["b", "a"])
    before = time.time()
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUSPENDED
    saved = store.rows[runner.run_id]
    assert saved["version"] == 1 and saved["run_id"] == runner.run_id
    assert saved["status"] == "suspended" and saved["tree"] == "Root"
    assert saved["ticks"] == runner.ticks == result.ticks
    assert saved["nodes"] == {
        "0": {"name": "Root", "status": "RUNNING"},
        "0/0": {"name": "step", "status": "SUCCESS"},
        "0/1": {"name": "step", "status": "SUCCESS"},
        "0/2": {"name": "ask", "status": "RUNNING"},
    }
    assert saved["interaction"]["pending"] == ["deploy"]
    assert saved["user_roles"] == ["a", "b"]
    state = StateManager()
    state.restore(saved["state"])
    assert state.get("log") == ["step", "step"]
    assert before <= saved["saved"] <= time.time()
    assert "error" not in saved


async def test_a_failed_runs_checkpoint_keeps_why_and_a_running_one_does_not() -> None:
    store = Store()
    runner = ReactiveRunner(Boom("boom"), checkpointer=store)
    result = await runner.run(timeout=10)
    assert store.rows[runner.run_id]["status"] == "failure"
    assert store.rows[runner.run_id]["error"] == result.error == "boom: ValueError: kaboom"
    restored = ReactiveRunner.restore(Boom("boom"), store, runner.run_id)
    again = await restored.run(timeout=10)
    assert again.status is RunStatus.FAILURE and again.error == "boom: ValueError: kaboom"
    assert again.ticks == 0 and again.duration == 0.0
    assert isinstance(again.exception, RunFailed)  # the node's error did not survive the save
    runner.save_checkpoint()
    assert store.rows[runner.run_id]["status"] == "running"
    assert "error" not in store.rows[runner.run_id]


def test_save_checkpoint_without_a_checkpointer_is_refused() -> None:
    with pytest.raises(CheckpointError, match="this runner has no checkpointer"):
        ReactiveRunner(Log("x")).save_checkpoint()


def test_a_restored_run_keeps_its_own_roles_when_given() -> None:
    store = Store()
    store.rows["r1"] = checkpoint(["RUNNING"])
    runner = ReactiveRunner.restore(composite(py_trees.composites.Sequence, 1), store, "r1",
                                    user_roles=["viewer"])
    assert runner.ctx.user_roles == frozenset({"viewer"}) and runner.run_id == "r1"


# -- how long, how many ticks, why it failed -----------------------------------------------------
async def test_duration_is_the_wall_time_of_the_call() -> None:
    gate = Gate("wait")
    runner = ReactiveRunner(gate)

    async def release() -> None:
        await gate.started.wait()
        await asyncio.sleep(0.01)
        gate.gate.set()

    releaser = asyncio.create_task(release())
    before = time.monotonic()
    result = await runner.run(timeout=10)
    elapsed = time.monotonic() - before
    await releaser
    assert result.status is RunStatus.SUCCESS
    started, ended = gate.times
    assert ended - started <= result.duration <= elapsed
    assert result.ticks == 2 and runner.ticks == 2


async def test_ticks_count_this_call_only() -> None:
    root = py_trees.composites.Sequence("Root", memory=True, children=[Log("a"), Ask("ask")])
    runner = ReactiveRunner(root)
    first = await runner.run(timeout=10)
    assert first.status is RunStatus.SUSPENDED and first.ticks == runner.ticks >= 1
    runner.approve("deploy")
    second = await runner.run(timeout=10)
    assert second.status is RunStatus.SUCCESS and second.ticks == runner.ticks - first.ticks


async def test_the_failure_message_names_the_node_and_its_error() -> None:
    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Boom("explode")]
    )
    result = await ReactiveRunner(root).run(timeout=10)
    assert result.status is RunStatus.FAILURE
    assert result.error == "explode: ValueError: kaboom"
    assert isinstance(result.exception, ValueError) and str(result.exception) == "kaboom"
    with pytest.raises(ValueError, match="kaboom"):
        result.raise_for_status()


async def test_a_nodes_error_wins_over_anothers_feedback() -> None:
    root = py_trees.composites.Selector(
        "Root", memory=True, children=[Fails("said", "out of stock"), Boom("explode")]
    )
    result = await ReactiveRunner(root).run(timeout=10)
    assert result.status is RunStatus.FAILURE
    assert result.error == "explode: ValueError: kaboom"
    # the explained one first in the tree, and still FAILURE at the end
    said = Fails("said", "out of stock")
    both = py_trees.composites.Sequence("Root", memory=True, children=[
        py_trees.decorators.Inverter("despite", child=said), Boom("explode"),
    ])
    result = await ReactiveRunner(both).run(timeout=10)
    assert said.status is Status.FAILURE and said.feedback_message == "out of stock"
    assert result.error == "explode: ValueError: kaboom"


async def test_without_an_error_the_failing_nodes_feedback_is_the_message() -> None:
    said = py_trees.composites.Sequence(
        "Root", memory=True, children=[Log("ok"), Fails("said", "out of stock")]
    )
    runner = ReactiveRunner(said)
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.FAILURE and result.error == "said: out of stock"
    assert isinstance(result.exception, RunFailed)
    assert str(result.exception) == f"run {runner.run_id} failed: said: out of stock"
    with pytest.raises(RunFailed, match="failed: said: out of stock"):
        result.raise_for_status()


async def test_a_failure_nobody_explains_has_no_message() -> None:
    runner = ReactiveRunner(Fails("quiet"))
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.FAILURE and result.error is None
    assert isinstance(result.exception, RunFailed)
    assert str(result.exception) == f"run {runner.run_id} failed: the tree failed"


@pytest.mark.parametrize("first", [True, False])
async def test_a_synchronous_behaviour_that_raises_fails_the_run_cleanly(first: bool) -> None:
    gate = Gate("wait")
    root = py_trees.composites.Sequence("Root", memory=True, children=[
        *([Log("first")] if first else []),  # the raise on the first tick, or a later one
        py_trees.composites.Parallel(
            "Both", policy=ParallelPolicy.SuccessOnAll(synchronise=False),
            children=[gate, Raises("sync")],
        ),
    ])
    result = await ReactiveRunner(root).run(timeout=10)
    assert result.status is RunStatus.FAILURE
    assert result.error == "KeyError: 'no such key'"
    assert isinstance(result.exception, KeyError)
    assert gate.in_flight is None and gate.status is Status.INVALID  # nothing goes on after
    assert root.status is not Status.RUNNING


async def test_success_and_suspension_carry_no_failure() -> None:
    result = await ReactiveRunner(Log("a")).run(timeout=10)
    assert result.ok and result.error is None and result.exception is None
    assert result.raise_for_status() is result
    suspended = await ReactiveRunner(Ask("ask")).run(timeout=10)
    assert not suspended.ok and suspended.exception is None
    assert [r.id for r in suspended.pending] == ["deploy"]
    assert suspended.raise_for_status() is suspended


# -- stopping: max_ticks, timeout, cancel --------------------------------------------------------
async def test_max_ticks_stops_the_tree_with_a_message() -> None:
    gate = Gate("wait")
    root = py_trees.composites.Parallel(
        "Root", policy=ParallelPolicy.SuccessOnAll(synchronise=False),
        children=[gate, py_trees.behaviours.Running("spin")],
    )
    runner = ReactiveRunner(root)
    result = await runner.run(max_ticks=3, timeout=30)
    assert result.status is RunStatus.FAILURE
    assert result.error == "max_ticks=3 reached before the tree finished"
    assert result.ticks == 3 and gate.cancelled and root.status is Status.INVALID


async def test_a_timeout_stops_the_tree_and_says_after_how_long() -> None:
    gate = Gate("wait")
    runner = ReactiveRunner(gate)
    result = await runner.run(timeout=0.05)
    assert result.status is RunStatus.TIMEOUT
    assert result.error == "the run timed out after 0.05 s"
    assert result.ticks == 1  # the deadline ends the wait: no tick after it
    assert gate.cancelled and gate.status is Status.INVALID
    with pytest.raises(RunFailed, match=f"run {runner.run_id} timed out: the run timed out"):
        result.raise_for_status()


async def test_cancel_from_another_thread_stops_the_run() -> None:
    gate = Gate("wait")
    runner = ReactiveRunner(gate)
    task = asyncio.create_task(runner.run(timeout=30))
    await gate.started.wait()
    thread = threading.Thread(target=runner.cancel)
    thread.start()
    result = await task
    thread.join()
    assert result.status is RunStatus.CANCELLED and result.error == "the run was cancelled"
    assert gate.cancelled
    with pytest.raises(RunFailed, match="was cancelled: the run was cancelled"):
        result.raise_for_status()
    gate.gate.set()  # a cancelled run runs again, not cancelled
    assert (await runner.run(timeout=10)).status is RunStatus.SUCCESS


async def test_wake_from_another_thread_ticks_the_tree() -> None:
    gate = Gate("idle")
    runner = ReactiveRunner(gate)
    runner.wake()  # before a run: nothing to wake, no error
    ticked = asyncio.Event()
    runner.ctx.events.subscribe("run.ticked", lambda event: ticked.set())
    task = asyncio.create_task(runner.run(timeout=30))
    await gate.started.wait()
    await ticked.wait()
    ticked.clear()
    thread = threading.Thread(target=runner.wake)
    thread.start()
    thread.join()
    await ticked.wait()  # the wake-up reached the loop: the tree ticked once more
    gate.gate.set()
    assert (await task).status is RunStatus.SUCCESS
    runner.wake()  # after the run: nothing to wake, no error


async def test_a_runner_refuses_to_run_twice_at_once() -> None:
    gate = Gate("wait")
    runner = ReactiveRunner(gate)
    task = asyncio.create_task(runner.run(timeout=30))
    await gate.started.wait()
    with pytest.raises(RuntimeError, match="already running"):
        await runner.run()
    with pytest.raises(RuntimeError, match="while the run is going"):
        runner.send("more")
    gate.gate.set()
    assert (await task).status is RunStatus.SUCCESS


async def test_a_run_called_while_the_last_one_closes_its_resources_is_refused(
    tmp_path: Any,
) -> None:
    """The run's end awaits its closers (a sandbox): a run() meanwhile ran the finished tree
    again (its leaves, a model, twice), and its end gave up the lease the first still held."""
    closing, go = asyncio.Event(), asyncio.Event()

    closed: list[int] = []

    async def slow_close() -> None:
        closed.append(1)
        if len(closed) == 1:  # the first run's end, held open
            closing.set()
            await go.wait()

    root = py_trees.composites.Sequence("root", memory=True, children=[
        Log("work"), Closes("closes", [slow_close]),
    ])
    with SQLiteCheckpointer(tmp_path / "c.db") as store:
        runner = ReactiveRunner(root, checkpointer=store)
        first = asyncio.create_task(runner.run(timeout=30))
        await closing.wait()
        with pytest.raises(RuntimeError, match="already running"):
            await runner.run(timeout=30)
        held = store.holder(runner.run_id)
        assert held is not None and held.owner == runner._claim.owner  # still the first's
        go.set()
        assert (await first).status is RunStatus.SUCCESS
        assert (await runner.run()).ticks == 0  # ended: its result, not a second run
        assert runner.state.get("log") == ["work"] and closed == [1]


# -- keys, paths and binding ---------------------------------------------------------------------
def test_siblings_sharing_a_name_get_distinct_paths_and_keys() -> None:
    inner = py_trees.composites.Sequence("inner", memory=True, children=[Log("leaf")])
    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Log("step"), Log("step"), Log("solo"), inner]
    )
    runner = ReactiveRunner(root)
    runner.run_sync(timeout=10)
    steps = root.children
    assert [runner.node_key(c) for c in steps] == ["0/0", "0/1", "0/2", "0/3"]
    assert [getattr(c, "path", None) for c in steps[:3]] == [
        "Root/step[0]", "Root/step[1]", "Root/solo"]
    assert runner.node_key(inner.children[0]) == "0/3/0"
    assert inner.children[0].path == "Root/inner/leaf"  # type: ignore[attr-defined]
    assert runner.node_key(root) == "0"


def test_node_key_of_a_node_not_yet_bound_follows_from_its_parent() -> None:
    leaf = Log("late")
    root = py_trees.composites.Sequence("Root", memory=True, children=[Log("a")])
    runner = ReactiveRunner(root)
    runner.run_sync(timeout=10)
    inner = py_trees.composites.Sequence("inner", memory=True, children=[Log("x"), leaf])
    root.add_child(inner)
    assert runner.node_key(leaf) == "0/1/1"
    assert runner.node_key(Log("alone")) == "0"


class Lazy(py_trees.composites.Sequence):
    """Compiles its children on its first tick, as a skill does."""

    def __init__(self, name: str, runner: list[ReactiveRunner]) -> None:
        super().__init__(name, memory=True, children=[])
        self.compiled = False
        self.runner = runner
        self.path = ""

    def bind(self, state: Any, ctx: Any, path: str) -> None:
        self.path = path

    def tick(self) -> Any:
        if not self.compiled:
            self.compiled = True
            self.add_children([Log("made"), Log("made")])
            for child in self.children:
                self.runner[0].bind_subtree(child)
        yield from super().tick()


async def test_bind_subtree_gives_lazily_compiled_children_their_place() -> None:
    holder: list[ReactiveRunner] = []
    lazy = Lazy("lazy", holder)
    root = py_trees.composites.Sequence("Root", memory=True, children=[Log("a"), lazy])
    store = Store()
    runner = ReactiveRunner(root, checkpointer=store)
    holder.append(runner)
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUCCESS
    assert runner.state.get("log") == ["a", "made", "made"]
    assert [runner.node_key(c) for c in lazy.children] == ["0/1/0", "0/1/1"]
    assert [c.path for c in lazy.children] == ["Root/lazy/made", "Root/lazy/made"]  # type: ignore[attr-defined]
    assert set(store.rows[runner.run_id]["nodes"]) == {"0", "0/0", "0/1", "0/1/0", "0/1/1"}
    runner.bind_subtree(lazy.children[0])  # again: keeps its place
    assert lazy.children[0].path == "Root/lazy/made"  # type: ignore[attr-defined]
    runner.bind_subtree(root)
    assert runner.node_key(root) == "0" and root.children[0].path == "Root/a"  # type: ignore[attr-defined]


async def test_a_restored_lazy_node_gets_its_childrens_statuses_when_it_compiles() -> None:
    store = Store()
    store.rows["r1"] = {
        "version": 1, "run_id": "r1", "status": "running", "tree": "Root", "ticks": 3,
        "state": StateManager().snapshot(), "interaction": {}, "user_roles": [],
        "nodes": {"0": {"name": "Root", "status": "RUNNING"},
                  "0/0": {"name": "a", "status": "SUCCESS"},
                  "0/1": {"name": "lazy", "status": "RUNNING"},
                  "0/1/0": {"name": "made", "status": "SUCCESS"},
                  "0/1/1": {"name": "made", "status": "RUNNING"}},
    }
    holder: list[ReactiveRunner] = []
    lazy = Lazy("lazy", holder)
    root = py_trees.composites.Sequence("Root", memory=True, children=[Log("a"), lazy])
    runner = ReactiveRunner.restore(root, store, "r1", state_manager=StateManager())
    holder.append(runner)
    assert root.current_child is lazy
    lazy.compiled = True
    lazy.add_children([Log("made"), Log("made")])
    for child in lazy.children:
        runner.bind_subtree(child)
    assert [c.status for c in lazy.children] == [Status.SUCCESS, Status.RUNNING]
    assert [c.path for c in lazy.children] == ["Root/lazy/made", "Root/lazy/made"]  # type: ignore[attr-defined]


# -- send, new input and the run's end -----------------------------------------------------------
def test_send_refuses_while_a_decision_is_pending() -> None:
    runner = ReactiveRunner(Ask("ask"))
    assert runner.run_sync(timeout=10).status is RunStatus.SUSPENDED
    with pytest.raises(RuntimeError, match=r"waits for approval \(deploy\)"):
        runner.send("and also")


def test_a_finished_run_reports_itself_again_in_an_event() -> None:
    runner = ReactiveRunner(Log("a"))
    first = runner.run_sync(timeout=10)
    seen = events_of(runner)
    again = runner.run_sync(timeout=10)
    assert again.status is RunStatus.SUCCESS and again.ticks == 0 and again.duration == 0.0
    assert again.run_id == first.run_id
    ends = [e for e in seen if e.name == "run.finished"]
    assert len(ends) == 1 and ends[0].fields["result"] is again
    assert ends[0].fields["status"] == "success" and ends[0].fields["error"] is None
    assert runner.state.get("log") == ["a"]


def test_run_result_defaults_describe_a_run_that_did_nothing() -> None:
    result = RunResult(status=RunStatus.SUCCESS, run_id="r")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ticks = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        RunResult(RunStatus.SUCCESS, "r")  # type: ignore[misc]  # keywords only
    shown = repr(RunResult(status=RunStatus.FAILURE, run_id="r", exception=ValueError("x"),
                           messages=("hi",), usage={"requests": 1}))
    assert "exception" not in shown and "messages" not in shown and "usage" not in shown
    assert "status=" in shown and "error=None" in shown
    assert (result.ticks, result.duration, result.pending, result.error) == (0, 0.0, (), None)
    assert result.output is None and result.exception is None and result.messages == ()
    assert result.usage is None


# -- ownership, counters and options -------------------------------------------------------------
async def test_a_second_run_while_running_keeps_the_first_runs_lease() -> None:
    gate = Gate("wait")
    store = SQLiteCheckpointer(":memory:")
    runner = ReactiveRunner(gate, checkpointer=store, owner="me")
    task = asyncio.create_task(runner.run(timeout=30))
    await gate.started.wait()
    with pytest.raises(RuntimeError, match="already running"):
        await runner.run()
    assert store.holder(runner.run_id).owner == "me"  # type: ignore[union-attr]
    gate.gate.set()
    assert (await task).status is RunStatus.SUCCESS
    assert store.holder(runner.run_id) is None


async def test_a_run_resets_the_count_of_sub_agent_runs_a_sub_run_keeps_it() -> None:
    store = SQLiteCheckpointer(":memory:")
    runner = ReactiveRunner(Log("a"), checkpointer=store, owner="me")
    runner.ctx.agent_runs[0] = 5
    assert (await runner.run(timeout=10)).ok
    assert runner.ctx.agent_runs == [0] and store.holder(runner.run_id) is None

    sub = ReactiveRunner(Log("b"))
    sub.is_sub_run = True  # a sub-agent's run counts into its caller's
    sub.ctx.agent_runs[0] = 5
    assert (await sub.run(timeout=10)).ok
    assert sub.ctx.agent_runs == [5]


async def test_a_cancel_asked_before_a_run_does_not_stop_the_next_run() -> None:
    runner = ReactiveRunner(Log("a"))
    runner.cancel()
    assert (await runner.run(timeout=10)).status is RunStatus.SUCCESS


async def test_running_a_suspended_run_undecided_returns_at_once() -> None:
    runner = ReactiveRunner(Ask("ask"))
    first = await runner.run(timeout=10)
    seen = events_of(runner)
    again = await runner.run(timeout=10)
    assert again.status is RunStatus.SUSPENDED and again.ticks == 0
    assert [r.id for r in again.pending] == ["deploy"] == [r.id for r in first.pending]
    assert [e.name for e in seen] == ["run.finished"]


async def test_the_suspension_is_saved_and_told_before_the_siblings_settle() -> None:
    store = Store()
    gate = Gate("sibling")
    root = py_trees.composites.Parallel(
        "Root", policy=ParallelPolicy.SuccessOnAll(synchronise=False),
        children=[Ask("ask"), gate],
    )
    runner = ReactiveRunner(root, checkpointer=store)
    told = asyncio.Event()
    suspended: list[Any] = []

    def on_suspend(event: Event) -> None:
        suspended.append(event.fields["pending"])
        told.set()

    runner.ctx.events.subscribe("run.suspended", on_suspend)
    task = asyncio.create_task(runner.run(timeout=30))
    await told.wait()
    assert suspended == [["deploy"]]
    assert [s["status"] for s in store.saves] == ["suspended"]  # saved while the sibling runs
    gate.gate.set()
    result = await task
    assert result.status is RunStatus.SUSPENDED and suspended == [["deploy"]]


def test_a_runner_without_a_person_has_no_interaction_and_copies_its_extras() -> None:
    extras = {"k": 1}
    runner = ReactiveRunner(Log("a"), interactive=False, extras=extras, user_roles=["x"])
    assert runner.ctx.interaction is None
    assert runner.ctx.extras == {"k": 1} and runner.ctx.extras is not extras
    assert runner.ctx.user_roles == frozenset({"x"})
    assert len(runner.run_id) == 12 and runner.run_id != ReactiveRunner(Log("a")).run_id
    assert ReactiveRunner(Log("a"), run_id="mine").run_id == "mine"
    assert ReactiveRunner(Log("a")).ctx.interaction is not None
    assert ReactiveRunner(Log("a"), checkpoint_every=3).checkpoint_every == 3
    assert ReactiveRunner(Log("a")).checkpoint_every == ReactiveRunner(
        Log("a")).config.runtime.checkpoint_every


def test_a_runner_that_stopped_listening_ignores_new_input() -> None:
    runner = ReactiveRunner(Log("a"))
    assert runner.run_sync(timeout=10).ok
    runner._stop_listening()
    runner.state.update({"other": 1})
    assert runner.run_sync(timeout=10).ticks == 0  # still the finished run
    assert runner.state.get("log") == ["a"]


def test_a_failure_result_made_without_an_exception_raises_run_failed() -> None:
    result = RunResult(status=RunStatus.FAILURE, run_id="r", error="went wrong")
    with pytest.raises(RunFailed) as raised:
        result.raise_for_status()
    assert str(raised.value) == "run r failed: went wrong"
    assert raised.value.result is result and raised.value.status == "failure"
    bare = RunResult(status=RunStatus.TIMEOUT, run_id="r")
    with pytest.raises(RunFailed, match=r"^run r timed out$"):
        bare.raise_for_status()


def test_a_restored_finished_run_returns_what_its_state_holds(tmp_path: Any) -> None:
    store = Store()
    state = StateManager()
    state.update({"final_output": {"answer": 42}, "messages": [{"role": "user"}]})
    store.rows["r1"] = {**checkpoint(["SUCCESS"], root="SUCCESS"), "status": "success",
                        "state": state.snapshot()}
    runner = ReactiveRunner.restore(composite(py_trees.composites.Sequence, 1), store, "r1",
                                    state_manager=StateManager())
    result = runner.run_sync(timeout=10)
    assert result.status is RunStatus.SUCCESS and result.ticks == 0
    assert result.output == {"answer": 42} and result.messages == ({"role": "user"},)
    assert result.exception is None and result.run_id == "r1"
    assert runner.ticks == 7


class Blocks(py_trees.behaviour.Behaviour):
    """A synchronous node that holds the loop until the run's deadline has passed."""

    def __init__(self, name: str, until: list[float]) -> None:
        super().__init__(name)
        self.until = until

    def update(self) -> Status:
        while time.monotonic() <= self.until[0]:
            time.sleep(0.001)
        return Status.SUCCESS


async def test_a_deadline_passed_during_a_tick_ends_the_run_after_it() -> None:
    until = [0.0]
    gate = Gate("wait")
    root = py_trees.composites.Sequence("Root", memory=True, children=[Blocks("hold", until), gate])
    runner = ReactiveRunner(root)
    until[0] = time.monotonic() + 0.05  # a little past the run's own deadline
    result = await runner.run(timeout=0.01)
    assert result.status is RunStatus.TIMEOUT and result.ticks == 1
    assert gate.status is Status.INVALID


@pytest.mark.parametrize("status", list(RunStatus))
def test_ok_is_true_for_success_only(status: RunStatus) -> None:
    assert RunResult(status=status, run_id="r").ok is (status is RunStatus.SUCCESS)


def test_run_keeps_its_name_and_documentation_under_the_lease_wrapper() -> None:
    import inspect

    run = ReactiveRunner.run
    assert run.__name__ == "run"
    assert run.__doc__ and run.__doc__.startswith("Tick until the root finishes")
    assert inspect.iscoroutinefunction(run)  # awaited, and seen as a coroutine function
    assert list(inspect.signature(run).parameters) == ["self", "max_ticks", "timeout"]
