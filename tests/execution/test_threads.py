"""Worker threads: each runner's `WorkerPool` is bounded, calls not started never start, the
process's threads are shared and end once idle; `to_thread` for a sandbox's blocking steps."""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
import threading
import time
from collections.abc import Callable

import anyio
import pytest

from jianmu.errors import ToolExecutionError
from jianmu.execution import threads
from jianmu.execution.threads import WorkerPool, run_in_worker, to_thread

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
    assert most[0] <= 2
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


def _named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


async def _until(check: Callable[[], bool], seconds: float = 60) -> bool:
    """Whether ``check`` holds within ``seconds`` (idle threads end on their own time)."""
    with anyio.move_on_after(seconds):
        while not check():
            await asyncio.sleep(0.01)
        return True
    return False


async def _idle_briefly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every tool thread wait a short idle time from now on (each takes one call)."""
    monkeypatch.setattr(threads, "IDLE_S", 0.05)
    waiting = len(_named("jianmu-tool"))
    if waiting:
        barrier, pool = threading.Barrier(waiting), WorkerPool(waiting)
        await asyncio.gather(*(run_in_worker(lambda: barrier.wait(30), executor=pool)
                               for _ in range(waiting)))


async def test_pools_share_the_process_threads_which_end_once_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threads, "IDLE_S", 60.0)  # however slow the machine: none ends yet
    first = WorkerPool(4)
    assert await run_in_worker(threading.get_ident, executor=first) > 0
    started = {t.ident for t in _named("jianmu-tool")}
    assert started
    for _ in range(20):  # one call at a time: an idle thread takes each, none is started
        assert await run_in_worker(threading.get_ident, executor=WorkerPool(4)) in started
    first.shutdown()  # a closed pool's threads are the process's: they end when idle
    await _idle_briefly(monkeypatch)
    assert await _until(lambda: not _named("jianmu-tool"))
    assert await run_in_worker(lambda: "again", executor=WorkerPool(1)) == "again"


async def test_a_caller_hears_of_its_call_only_once_the_thread_is_idle_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One call after another starts no thread, even when the worker is pre-empted between
    handing over a result and counting itself idle (threads switch as often as they can)."""
    monkeypatch.setattr(threads, "IDLE_S", 60.0)
    interval = sys.getswitchinterval()
    await run_in_worker(threading.get_ident, executor=WorkerPool(4))
    before = threads._threads("jianmu-tool")._started
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(2000):
            await run_in_worker(threading.get_ident, executor=WorkerPool(4))
    finally:
        sys.setswitchinterval(interval)
    assert threads._threads("jianmu-tool")._started == before


async def test_a_pool_bound_waits_without_starting_threads_for_it() -> None:
    pool, gate = WorkerPool(1), threading.Event()
    before = threads._threads("jianmu-tool")._started
    calls = [asyncio.ensure_future(run_in_worker(lambda: gate.wait(30), executor=pool))
             for _ in range(20)]
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*calls) == [True] * 20
    assert threads._threads("jianmu-tool")._started - before <= 2  # not one per call


async def test_to_thread_carries_the_context_and_its_errors() -> None:
    VAR.set("sandbox's")
    assert await to_thread(VAR.get) == "sandbox's"
    assert threading.current_thread().name != (await to_thread(threading.current_thread)).name
    with pytest.raises(ValueError, match="boom"):
        await to_thread(int, "boom")


async def test_a_shielded_step_finishes_before_the_cancel_is_raised() -> None:
    started, gate, done = threading.Event(), threading.Event(), []

    def cleanup() -> None:
        started.set()
        gate.wait(30)
        done.append("cleaned")

    task = asyncio.ensure_future(to_thread(cleanup, shielded=True))
    assert await asyncio.to_thread(started.wait, 30)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # the cancel waits for the step
    task.cancel()  # a second cancel too
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == ["cleaned"]


async def test_an_unshielded_step_is_abandoned_at_a_cancel() -> None:
    started, gate, done = threading.Event(), threading.Event(), []

    def step() -> None:
        started.set()
        done.append(gate.wait(30))

    task = asyncio.ensure_future(to_thread(step))
    assert await asyncio.to_thread(started.wait, 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # at once: the thread goes on alone
    assert done == []
    gate.set()
    assert await _until(lambda: done == [True])


async def test_a_forked_child_starts_threads_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "IDLE_S", 60.0)  # however slow the machine: it stays idle
    pool = WorkerPool(2)
    assert await run_in_worker(lambda: "parent", executor=pool) == "parent"
    assert await _until(lambda: threads._threads("jianmu-tool")._idle > 0)  # one waits
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            answer = asyncio.run(asyncio.wait_for(
                run_in_worker(lambda: "child", executor=pool), 30))
            os.write(write, answer.encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        got = await asyncio.to_thread(os.read, read, 100)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert got == b"child"  # not queued for the parent's idle thread, which the child lacks
    await _idle_briefly(monkeypatch)  # none waits a minute in the tests after this one


def _abandoned() -> int:
    return threads._threads("jianmu-tool")._abandoned


async def test_an_abandoned_call_gives_its_place_to_the_next_one() -> None:
    """A caller that stops waiting for a started call frees its place in the pool (and the
    process's count of threads); the hung thread goes on alone and ends with its call."""
    pool, gate, started = WorkerPool(1), threading.Event(), threading.Event()

    def hang() -> bool:
        started.set()
        return gate.wait(60)

    before = _abandoned()
    hung = asyncio.ensure_future(run_in_worker(hang, executor=pool))
    assert await asyncio.to_thread(started.wait, 30)
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung
    assert _abandoned() == before + 1
    # the pool's only place is free: the next call runs while the abandoned one still hangs
    assert await asyncio.wait_for(run_in_worker(lambda: "next", executor=pool), 30) == "next"
    gate.set()
    assert await _until(lambda: _abandoned() == before)  # its thread ended with its call
    assert await run_in_worker(lambda: "again", executor=pool) == "again"
    pool.shutdown()


async def test_a_waiting_call_cancelled_with_the_running_one_never_takes_its_place() -> None:
    """A stop cancels every call at once: the started one, abandoned, gives its place to the
    next waiting call before that call's caller has handled its own cancel; it never starts."""
    pool, gate, started, ran = WorkerPool(1), threading.Event(), threading.Event(), []

    def hang() -> bool:
        started.set()
        return gate.wait(60)

    hung = asyncio.ensure_future(run_in_worker(hang, executor=pool))
    queued = asyncio.ensure_future(run_in_worker(lambda: ran.append(1), executor=pool))
    assert await asyncio.to_thread(started.wait, 30)
    (job,) = pool._waiting

    def decided() -> None:  # between the two callers: until a thread has taken the call up
        deadline = time.monotonic() + 30
        while not (job.started or job.dropped) and time.monotonic() < deadline:
            time.sleep(0.001)

    hung.cancel()  # one sweep, the running call first...
    asyncio.get_running_loop().call_soon(decided)  # (its caller hands the place on first)
    queued.cancel()  # ...and the waiting one
    await asyncio.gather(hung, queued, return_exceptions=True)
    assert job.dropped and not job.started
    assert await run_in_worker(lambda: "next", executor=pool) == "next"  # a place is free
    gate.set()
    assert ran == []
    pool.shutdown()


async def test_past_the_cap_a_tool_with_abandoned_calls_is_refused_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threads, "MAX_ABANDONED", 2)
    pool, gate, ran = WorkerPool(4), threading.Event(), []
    began = [threading.Event() for _ in range(2)]

    async def call(tool: str, fn: Callable[[], object]) -> object:
        threads.CALLING.set(threads.Calling(tool))  # as the ToolRunner does: in this task
        return await run_in_worker(fn, executor=pool)

    def hang(i: int) -> bool:
        began[i].set()
        return gate.wait(60)

    before = _abandoned()
    hung = [asyncio.ensure_future(call("fetch", lambda i=i: hang(i))) for i in range(2)]
    for event in began:
        assert await asyncio.to_thread(event.wait, 30)
    for task in hung:
        task.cancel()
    await asyncio.gather(*hung, return_exceptions=True)
    try:
        assert _abandoned() == before + 2
        with pytest.raises(ToolExecutionError, match="'fetch' was not run: 2 earlier"):
            await call("fetch", lambda: ran.append("fetch"))
        assert await call("clock", lambda: "12:00") == "12:00"  # another tool still runs
        assert ran == []
    finally:
        gate.set()
    assert await _until(lambda: _abandoned() == before)
    await call("fetch", lambda: ran.append("fetch"))  # its threads ended: it runs again
    assert ran == ["fetch"]
    pool.shutdown()
