"""Worker threads: blocking calls made from the event loop, on the process's shared threads.

Two kinds of blocking work leave the loop: a sync tool's call (`run_in_worker`, through a
runner's `WorkerPool`) and a sandbox's blocking step (`to_thread`: a child process to wait for,
a Docker request). Each kind runs on one process-wide set of threads (``jianmu-tool``,
``jianmu-sandbox``), started as calls need them, up to a bound, and a thread idle for `IDLE_S`
seconds ends: a process that ran thousands of runs keeps no thread, and a new run starts none
while one is idle (a thread start blocks the loop and costs more than a short tool). Results
come back to each loop in bunches (`_Inbox`), without ``run_in_executor``'s chained futures.

A tool call whose caller stops waiting once its thread took it (its timeout, a stopped run) is
abandoned: threads cannot be killed, so it goes on, but it no longer counts against its pool's
``max_workers`` nor the process's `MAX_THREADS`, and its thread ends with it. A hung tool asked
many times thus never holds the threads the later calls need; `MAX_ABANDONED` bounds how many
such threads the process keeps.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import os
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from jianmu.errors import ToolExecutionError

__all__ = (
    "CALLING",
    "IDLE_S",
    "MAX_ABANDONED",
    "MAX_THREADS",
    "Calling",
    "WorkerPool",
    "run_in_worker",
    "thread_starts",
    "to_thread",
)

T = TypeVar("T")

IDLE_S = 1.0
"""Seconds a shared thread waits for work before it ends."""
MAX_THREADS = 64
"""Threads of one kind at most in the process; calls beyond them wait for a free one. A thread
running an abandoned call is not counted (`MAX_ABANDONED`)."""
MAX_ABANDONED = 32
"""Threads at most in the process still running tool calls their callers abandoned (timed out,
stopped), apart from `MAX_THREADS`. Once there are this many, a new call of a tool that has such
a thread is refused before it starts (`ToolExecutionError`), where it would add another; other
tools' calls still run. The calls already running when the bound is reached may each be
abandoned still, so it is passed by at most those."""


class Calling:
    """One tool call on its way to a worker thread, as its `ToolRunner` follows it: the tool's
    name (a thread it leaves abandoned is counted under it) and whether a thread took it."""

    __slots__ = ("started", "tool")

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.started = False


CALLING: contextvars.ContextVar[Calling | None] = contextvars.ContextVar(
    "jianmu_calling", default=None)
"""The tool call that a `run_in_worker` made here is (set by the `ToolRunner` around it)."""


_STARTS: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "jianmu_thread_starts", default=None)
_CLAIM = threading.Lock()
"""A job's start and its caller's drop: whichever comes first, the other sees it."""


def thread_starts() -> list[bool]:
    """A list that gets an item when a worker thread starts a call made from here on, in this
    context: empty after a cancel, the call never started and never will."""
    started: list[bool] = []
    _STARTS.set(started)
    return started


class _Inbox:
    """Results coming back to one event loop from worker threads, handed over in bunches.

    A batch of short calls finishing together wakes the loop once, not once per call, and
    skips the two chained futures of ``run_in_executor``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # weakly: `_INBOXES` is keyed by the loop weakly, and a value holding its key kept
        # every loop that ever ran a sync tool (one per ``asyncio.run`` of a request) for good
        self._loop = weakref.ref(loop)
        self._lock = threading.Lock()
        self._items: list[tuple[asyncio.Future[Any], bool, Any]] = []
        self._scheduled = False

    def deliver(self, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
        """From a worker: set ``future`` on the loop (a result if ``ok``, else an exception)."""
        with self._lock:
            self._items.append((future, ok, value))
            if self._scheduled:
                return  # a hand-over is already on its way: it takes this one too
            self._scheduled = True
        loop = self._loop()
        if loop is None:  # the loop is gone: nobody waits any more
            return
        try:
            loop.call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop closed: nobody waits any more
            pass

    def _flush(self) -> None:
        with self._lock:
            items, self._items, self._scheduled = self._items, [], False
        for future, ok, value in items:
            if future.done():  # the caller stopped waiting (cancelled, timed out)
                continue
            if ok:
                future.set_result(value)
                continue
            try:
                future.set_exception(value)
            except TypeError:  # StopIteration cannot travel through a future
                future.set_exception(RuntimeError(f"the call raised {value!r}"))


_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = (
    weakref.WeakKeyDictionary()
)


def _inbox(loop: asyncio.AbstractEventLoop) -> _Inbox:
    inbox = _INBOXES.get(loop)
    if inbox is None:
        inbox = _INBOXES[loop] = _Inbox(loop)
    return inbox


class _Job:
    """One blocking call on its way to a thread; dropped calls never start."""

    __slots__ = ("abandoned", "call", "calling", "context", "dropped", "finished", "future",
                 "inbox", "pool", "started", "starts")

    def __init__(
        self, call: Callable[[], Any], future: asyncio.Future[Any], inbox: _Inbox,
        pool: WorkerPool | None = None,
    ) -> None:
        self.call = call
        self.future = future
        self.inbox = inbox
        self.pool = pool
        self.context = contextvars.copy_context()
        self.dropped = False
        self.started = False
        self.finished = False
        self.abandoned = False
        self.starts = _STARTS.get()
        self.calling = CALLING.get() if pool is not None else None

    def run(self) -> tuple[bool, Any] | None:
        """Make the call: whether it returned, and its value or exception; None if not made."""
        if self.pool is not None and self.pool.closed:
            self.drop()  # its pool closed while it waited for a thread
            return None
        with _CLAIM:
            # the caller stopped waiting before a thread came; or its cancel is on its way
            # (a stop cancels every call's future at once, and a call it abandoned may hand
            # its place to this one before this one's caller has run its drop)
            if self.dropped or self.future.cancelled():
                self.dropped = True
                return None
            self.started = True
            if self.starts is not None:
                self.starts.append(True)
            if self.calling is not None:
                self.calling.started = True
        try:
            return True, self.context.run(self.call)
        except GeneratorExit:  # a task would throw it into its coroutine, which closes it
            return False, RuntimeError("the call raised GeneratorExit")
        except BaseException as exc:  # handed to the caller, as run_in_executor does
            return False, exc

    def end(self) -> bool:
        """From its thread, the call made: whether its caller still waits (not abandoned)."""
        with _CLAIM:
            self.finished = True
            return not self.abandoned

    def deliver(self, outcome: tuple[bool, Any]) -> None:
        """Hand ``outcome`` to the waiting caller, on its loop."""
        self.inbox.deliver(self.future, *outcome)

    def drop(self) -> None:
        """Never start; a caller still waiting is cancelled (the pool closed under it)."""
        self.dropped = True
        try:
            self.future.get_loop().call_soon_threadsafe(self.future.cancel)
        except RuntimeError:  # the loop closed: nobody waits
            pass


class _Threads:
    """The process's threads of one kind: started as calls need them, at most ``limit``; one
    idle for `IDLE_S` ends.

    A queue and a count of idle threads: none of `ThreadPoolExecutor`'s per-call future,
    condition and semaphore, which cost more than a trivial sync tool itself.
    """

    def __init__(self, name: str, limit: int) -> None:
        self._name = name
        self._limit = limit
        self._started = 0
        self.reset()

    def reset(self) -> None:
        """Forget every thread: in a forked child, none of the parent's threads exists."""
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._count = 0
        self._idle = 0  # threads waiting for a job that no submitted job has claimed yet
        # threads running abandoned calls, not in ``_count``: in all, and by tool
        self._abandoned = 0
        self._abandoned_by: dict[str, int] = {}

    def refusal(self, tool: str) -> int:
        """How many abandoned calls of ``tool`` still run when the process holds
        `MAX_ABANDONED` of them in all (its new call would add one more); else 0."""
        if self._abandoned < MAX_ABANDONED:  # nearly always: no lock on a call's way
            return 0
        with self._lock:
            return self._abandoned_by.get(tool, 0) if self._abandoned >= MAX_ABANDONED else 0

    def abandon(self, tool: str | None) -> None:
        """A running call's caller stopped waiting: its thread leaves the count (another may
        start in its place) and ends once the call is over."""
        with self._lock:
            self._count -= 1
            self._abandoned += 1
            if tool is not None:
                self._abandoned_by[tool] = self._abandoned_by.get(tool, 0) + 1

    def _abandoned_ended(self, tool: str | None) -> None:
        with self._lock:
            self._abandoned -= 1
            if tool is not None:
                left = self._abandoned_by.pop(tool, 0) - 1
                if left > 0:
                    self._abandoned_by[tool] = left

    def submit(self, job: _Job) -> None:
        """Queue ``job``; start a thread when none is idle and the bound allows one."""
        with self._lock:
            if self._idle:
                self._idle -= 1  # an idle thread takes this job
            elif self._count < self._limit:
                self._count += 1
                self._started += 1
                threading.Thread(
                    target=self._work, name=f"{self._name}_{self._started}", daemon=True
                ).start()
        self._queue.put(job)

    def _work(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # unclaimed: no job is on its way to this thread
                        self._idle -= 1
                        self._count -= 1
                        return
                continue  # a job was claimed from us just now: it is being queued
            outcome = job.run()
            if outcome is not None and not job.end():  # abandoned: counted out already
                self._abandoned_ended(None if job.calling is None else job.calling.tool)
                return  # nobody waits for it; the thread that took its place serves on
            with self._lock:  # idle before the caller hears: its next call takes this thread
                self._idle += 1
            if outcome is not None:
                job.deliver(outcome)
            pool = job.pool
            del job, outcome  # release the call's arguments and result while idle
            if pool is not None:  # idle first: the pool's next call takes this thread
                pool.finished()
            del pool


_SHARED: dict[str, _Threads] = {}
_SHARED_LOCK = threading.Lock()


def _threads(name: str) -> _Threads:
    threads = _SHARED.get(name)
    if threads is None:
        with _SHARED_LOCK:
            threads = _SHARED.get(name)
            if threads is None:
                threads = _SHARED[name] = _Threads(name, MAX_THREADS)
    return threads


def _after_fork() -> None:
    for threads in _SHARED.values():  # the pools that hold them see the reset too
        threads.reset()


# a forked child has none of its parent's threads: it starts its own
os.register_at_fork(after_in_child=_after_fork)


class WorkerPool:
    """A runner's share of the process's tool threads: at most ``max_workers`` of its blocking
    calls run at once; more wait here, in order.

    The threads are the process's (``name``), so a new runner starts none while one is idle,
    and none is left once they have been idle for `IDLE_S`. `shutdown` drops the calls not
    started yet.
    """

    def __init__(self, max_workers: int, *, name: str = "jianmu-tool") -> None:
        if max_workers <= 0:
            raise ValueError(f"max_workers must be positive, got {max_workers!r}")
        self.max_workers = max_workers
        self._threads = _threads(name)
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: collections.deque[_Job] = collections.deque()
        self.closed = False

    def submit(self, job: _Job) -> None:
        """Run ``job`` on a thread now, or once one of this pool's calls has finished."""
        with self._lock:
            if self.closed:
                raise RuntimeError("the worker pool is closed")
            if self._running >= self.max_workers:
                self._waiting.append(job)
                return
            self._running += 1
        self._threads.submit(job)

    def finished(self) -> None:
        """From a thread: one of this pool's calls is over (or dropped); the next one goes."""
        with self._lock:
            job = self._waiting.popleft() if self._waiting else None
            if job is None:
                self._running -= 1
        if job is not None:
            self._threads.submit(job)

    def stop_waiting(self, job: _Job) -> None:
        """The caller of ``job`` stopped waiting (cancelled): not started, it never starts;
        running, it is abandoned (its thread goes on alone) and holds none of this pool's
        places, nor the process's threads, any more: the next call goes."""
        with _CLAIM:  # counted out before its thread can see it abandoned and end
            if not job.started:
                job.dropped = True
                return
            if job.finished:  # over: its thread frees its place itself
                return
            job.abandoned = True
            self._threads.abandon(None if job.calling is None else job.calling.tool)
        self.finished()

    def refuse(self) -> None:
        """Refuse the call about to be made here if its tool has abandoned calls still
        running and the process holds `MAX_ABANDONED` of them.

        Raises:
            ToolExecutionError: so; the call was not started.
        """
        here = CALLING.get()
        if here is None:
            return
        running = self._threads.refusal(here.tool)
        if running:
            raise ToolExecutionError(
                f"tool {here.tool!r} was not run: {running} earlier call(s) of it still run in "
                f"worker threads after they timed out or were stopped, and the process already "
                f"keeps {MAX_ABANDONED} such threads; call it again once they have finished, or "
                "do without it")

    def shutdown(self) -> None:
        """Drop the calls not yet started (their callers are cancelled); running ones finish."""
        with self._lock:
            self.closed = True
            waiting, self._waiting = list(self._waiting), collections.deque()
        for job in waiting:
            job.drop()


async def run_in_worker(
    call: Callable[[], Any],
    *,
    limiter: anyio.CapacityLimiter | None = None,
    executor: Executor | WorkerPool | None = None,
) -> Any:
    """Run a blocking ``call`` in a worker thread, carrying the caller's context variables.

    A cancelled caller stops waiting (a call not yet started never starts); a started thread
    finishes on its own (threads cannot be killed), which is why sandboxed tools run code in
    a child process instead: on a `WorkerPool` it is abandoned, holding none of the pool's
    places, and a tool with abandoned calls running is refused once the process keeps
    `MAX_ABANDONED` of them (`ToolExecutionError`). With a `WorkerPool` (a `ToolRunner`'s) the
    call runs on the process's tool threads; with another ``executor`` on that one. Without
    either, the call is a user's own (`jianmu.tools.Tool.invoke` called directly, maybe from
    trio-style code), and anyio's threads run it, under ``limiter``.
    """
    if isinstance(executor, WorkerPool):
        executor.refuse()
        loop = asyncio.get_running_loop()
        job = _Job(call, loop.create_future(), _inbox(loop), executor)
        executor.submit(job)
        try:
            return await job.future
        except asyncio.CancelledError:
            # not started yet: it never starts (`thread_starts` stays empty); started, it is
            # abandoned, and its place goes to the next call
            executor.stop_waiting(job)
            raise
    if executor is not None:
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        return await loop.run_in_executor(executor, context.run, call)
    return await anyio.to_thread.run_sync(call, limiter=limiter, abandon_on_cancel=True)


async def to_thread(
    fn: Callable[..., T], /, *args: Any, shielded: bool = False,
    on_cancel: Callable[[], None] | None = None,
) -> T:
    """``fn(*args)`` on one of the process's sandbox threads, with the caller's context.

    A cancelled caller stops waiting at once (the thread finishes on its own), unless
    ``shielded``: then it waits for ``fn`` to finish and only then raises the cancel, for work
    that must not be cut short (clean-up, a container's start), or that ``on_cancel`` (called
    at the first cancel) tells to stop early.
    """
    loop = asyncio.get_running_loop()
    job = _Job(functools.partial(fn, *args), loop.create_future(), _inbox(loop))
    _threads("jianmu-sandbox").submit(job)
    if not shielded:
        try:
            return await job.future  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            job.dropped = True
            raise
    cancelled = False
    while not job.future.done():
        try:
            await asyncio.shield(job.future)
        except asyncio.CancelledError:
            if job.future.cancelled():
                raise
            if not cancelled and on_cancel is not None:
                on_cancel()
            cancelled = True  # ours: the call goes on, and so do we until it is over
        except BaseException:  # its own failure: raised below, unless we were cancelled
            pass
    if cancelled:
        raise asyncio.CancelledError
    return job.future.result()  # type: ignore[no-any-return]
