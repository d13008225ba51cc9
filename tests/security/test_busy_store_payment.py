"""An approved payment whose "under way" save failed is not recorded as maybe done.

Before the fix, a call about to start was marked as under way in the run's state and then
checkpointed; when that save failed (another process held the SQLite file's write lock past
the busy timeout, a full disk), the call did not start, but the mark stayed in the runner's
state. Running the runner again (the store free once more) then read the mark as left by a
process that had died under the call: the approved payment was recorded as "whether it did its
work is unknown", never made, and the run ended SUCCESS. Now a mark whose save failed is taken
back: the call did not start, and the next run makes it once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import py_trees
import pytest

from jianmu import AgentState
from jianmu.errors import CheckpointError
from jianmu.runtime import ReactiveRunner, SQLiteCheckpointer
from jianmu.state import StateManager
from tests.support.payments import PAID, pay_flow, suspended_payment

pytestmark = pytest.mark.timeout(300)




def flow() -> py_trees.behaviour.Behaviour:
    return pay_flow()


@contextmanager
def write_locked(db: Path) -> Iterator[None]:
    """Another connection holds the file's write lock (as another process's long write)."""
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


def test_a_payment_whose_under_way_save_failed_is_made_once_by_the_next_run(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = suspended_payment(db)
    store = SQLiteCheckpointer(db, busy_timeout=0.05)  # a locked save fails soon
    runner = ReactiveRunner.restore(flow(), store, run_id, state_manager=StateManager(AgentState))
    runner.approve("pay_1")
    with write_locked(db), pytest.raises(CheckpointError, match=r"cannot save run .*locked"):
        runner.run_sync(timeout=60)  # the save before the payment fails: it does not start
    assert PAID == []
    assert not runner.state.get("calls_under_way")  # nothing is under way

    result = runner.run_sync(timeout=60)  # the store is free again: the payment is made
    assert result.ok, result.error
    (observation,) = [m for m in result.messages if m.role == "tool"]
    assert observation.content == "paid 40"
    assert PAID == ["paid 40"]
    store.close()
    with SQLiteCheckpointer(db) as store:  # and recorded so: another process pays no more
        again = ReactiveRunner.restore(flow(), store, run_id,
                                       state_manager=StateManager(AgentState))
        assert again.run_sync(timeout=60).ok
    assert PAID == ["paid 40"]
