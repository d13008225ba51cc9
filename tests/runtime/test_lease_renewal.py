"""A live run's lease outlasts a store that was busy for a moment.

Before the fix, the task that renews a run's lease during a long step (a tool call that saves
nothing) stopped for good at the first renewal that failed, whatever the reason: one renewal
refused because another process held the SQLite file's write lock past the busy timeout, and
the lease of a run that was still going ran out, so a second process could take the live run
over. Now only a lease lost to another owner ends the renewals; a busy store is tried again.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import py_trees
import pytest
from py_trees.common import Status

from jianmu import AsyncNode
from jianmu.errors import CheckpointError
from jianmu.runtime import ReactiveRunner, SQLiteCheckpointer
from jianmu.runtime.lease import Lease

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


class Gate(AsyncNode):
    """Waits until the test opens it, telling the test it got there."""

    def __init__(self, reached: asyncio.Event, opened: asyncio.Event) -> None:
        super().__init__("gate")
        self.reached, self.opened = reached, opened

    async def update_async(self) -> Status:
        self.reached.set()
        await self.opened.wait()
        return Status.SUCCESS


async def test_a_renewal_refused_by_a_busy_store_is_tried_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    loop = asyncio.get_running_loop()
    failed, renewed_after = asyncio.Event(), asyncio.Event()
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)

    class Busy(SQLiteCheckpointer):
        def claim(self, run_id: str, owner: str, *, ttl: float | None = None) -> Lease:
            try:
                lease = super().claim(run_id, owner, ttl=ttl)
            except CheckpointError:
                if holder.in_transaction:  # the lock did its work: the store is free again
                    holder.execute("ROLLBACK")
                loop.call_soon_threadsafe(failed.set)
                raise
            if failed.is_set():
                loop.call_soon_threadsafe(renewed_after.set)
            return lease

    store = Busy(db, lease_ttl=0.3)  # renewed every 0.1 s while the step goes on
    reached, opened = asyncio.Event(), asyncio.Event()
    runner = ReactiveRunner(
        py_trees.composites.Sequence("long", memory=True, children=[Gate(reached, opened)]),
        checkpointer=store, owner="long-step",
    )
    going = asyncio.create_task(runner.run(timeout=120))
    try:
        await reached.wait()
        holder.execute("BEGIN IMMEDIATE")  # another process writes for longer than the timeout
        await asyncio.wait_for(failed.wait(), 60)
        await asyncio.wait_for(renewed_after.wait(), 60)  # and the renewals go on after it
    finally:
        opened.set()
        result = await going
        holder.close()
    assert result.ok
    store.close()
