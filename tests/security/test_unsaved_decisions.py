"""A decision whose save the store refused is not taken.

Before the fix, `approve` (also `reject`, `answer`) recorded the decision in the runner and then
saved it; when the save failed (another process held the SQLite file's write lock past the busy
timeout, a full disk), `approve` raised, yet the decision stayed in the runner: the request was
no longer pending, approving it again was refused as "already approved; the first decision
stands" although no store held it, and the next `run()` made the payment that the caller had
been told was not recorded. Now the decision is taken back: the request waits again and can be
decided once the store is free.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from jianmu import AgentState
from jianmu.errors import CheckpointError
from jianmu.runtime import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.state import StateManager
from tests.support.payments import PAID, pay_flow, suspended_payment

pytestmark = pytest.mark.timeout(60)


@contextmanager
def write_locked(db: Path, store: SQLiteCheckpointer) -> Iterator[None]:
    """Another connection holds the file's write lock; ``store`` (made with a busy_timeout of
    50 ms, not the default 5 s: the wait's length is not what is tested) waits for it."""
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.fixture(autouse=True)
def _no_payments() -> None:
    PAID.clear()


@pytest.mark.parametrize("decide", ["approve", "reject"])
def test_a_decision_the_store_refused_is_not_taken(tmp_path: Path, decide: str) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = suspended_payment(db)
    with SQLiteCheckpointer(db, busy_timeout=0.05) as store:
        runner = ReactiveRunner.restore(pay_flow(), store, run_id,
                                        state_manager=StateManager(AgentState))
        with write_locked(db, store), pytest.raises(CheckpointError, match="locked"):
            getattr(runner, decide)("pay_1")
        assert [r.id for r in runner.pending] == ["pay_1"]  # it still waits
        assert runner.run_sync(timeout=30).status is RunStatus.SUSPENDED  # nothing was made
        assert PAID == []
        assert getattr(runner, decide)("pay_1") == "pay_1"  # decided now, and saved
    with SQLiteCheckpointer(db) as store:  # another process finds the decision
        again = ReactiveRunner.restore(pay_flow(), store, run_id,
                                       state_manager=StateManager(AgentState))
        assert again.run_sync(timeout=30).ok
    assert PAID == (["paid 40"] if decide == "approve" else [])


def test_decisions_given_together_whose_save_was_refused_all_wait_again(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = suspended_payment(db)
    with SQLiteCheckpointer(db, busy_timeout=0.05) as store:
        runner = ReactiveRunner.restore(pay_flow(), store, run_id,
                                        state_manager=StateManager(AgentState))
        with write_locked(db, store), pytest.raises(CheckpointError, match="locked"), \
                runner.deciding():
            runner.approve("pay_1")
        assert [r.id for r in runner.pending] == ["pay_1"]
        assert runner.run_sync(timeout=30).status is RunStatus.SUSPENDED
    assert PAID == []
