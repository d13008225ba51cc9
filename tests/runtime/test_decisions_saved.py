"""A decision made while a run waits is saved as it is made: a runner that only decides (a web
handler, a script) and is closed without running again loses none of it, and the process that
goes on with the run finds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.runtime import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.state import StateManager
from tests.runtime.test_checkpoint import build_tree

pytestmark = pytest.mark.anyio


async def _suspended(db: Path) -> str:
    runner = ReactiveRunner(build_tree(), StateManager(), checkpointer=SQLiteCheckpointer(db))
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUSPENDED
    await runner.aclose()
    return result.run_id


@pytest.mark.parametrize("decide", ["approve", "reject"])
async def test_a_decision_then_close_without_running_is_kept(tmp_path: Path, decide: str) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = await _suspended(db)

    decider = ReactiveRunner.restore(build_tree(), SQLiteCheckpointer(db), run_id,
                                     state_manager=StateManager())
    getattr(decider, decide)("deploy")
    await decider.aclose()  # decided, not run: a handler that hands the run on

    going_on = ReactiveRunner.restore(build_tree(), SQLiteCheckpointer(db), run_id,
                                      state_manager=StateManager())
    assert going_on.pending == []  # not asked again
    done = await going_on.run(timeout=10)
    assert done.status is RunStatus.SUCCESS
    assert going_on.state.get("approved") is (decide == "approve")
    assert going_on.state.get("log") == ["step", "step", "after"]  # nothing ran twice


async def test_a_decider_keeps_the_run_until_it_closes(tmp_path: Path) -> None:
    # saving the decision does not give the run up: a second decider is refused until the
    # first has closed (one owner), then finds the decision made
    from jianmu.errors import RunClaimedError

    db = tmp_path / "runs.sqlite"
    run_id = await _suspended(db)
    first = ReactiveRunner.restore(build_tree(), SQLiteCheckpointer(db), run_id,
                                   state_manager=StateManager())
    first.approve("deploy")
    with pytest.raises(RunClaimedError):
        ReactiveRunner.restore(build_tree(), SQLiteCheckpointer(db), run_id,
                               state_manager=StateManager())
    await first.aclose()
    second = ReactiveRunner.restore(build_tree(), SQLiteCheckpointer(db), run_id,
                                    state_manager=StateManager())
    assert second.pending == []


async def test_decisions_made_together_are_saved_together_or_not_at_all(tmp_path: Path) -> None:
    from jianmu.errors import InteractionError

    db = tmp_path / "runs.sqlite"
    run_id = await _suspended(db)
    decider = ReactiveRunner.restore(build_tree(), SQLiteCheckpointer(db), run_id,
                                     state_manager=StateManager())
    with pytest.raises(InteractionError), decider.deciding():
        decider.approve("deploy")
        decider.reject("nope")  # refused: the approval before it is not saved either
    await decider.aclose()
    again = ReactiveRunner.restore(build_tree(), SQLiteCheckpointer(db), run_id,
                                   state_manager=StateManager())
    assert [r.id for r in again.pending] == ["deploy"]
    with again.deciding():
        again.approve("deploy")
    await again.aclose()
    last = ReactiveRunner.restore(build_tree(), SQLiteCheckpointer(db), run_id,
                                  state_manager=StateManager())
    assert last.pending == []


@pytest.mark.parametrize("decide", ["approve", "reject"])
@pytest.mark.parametrize("message", [b"no", 3, {"why": "x"}])
async def test_a_message_that_is_not_text_is_refused_and_the_run_still_waits(
    tmp_path: Path, decide: str, message: object,
) -> None:
    # recorded, b"no" failed the save (CheckpointError), then every run(), and a second
    # decision was refused as "already decided": the run was stuck in this runner
    db = tmp_path / "runs.sqlite"
    runner = ReactiveRunner.restore(build_tree(), SQLiteCheckpointer(db), await _suspended(db),
                                    state_manager=StateManager())
    with pytest.raises(TypeError, match=r"a decision's message is text \(or None\), got "):
        getattr(runner, decide)("deploy", message)
    assert [r.id for r in runner.pending] == ["deploy"]
    getattr(runner, decide)("deploy", "said in words")
    assert (await runner.run(timeout=10)).status is RunStatus.SUCCESS
