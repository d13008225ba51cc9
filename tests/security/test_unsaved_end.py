"""A run whose last checkpoint could not be saved has still ended: run() again pays nothing.

Before the fix, when the checkpoint a run saves as it ends failed (another process held the
SQLite file's write lock past the busy timeout, a full disk), `run()` raised and the runner
forgot that the run had ended: running it again once the store was free ticked the finished
tree from its start, planned the payment again as a new request (``pay_1.1``), and a person
approving that paid a second time (an agent's model would have been asked again). Now the end
is kept in the runner whether its save succeeded or not; the next `run()` saves it and returns
the result, with no tick.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import py_trees
import pytest
from py_trees.common import Status

from jianmu import AgentState, AsyncNode
from jianmu.errors import CheckpointError
from jianmu.runtime import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.state import StateManager
from tests.support.payments import PAID, pay_flow

pytestmark = pytest.mark.timeout(300)

LOCK: list[sqlite3.Connection] = []
"""A connection of the test's that the tree's last step makes hold the file's write lock."""



class Busy(AsyncNode):
    """The tree's last step: another process starts a long write just as the run ends."""

    async def update_async(self) -> Status:
        for holder in LOCK:
            holder.execute("BEGIN IMMEDIATE")
        return Status.SUCCESS


def flow() -> py_trees.behaviour.Behaviour:
    return pay_flow(Busy("busy"))


@pytest.fixture(autouse=True)
def _no_payments() -> None:
    PAID.clear()
    LOCK.clear()


def test_a_run_whose_last_save_failed_does_not_start_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(db, busy_timeout=0.05)  # a locked save fails soon
    runner = ReactiveRunner(flow(), StateManager(AgentState), checkpointer=store)
    assert runner.run_sync(timeout=60).status is RunStatus.SUSPENDED
    runner.approve("pay_1")
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    LOCK.append(holder)
    with pytest.raises(CheckpointError, match=r"cannot save run .*locked"):
        runner.run_sync(timeout=60)  # paid; the checkpoint of the end is refused
    LOCK.clear()
    holder.execute("ROLLBACK")
    holder.close()
    assert PAID == ["paid 40"]

    result = runner.run_sync(timeout=60)  # the store is free: the end is saved, not re-run
    assert result.status is RunStatus.SUCCESS, result.pending
    assert result.ticks == 0 and not result.pending
    assert [m.content for m in result.messages if m.role == "tool"] == ["paid 40"]
    assert PAID == ["paid 40"]
    store.close()
    with SQLiteCheckpointer(db) as store:  # another process finds the run ended
        assert (store.load(runner.run_id) or {}).get("status") == "success"
        again = ReactiveRunner.restore(flow(), store, runner.run_id,
                                       state_manager=StateManager(AgentState))
        assert again.run_sync(timeout=60).ticks == 0
    assert PAID == ["paid 40"]
