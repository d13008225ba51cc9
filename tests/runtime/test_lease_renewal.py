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
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import py_trees
import pytest

from jianmu.errors import CheckpointError
from jianmu.runtime import ReactiveRunner, SQLiteCheckpointer
from jianmu.runtime.lease import Lease
from tests.runtime.test_lease import Gate

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]
T = TypeVar("T")


def _gated(store: SQLiteCheckpointer, owner: str,
           ) -> tuple[ReactiveRunner, asyncio.Event, asyncio.Event]:
    """A run of one long step (a `Gate`) saved in ``store`` by ``owner``: the runner, the
    event the step sets when it starts, and the one that lets it end."""
    reached, opened = asyncio.Event(), asyncio.Event()
    runner = ReactiveRunner(
        py_trees.composites.Sequence("long", memory=True, children=[Gate(reached, opened)]),
        checkpointer=store, owner=owner,
    )
    return runner, reached, opened


async def test_a_renewal_refused_by_a_busy_store_is_tried_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    loop = asyncio.get_running_loop()
    failed, renewed_after = asyncio.Event(), asyncio.Event()
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)

    def watched(renewal: Callable[[], T]) -> T:
        try:
            done = renewal()
        except CheckpointError:
            if holder.in_transaction:  # the lock did its work: the store is free again
                holder.execute("ROLLBACK")
            loop.call_soon_threadsafe(failed.set)
            raise
        if failed.is_set():
            loop.call_soon_threadsafe(renewed_after.set)
        return done

    class Busy(SQLiteCheckpointer):
        def claim(self, run_id: str, owner: str, *, ttl: float | None = None) -> Lease:
            return watched(lambda: super(Busy, self).claim(run_id, owner, ttl=ttl))

        def renew(self, run_id: str, owner: str) -> bool:
            return watched(lambda: super(Busy, self).renew(run_id, owner))

    # renewed every 0.1 s while the step goes on; the holder keeps the write lock until a
    # renewal fails, so the busy timeout always runs out, at 0.5 s as at the default 5 s
    store = Busy(db, lease_ttl=0.3, busy_timeout=0.5)
    runner, reached, opened = _gated(store, "long-step")
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


async def test_a_renewal_after_the_run_went_on_elsewhere_gives_the_run_back(
    tmp_path: Path,
) -> None:
    """An owner that lost its run (its lease lapsed, the next owner went on and let go) must
    not take it again by renewing: that would keep the next decider out while its stale step
    goes on. Before the fix, the renewal re-took the lease for the stale owner."""
    import time

    db = tmp_path / "runs.sqlite"
    loop = asyncio.get_running_loop()
    went_on, renewed_after = asyncio.Event(), asyncio.Event()

    class Watched(SQLiteCheckpointer):
        def claim(self, run_id: str, owner: str, *, ttl: float | None = None) -> Lease:
            try:
                return super().claim(run_id, owner, ttl=ttl)
            finally:
                if went_on.is_set():
                    loop.call_soon_threadsafe(renewed_after.set)

        def renew(self, run_id: str, owner: str) -> bool:
            try:
                return super().renew(run_id, owner)
            finally:
                if went_on.is_set():
                    loop.call_soon_threadsafe(renewed_after.set)

    store = Watched(db, lease_ttl=0.3)  # renewed every 0.1 s while the step goes on
    runner, reached, opened = _gated(store, "stale")
    going = asyncio.create_task(runner.run(timeout=120))
    try:
        await reached.wait()
        # the next owner, whose clock says the lease ran out, takes the run, goes on, lets go
        later = SQLiteCheckpointer(db, clock=lambda: time.time() + 3600)
        later.claim(runner.run_id, "next")
        later.save(runner.run_id, {"version": 1, "state": {}}, owner="next", release=True)
        went_on.set()
        await asyncio.wait_for(renewed_after.wait(), 60)  # the stale owner's renewal came
        later.close()
        with SQLiteCheckpointer(db) as now:  # the run is free for the next decider
            assert now.claim(runner.run_id, "a-person").owner == "a-person"
            now.release(runner.run_id, "a-person")
    finally:
        opened.set()
        with pytest.raises(CheckpointError, match=r"went on elsewhere|no longer held"):
            await going  # the stale owner's own record is refused
    store.close()


async def test_a_renewal_waiting_on_a_busy_file_does_not_hold_the_loop(tmp_path: Path) -> None:
    """Before the fix, the renewal called SQLite on the event loop: while another connection
    held the file's write lock, the loop (and every run on it) stood still for the whole busy
    timeout. Now the renewal waits on a worker thread and the loop's other tasks go on."""
    db = tmp_path / "runs.sqlite"
    loop = asyncio.get_running_loop()
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    beats = [0]  # advanced by a task of the loop
    during: list[int] = []  # how far it advanced while a blocked renewal waited
    renewing, renewed = asyncio.Event(), asyncio.Event()

    class Watched(SQLiteCheckpointer):
        def renew(self, run_id: str, owner: str) -> bool:
            if not holder.in_transaction:
                return super().renew(run_id, owner)
            seen = beats[0]
            loop.call_soon_threadsafe(renewing.set)
            try:
                return super().renew(run_id, owner)  # waits for the holder's lock
            finally:
                during.append(beats[0] - seen)
                loop.call_soon_threadsafe(renewed.set)

    store = Watched(db, lease_ttl=0.3)  # renewed every 0.1 s while the step goes on
    runner, reached, opened = _gated(store, "long-step")
    going = asyncio.create_task(runner.run(timeout=120))
    try:
        await reached.wait()
        holder.execute("BEGIN IMMEDIATE")  # another process's long write
        await asyncio.wait_for(renewing.wait(), 60)
        beats[0] += 1  # this task runs while the renewal waits for the lock...
        holder.execute("ROLLBACK")  # ...and lets it through
        await asyncio.wait_for(renewed.wait(), 60)
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        opened.set()
        result = await going
        holder.close()
    assert during[0] == 1, "the loop stood still while the renewal waited for the store"
    assert result.ok
    store.close()


async def test_a_renewal_under_way_ends_before_the_run_returns(tmp_path: Path) -> None:
    """The renewal's thread is waited for: nothing of the run goes on after run() returns, and
    its late answer (the lease was given up meanwhile) does not mark the run as lost."""
    import threading

    db = tmp_path / "runs.sqlite"
    loop = asyncio.get_running_loop()
    renewing = asyncio.Event()
    let_go, in_flight = threading.Event(), threading.Event()
    armed = [True]

    class Held(SQLiteCheckpointer):
        def renew(self, run_id: str, owner: str) -> bool:
            if not armed[0]:
                return super().renew(run_id, owner)
            armed[0] = False
            in_flight.set()
            loop.call_soon_threadsafe(renewing.set)
            try:
                assert let_go.wait(60)  # held up in the store (a busy file)
                return super().renew(run_id, owner)
            finally:
                in_flight.clear()

        def save(self, run_id: str, checkpoint: dict[str, Any], *, owner: str | None = None,
                 release: bool = False, after: int | None = None) -> None:
            super().save(run_id, checkpoint, owner=owner, release=release, after=after)
            if release:
                let_go.set()  # the run's end is saved: the renewal may go on now

    store = Held(db, lease_ttl=0.3)
    runner, reached, opened = _gated(store, "long-step")
    going = asyncio.create_task(runner.run(timeout=120))
    try:
        await reached.wait()
        await asyncio.wait_for(renewing.wait(), 60)
    finally:
        opened.set()
        result = await going
    assert not in_flight.is_set(), "a renewal went on after run() returned"
    assert result.ok
    again = await runner.run()  # its run was not taken for lost by the late renewal
    assert again.ok and again.ticks == 0
    store.close()
