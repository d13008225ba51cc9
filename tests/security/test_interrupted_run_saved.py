"""A run interrupted by its store is saved as going on, not as a final FAILURE.

Before the fix, when the save before an approved payment failed (another process held the
SQLite file's write lock past the busy timeout, a full disk) but the save of the run's end then
succeeded, the run's checkpoint said "failure": another process restoring it took the failure
as final (it returned it at once and never paid), while the runner that was interrupted went
on and paid when run again. One run, two answers. Now the checkpoint says what the runner
will do: the run goes on, whoever runs it next, and the payment is made once.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from jianmu import AgentState
from jianmu.errors import CheckpointError, RunClaimedError
from jianmu.runtime import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.state import StateManager
from tests.support.payments import PAID, pay_flow, suspended_payment

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _no_payments() -> None:
    PAID.clear()


class BusyOnce(SQLiteCheckpointer):
    """A store whose file another process holds locked during one save: the one that marks a
    call as under way (the save before the payment starts)."""

    armed = True

    def save(self, run_id: str, checkpoint: dict[str, Any], *, owner: str | None = None,
             release: bool = False, after: int | None = None) -> None:
        if not (self.armed and checkpoint["state"]["root"].get("calls_under_way")):
            return super().save(run_id, checkpoint, owner=owner, release=release, after=after)
        self.armed = False
        holder = sqlite3.connect(self.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's long write, this save only
        try:
            return super().save(run_id, checkpoint, owner=owner, release=release, after=after)
        finally:
            holder.execute("ROLLBACK")
            holder.close()


def test_a_run_its_store_interrupted_is_not_saved_as_failed(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = suspended_payment(db)
    busy = BusyOnce(db, busy_timeout=0.05)  # the locked save fails soon
    runner = ReactiveRunner.restore(pay_flow(), busy, run_id,
                                    state_manager=StateManager(AgentState))
    runner.approve("pay_1")
    interrupted = runner.run_sync(timeout=60)  # the save before paying fails; the end's not
    assert interrupted.status is RunStatus.FAILURE
    assert isinstance(interrupted.exception, CheckpointError)
    assert PAID == []
    saved = busy.load(run_id) or {}
    assert saved.get("status") not in ("failure", "success"), saved.get("status")

    with SQLiteCheckpointer(db) as store:  # another process takes the run up: it goes on
        other = ReactiveRunner.restore(pay_flow(), store, run_id,
                                       state_manager=StateManager(AgentState))
        result = other.run_sync(timeout=60)
        assert result.ok, result.error
        assert result.ticks > 0
    assert PAID == ["paid 40"]
    with pytest.raises(RunClaimedError, match="went on elsewhere"):
        runner.run_sync(timeout=60)  # the interrupted runner does not pay a second time
    assert PAID == ["paid 40"]
    busy.close()


def test_the_interrupted_runner_goes_on_and_its_end_is_final_everywhere(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = suspended_payment(db)
    busy = BusyOnce(db, busy_timeout=0.05)  # the locked save fails soon
    runner = ReactiveRunner.restore(pay_flow(), busy, run_id,
                                    state_manager=StateManager(AgentState))
    runner.approve("pay_1")
    assert runner.run_sync(timeout=60).status is RunStatus.FAILURE  # interrupted
    assert runner.run_sync(timeout=60).ok  # the same runner goes on: pays once
    assert PAID == ["paid 40"]
    with SQLiteCheckpointer(db) as store:  # and another process finds it ended
        assert (store.load(run_id) or {}).get("status") == "success"
        again = ReactiveRunner.restore(pay_flow(), store, run_id,
                                       state_manager=StateManager(AgentState))
        assert again.run_sync(timeout=60).ticks == 0
    assert PAID == ["paid 40"]
    busy.close()
