"""SQLiteCheckpointer and restoring a suspended run in a new runner."""

from __future__ import annotations

import json
from pathlib import Path

import py_trees
import pytest
from py_trees.common import Status

from jianmu.errors import CheckpointError
from jianmu.runtime import (
    ApprovalRequest,
    AsyncNode,
    ReactiveRunner,
    RunStatus,
    SQLiteCheckpointer,
)
from jianmu.state import StateManager

pytestmark = pytest.mark.anyio


class Count(AsyncNode):
    """Appends its name to ``log``; a second run of it would show twice."""

    async def update_async(self) -> Status:
        self.state.update({"log": [*(self.state.get("log") or []), self.name]})
        return Status.SUCCESS


class Ask(AsyncNode):
    async def update_async(self) -> Status:
        decision = self.ctx.interaction.decision("deploy")
        if decision is None:
            self.ctx.interaction.suspend(ApprovalRequest(id="deploy", summary="deploy?"))
            return Status.RUNNING
        self.state.write_port("approved", decision.approved)
        return Status.SUCCESS


def build_tree() -> py_trees.behaviour.Behaviour:
    # two children share a name: checkpoint keys are paths, not names
    return py_trees.composites.Sequence(
        "Root",
        memory=True,
        children=[Count("step"), Count("step"), Ask("ask"), Count("after")],
    )


async def test_suspend_checkpoint_restore_in_new_runner(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    first = ReactiveRunner(build_tree(), StateManager(), checkpointer=SQLiteCheckpointer(db))
    result = await first.run(timeout=10)
    assert result.status is RunStatus.SUSPENDED
    run_id = result.run_id
    first.checkpointer.close()  # type: ignore[union-attr]

    store = SQLiteCheckpointer(db)
    saved = store.load(run_id)
    assert saved is not None and saved["status"] == "suspended"
    assert saved["nodes"]["0/0"]["name"] == saved["nodes"]["0/1"]["name"] == "step"
    json.dumps(saved)

    second = ReactiveRunner.restore(build_tree(), store, run_id, state_manager=StateManager())
    assert [r.id for r in second.pending] == ["deploy"]
    second.approve("deploy")
    done = await second.run(timeout=10)
    assert done.status is RunStatus.SUCCESS
    assert second.state.get("log") == ["step", "step", "after"]  # nothing ran twice
    assert second.state.get("approved") is True
    assert store.load(run_id)["status"] == "success"  # type: ignore[index]


async def test_restore_refuses_a_different_tree(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    result = await ReactiveRunner(build_tree(), checkpointer=store).run(timeout=10)
    other = py_trees.composites.Sequence("Other", memory=True, children=[Count("x")])
    with pytest.raises(CheckpointError, match="does not match"):
        ReactiveRunner.restore(other, store, result.run_id)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        ReactiveRunner.restore(build_tree(), store, "missing")


async def test_checkpoint_every_n_ticks() -> None:
    store = SQLiteCheckpointer(":memory:")
    children = [Count(f"c{i}") for i in range(4)]
    root = py_trees.composites.Sequence("Root", memory=True, children=children)
    runner = ReactiveRunner(root, checkpointer=store, checkpoint_every=1)
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUCCESS
    runs = store.list_runs()
    assert runs[0][0] == runner.run_id and runs[0][1] == "success"


class RecordingCheckpointer(SQLiteCheckpointer):
    """Keeps (status, ticks) of every save, not just the last row."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.saves: list[tuple[str, int]] = []

    def save(self, run_id: str, checkpoint: dict[str, object]) -> None:
        self.saves.append((str(checkpoint["status"]), int(checkpoint["ticks"])))  # type: ignore[call-overload]
        super().save(run_id, checkpoint)


@pytest.mark.parametrize("every", [1, 2, 3])
async def test_checkpoint_every_n_ticks_saves_each_intermediate_row(every: int) -> None:
    store = RecordingCheckpointer()
    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Count(f"c{i}") for i in range(8)]
    )
    runner = ReactiveRunner(root, checkpointer=store, checkpoint_every=every)
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUCCESS
    running = [ticks for status, ticks in store.saves if status == "running"]
    # every Nth tick while the tree runs, none in between (the last tick ends the run)
    assert running == [t for t in range(1, runner.ticks) if t % every == 0]
    assert len(running) >= 2
    assert store.saves[-1][0] == "success"


def test_checkpointer_rejects_non_json() -> None:
    with SQLiteCheckpointer() as store, pytest.raises(CheckpointError, match="not JSON"):
        store.save("r", {"x": object()})
