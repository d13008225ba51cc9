"""One owner per run (issue 33, item 6): the lease in the checkpoint store, and the Python API
(`ReactiveRunner.restore` + approve + run) taking it, so an approved payment runs once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import py_trees
import pytest
from py_trees.common import Status

from jianmu import AgentState, AsyncNode
from jianmu.errors import CheckpointError, InteractionError, RunClaimedError
from jianmu.runtime import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.runtime.fork import fork_run
from jianmu.runtime.lease import Lease, LeasingCheckpointer, process_gone, this_process
from jianmu.state import StateManager
from tests.support.payments import PAID, pay_flow

pytestmark = pytest.mark.anyio




def build_tree() -> py_trees.behaviour.Behaviour:
    return pay_flow()


class Clock:
    """A clock the test moves by hand: leases expire when the test says so."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _no_payments() -> None:
    PAID.clear()


async def suspended(db: Path) -> str:
    """A run of the payment flow waiting for approval of ``pay_1``; its id."""
    store = SQLiteCheckpointer(db)
    runner = ReactiveRunner(build_tree(), StateManager(AgentState), checkpointer=store)
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUSPENDED
    assert [r.id for r in result.pending] == ["pay_1"]
    assert store.holder(result.run_id) is None  # the run returned: nobody holds it
    store.close()
    return result.run_id


def restore(store: SQLiteCheckpointer, run_id: str, owner: str | None = None) -> ReactiveRunner:
    return ReactiveRunner.restore(build_tree(), store, run_id,
                                  state_manager=StateManager(AgentState), owner=owner)


# -- the store's lease -------------------------------------------------------------------------


def test_a_second_claimant_is_refused_naming_the_holder_and_until_when() -> None:
    clock = Clock()
    with SQLiteCheckpointer(lease_ttl=30, clock=clock) as store:
        lease = store.claim("r1", "host-a:101:jianmu studio:aa")
        assert lease == Lease(run_id="r1", owner="host-a:101:jianmu studio:aa",
                              expires=clock.now + 30, seq=0)
        with pytest.raises(RunClaimedError) as refused:
            store.claim("r1", "host-b:202:jianmu resume:bb")
        error = refused.value
        assert "'host-a:101:jianmu studio:aa'" in str(error)
        assert "(in 30 s)" in str(error)  # and when the lease ends
        assert (error.run_id, error.owner, error.expires) == ("r1", lease.owner, lease.expires)
        assert isinstance(error, CheckpointError)
        assert store.holder("r1") == Lease(run_id="r1", owner=lease.owner, expires=lease.expires)
        store.claim("r2", "host-b:202:jianmu resume:bb")  # another run is free


def test_the_holder_retakes_and_renews_then_releases() -> None:
    clock = Clock()
    with SQLiteCheckpointer(lease_ttl=30, clock=clock) as store:
        store.claim("r", "me")
        clock.now += 20
        assert store.claim("r", "me").expires == clock.now + 30  # re-taken, renewed
        store.save("r", {"status": "running"}, owner="me")
        assert store.claim("r", "me").seq == 1
        clock.now += 25
        store.save("r", {"status": "running"}, owner="me")  # a save renews too
        holder = store.holder("r")
        assert holder is not None and holder.expires == clock.now + 30
        store.release("r", "someone else")  # not theirs to give up
        assert store.holder("r") is not None
        store.release("r", "me")
        assert store.holder("r") is None
        store.claim("r", "you")


def test_a_crashed_owners_lease_expires_and_its_late_save_is_refused() -> None:
    clock = Clock()
    with SQLiteCheckpointer(lease_ttl=10, clock=clock) as store:
        store.claim("r", "crashed")
        clock.now += 9.5
        with pytest.raises(RunClaimedError, match="'crashed'"):
            store.claim("r", "next")
        clock.now += 0.5  # ten seconds without a renewal: the owner is gone
        assert store.holder("r") is None
        store.claim("r", "next")
        store.save("r", {"status": "running"}, owner="next")
        with pytest.raises(RunClaimedError, match=r"no longer held by 'crashed'.*'next' holds"):
            store.save("r", {"status": "stale"}, owner="crashed")
        assert store.load("r") == {"status": "running"}  # the late save left nothing
        store.release("r", "next")
        with pytest.raises(RunClaimedError, match="no longer held by 'crashed'"):
            store.save("r", {"status": "stale"}, owner="crashed")  # even once it is free


def test_claims_at_the_same_moment_one_wins(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    stores = [SQLiteCheckpointer(db) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    won: list[str] = []
    refused: list[str] = []

    def claimant(index: int) -> None:
        barrier.wait()
        try:
            stores[index].claim("r", f"owner-{index}")
            won.append(f"owner-{index}")
        except RunClaimedError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=claimant, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(won) == 1 and len(refused) == len(stores) - 1
    assert all(f"claimed by {won[0]!r}" in message for message in refused)
    for store in stores:
        store.close()


def test_closing_the_store_gives_its_leases_back(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with SQLiteCheckpointer(db) as first:
        first.claim("r", "first")
    with SQLiteCheckpointer(db) as second:
        assert second.holder("r") is None
        second.claim("r", "second")


def test_the_in_memory_store_leases_and_a_lease_less_checkpointer_runs_unclaimed() -> None:
    assert isinstance(SQLiteCheckpointer(), LeasingCheckpointer)

    class Plain:
        def __init__(self) -> None:
            self.saved: dict[str, Any] = {}

        def save(self, run_id: str, checkpoint: dict[str, Any]) -> None:
            self.saved[run_id] = checkpoint

        def load(self, run_id: str) -> dict[str, Any] | None:
            return self.saved.get(run_id)

        def close(self) -> None:
            pass

    plain = Plain()
    runner = ReactiveRunner(build_tree(), StateManager(AgentState), checkpointer=plain)
    assert runner.run_sync(timeout=30).status is RunStatus.SUSPENDED
    again = ReactiveRunner.restore(build_tree(), plain, runner.run_id,
                                   state_manager=StateManager(AgentState))
    again.approve("pay_1")
    assert again.run_sync(timeout=30).ok and PAID == ["paid 40"]


# -- the Python API ----------------------------------------------------------------------------


async def test_two_restores_of_one_run_cannot_both_approve(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = await suspended(db)
    here, there = SQLiteCheckpointer(db), SQLiteCheckpointer(db)
    first = restore(here, run_id, owner="laptop:1:notebook:aa")
    with pytest.raises(RunClaimedError, match=r"claimed by 'laptop:1:notebook:aa' until"):
        restore(there, run_id)
    first.approve("pay_1")
    assert (await first.run(timeout=30)).ok
    assert here.holder(run_id) is None  # released when the run returned
    late = restore(there, run_id)
    with pytest.raises(InteractionError, match="already approved"):
        late.approve("pay_1")
    assert PAID == ["paid 40"]
    await late.aclose()
    assert there.holder(run_id) is None
    here.close()
    there.close()


async def test_a_runner_that_read_the_run_before_it_went_on_elsewhere_is_refused(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = await suspended(db)
    here, there = SQLiteCheckpointer(db), SQLiteCheckpointer(db)
    stale = restore(here, run_id)
    assert (await stale.run(timeout=30)).status is RunStatus.SUSPENDED  # then lets go
    other = restore(there, run_id)
    other.approve("pay_1")
    assert (await other.run(timeout=30)).ok
    with pytest.raises(RunClaimedError, match="went on elsewhere after this runner read it"):
        stale.approve("pay_1")
    with pytest.raises(RunClaimedError, match="went on elsewhere"):
        await stale.run(timeout=30)
    assert PAID == ["paid 40"]
    assert here.holder(run_id) is None  # the refused runner holds nothing
    here.close()
    there.close()


class Gate(AsyncNode):
    """Waits until the test opens it, telling the test it got there."""

    def __init__(self, reached: asyncio.Event, opened: asyncio.Event) -> None:
        super().__init__("gate")
        self.reached, self.opened = reached, opened

    async def update_async(self) -> Status:
        self.reached.set()
        await self.opened.wait()
        return Status.SUCCESS


async def test_a_run_holds_its_lease_while_it_goes_and_lets_go_at_the_end() -> None:
    clock = Clock()
    store = SQLiteCheckpointer(lease_ttl=30, clock=clock)
    reached, opened = asyncio.Event(), asyncio.Event()
    runner = ReactiveRunner(
        py_trees.composites.Sequence("gated", memory=True, children=[Gate(reached, opened)]),
        checkpointer=store, owner="box:7:worker:cc",
    )
    going = asyncio.create_task(runner.run(timeout=30))
    await reached.wait()
    holder = store.holder(runner.run_id)
    assert holder is not None and holder.owner == "box:7:worker:cc"
    with pytest.raises(RunClaimedError, match="'box:7:worker:cc'"):
        ReactiveRunner.restore(build_tree(), store, runner.run_id)
    opened.set()
    assert (await going).ok
    assert store.holder(runner.run_id) is None
    store.close()


async def test_a_fork_from_the_latest_point_claims_the_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = await suspended(db)
    store = SQLiteCheckpointer(db)
    latest = store.history.last_point(run_id)
    assert latest is not None and latest > 0
    holder = restore(store, run_id, owner="desk:9:jianmu resume:dd")
    with pytest.raises(RunClaimedError, match="'desk:9:jianmu resume:dd'"):
        fork_run(store, run_id, latest)
    fork_run(store, run_id, 0)  # a past point is settled: forking it claims nothing
    await holder.aclose()
    forked = fork_run(store, run_id, latest)
    assert store.load(forked) is not None
    assert store.holder(run_id) is None
    store.close()


HOLDER = """
import os, sys
from jianmu.runtime import SQLiteCheckpointer
store = SQLiteCheckpointer(sys.argv[1])
store.claim("r", "other-process")
print("held", flush=True)
sys.stdin.readline()  # hold it until told, then die without giving it back
os._exit(0)
"""


def test_a_lease_of_a_process_of_this_machine_that_died_is_taken_at_once(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.sqlite"
    SQLiteCheckpointer(db).close()
    clock = Clock()  # stands still: no lease expires by time here
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline() == "held\n"
    with SQLiteCheckpointer(db, clock=clock) as store:
        with pytest.raises(RunClaimedError, match="'other-process'"):
            store.claim("r", "me")  # alive: refused
        holder.stdin.write("die\n")
        holder.stdin.close()
        assert holder.wait(60) == 0
        assert store.claim("r", "me").owner == "me"  # gone: taken without waiting


def test_a_lease_of_another_machine_is_left_to_expire() -> None:
    assert process_gone("other-boot:1:123:456") is False
    assert process_gone("") is False
    mine = this_process()
    if mine:  # Linux: this process is alive, a pid of this boot that does not exist is not
        assert process_gone(mine) is False
        boot, namespace, _, start = mine.split(":")
        assert process_gone(f"{boot}:{namespace}:{2**22 + 1}:{start}") is True


async def test_a_long_step_keeps_the_lease_alive_without_a_save() -> None:
    renewed = asyncio.Event()
    loop = asyncio.get_running_loop()

    class Counting(SQLiteCheckpointer):
        claims = 0

        def claim(self, run_id: str, owner: str, *, ttl: float | None = None) -> Lease:
            lease = super().claim(run_id, owner, ttl=ttl)
            Counting.claims += 1
            if Counting.claims >= 3:  # the run's own claim, then two renewals
                loop.call_soon_threadsafe(renewed.set)
            return lease

        def renew(self, run_id: str, owner: str) -> bool:
            held = super().renew(run_id, owner)
            Counting.claims += 1
            if held and Counting.claims >= 3:
                loop.call_soon_threadsafe(renewed.set)
            return held

    store = Counting(lease_ttl=0.06)  # renewed every 20 ms while the step goes on
    reached, opened = asyncio.Event(), asyncio.Event()
    runner = ReactiveRunner(
        py_trees.composites.Sequence("long", memory=True, children=[Gate(reached, opened)]),
        checkpointer=store, owner="long-step",
    )
    going = asyncio.create_task(runner.run(timeout=60))
    await reached.wait()
    await asyncio.wait_for(renewed.wait(), 30)  # renewed while nothing was saved
    opened.set()
    assert (await going).ok
    assert store.holder(runner.run_id) is None
    store.close()


def test_a_run_id_utf8_cannot_encode_is_refused_or_names_no_run(tmp_path: Path) -> None:
    # a lone surrogate (what an undecodable byte of a command line becomes) reached SQLite,
    # which raised UnicodeEncodeError from inside the store
    odd = "run-\udcff"
    with pytest.raises(ValueError, match="UTF-8"):
        ReactiveRunner(py_trees.behaviours.Success("ok"), run_id=odd)
    store = SQLiteCheckpointer(tmp_path / "runs.db")
    try:
        assert store.load(odd) is None and store.holder(odd) is None
    finally:
        store.close()
