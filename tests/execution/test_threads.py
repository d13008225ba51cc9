"""WorkerPool: bounded threads for sync tools; calls not started never start."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from jianmu.execution.threads import WorkerPool, run_in_worker

pytestmark = pytest.mark.anyio

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


async def test_never_more_threads_than_the_bound_and_every_call_finishes() -> None:
    pool = WorkerPool(2)
    lock, running, most = threading.Lock(), [0], [0]
    release = threading.Event()

    def work(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(30)
        with lock:
            running[0] -= 1
        return i

    calls = [asyncio.ensure_future(run_in_worker(lambda i=i: work(i), executor=pool))
             for i in range(6)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*calls) == list(range(6))
    assert most[0] <= 2 and len(pool._threads) == 2
    pool.shutdown()


async def test_the_callers_context_variables_reach_the_thread_and_errors_come_back() -> None:
    pool = WorkerPool(1)
    VAR.set("caller's")
    assert await run_in_worker(VAR.get, executor=pool) == "caller's"

    def fail() -> None:
        raise ValueError("from the thread")

    with pytest.raises(ValueError, match="from the thread"):
        await run_in_worker(fail, executor=pool)
    pool.shutdown()


async def test_a_call_cancelled_before_it_started_never_starts() -> None:
    pool = WorkerPool(1)
    gate, ran = threading.Event(), []
    busy = asyncio.ensure_future(run_in_worker(lambda: gate.wait(30), executor=pool))
    queued = asyncio.ensure_future(run_in_worker(lambda: ran.append("late"), executor=pool))
    await asyncio.sleep(0)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    gate.set()
    await busy
    assert await run_in_worker(lambda: "next", executor=pool) == "next"  # the thread is free
    assert ran == []
    pool.shutdown()


async def test_shutdown_drops_queued_calls_and_their_callers_do_not_hang() -> None:
    pool = WorkerPool(1)
    gate, started, ran = threading.Event(), threading.Event(), []

    def hold() -> bool:
        started.set()
        return gate.wait(30)

    busy = asyncio.ensure_future(run_in_worker(hold, executor=pool))
    queued = asyncio.ensure_future(run_in_worker(lambda: ran.append("late"), executor=pool))
    assert await asyncio.to_thread(started.wait, 30)  # the first call has started
    pool.shutdown()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(queued, 30)
    gate.set()
    assert await busy is True  # a started call finishes on its own
    assert ran == []
    with pytest.raises(RuntimeError, match="closed"):
        await run_in_worker(lambda: None, executor=pool)


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        WorkerPool(0)
