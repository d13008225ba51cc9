"""A new runner given the id of a run that already has checkpoints does not start it over.

Before the fix, ``ReactiveRunner(tree, checkpointer=store, run_id=ID)`` on an ID whose run had
paid and finished ran the tree from its start under that id and saved over the run: its newest
checkpoint asked for the payment again, and approving it (in any front end) paid twice, while
`restore` of the finished run would have returned its result without a tick. Now such a
runner's first claim is refused (`RunClaimedError`, saying to restore the run), and nothing is
written to the run.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jianmu import AgentState
from jianmu.errors import RunClaimedError
from jianmu.runtime import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.state import StateManager
from tests.support.payments import PAID, pay_flow, suspended_payment

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _no_payments() -> None:
    PAID.clear()


def _rows(db: Path, run_id: str) -> tuple[int, int]:
    """How many checkpoints and points the run has."""
    with sqlite3.connect(db) as conn:
        return (conn.execute("SELECT COUNT(*) FROM checkpoints WHERE run_id = ?",
                             (run_id,)).fetchone()[0],
                conn.execute("SELECT COUNT(*) FROM jianmu_points WHERE run_id = ?",
                             (run_id,)).fetchone()[0])


def test_a_new_runner_on_the_id_of_a_paid_run_does_not_pay_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = suspended_payment(db)
    with SQLiteCheckpointer(db) as store:
        runner = ReactiveRunner.restore(pay_flow(), store, run_id,
                                        state_manager=StateManager(AgentState))
        runner.approve("pay_1")
        assert runner.run_sync(timeout=30).ok
    assert PAID == ["paid 40"]
    before = _rows(db, run_id)
    with SQLiteCheckpointer(db) as store:
        again = ReactiveRunner(pay_flow(), StateManager(AgentState), checkpointer=store,
                               run_id=run_id)
        with pytest.raises(RunClaimedError, match=r"already has checkpoints.*Restore it"):
            again.run_sync(timeout=30)
        assert store.holder(run_id) is None  # the refusal keeps no lease
    assert _rows(db, run_id) == before  # nothing written over the run
    with SQLiteCheckpointer(db) as store:  # still the run that paid: its result, no tick
        restored = ReactiveRunner.restore(pay_flow(), store, run_id,
                                          state_manager=StateManager(AgentState))
        result = restored.run_sync(timeout=30)
        assert result.status is RunStatus.SUCCESS and result.ticks == 0 and not result.pending
    assert PAID == ["paid 40"]


def test_two_new_runners_given_one_id_start_it_once(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with SQLiteCheckpointer(db) as store:
        first = ReactiveRunner(pay_flow(), StateManager(AgentState), checkpointer=store,
                               run_id="order-42")
        second = ReactiveRunner(pay_flow(), StateManager(AgentState), checkpointer=store,
                                run_id="order-42")
        assert first.run_sync(timeout=30).status is RunStatus.SUSPENDED
        with pytest.raises(RunClaimedError, match="already has checkpoints"):
            second.run_sync(timeout=30)
        with pytest.raises(RunClaimedError):  # nor decides what it never read
            second.approve("pay_1")
        first.approve("pay_1")
        assert first.run_sync(timeout=30).ok
    assert PAID == ["paid 40"]
