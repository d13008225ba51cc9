"""`run_in_worker`: a blocking call in a worker thread, with the caller's context variables;
`WorkerPool`: the bounded threads a `ToolRunner` runs sync tools on."""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import anyio
import anyio.to_thread

__all__ = ("WorkerPool", "run_in_worker")


class _Inbox:
    """Results coming back to one event loop from worker threads, handed over in bunches.

    A batch of short calls finishing together wakes the loop once, not once per call, and
    skips the two chained futures of ``run_in_executor``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
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
        try:
            self.loop.call_soon_threadsafe(self._flush)
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
    """One blocking call on its way to a worker; dropped calls never start."""

    __slots__ = ("call", "context", "dropped", "future", "inbox")

    def __init__(
        self, call: Callable[[], Any], future: asyncio.Future[Any], inbox: _Inbox
    ) -> None:
        self.call = call
        self.future = future
        self.inbox = inbox
        self.context = contextvars.copy_context()
        self.dropped = False

    def run(self) -> None:
        if self.dropped:  # the caller stopped waiting before a worker got here
            return
        try:
            value = self.context.run(self.call)
        except BaseException as exc:  # handed to the caller, as run_in_executor does
            self.inbox.deliver(self.future, False, exc)
        else:
            self.inbox.deliver(self.future, True, value)

    def drop(self) -> None:
        """Never start; a caller still waiting is cancelled (the pool closed under it)."""
        self.dropped = True
        try:
            self.inbox.loop.call_soon_threadsafe(self.future.cancel)
        except RuntimeError:  # the loop closed: nobody waits
            pass


class WorkerPool:
    """At most ``max_workers`` threads running blocking calls, started as they are needed.

    A queue and a count of idle threads: none of `ThreadPoolExecutor`'s per-call future,
    condition and semaphore, which cost more than a trivial sync tool itself.
    """

    def __init__(self, max_workers: int, *, name: str = "jianmu-tool") -> None:
        if max_workers <= 0:
            raise ValueError(f"max_workers must be positive, got {max_workers!r}")
        self.max_workers = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    def submit(self, job: _Job) -> None:
        """Queue ``job``; start a thread when none is idle and the bound allows one."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            if self._idle:
                self._idle -= 1  # that thread takes this job
            elif len(self._threads) < self.max_workers:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        self._queue.put(job)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            job.run()
            del job  # release the call's arguments and result while idle
            with self._lock:
                self._idle += 1

    def shutdown(self) -> None:
        """Drop the calls not yet started and let the threads end (running calls finish)."""
        with self._lock:
            self._closed = True
            threads = len(self._threads)
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.drop()
        for _ in range(threads):
            self._queue.put(None)


async def run_in_worker(
    call: Callable[[], Any],
    *,
    limiter: anyio.CapacityLimiter | None = None,
    executor: Executor | WorkerPool | None = None,
) -> Any:
    """Run a blocking ``call`` in a worker thread, carrying the caller's context variables.

    A cancelled caller stops waiting (a call not yet started never starts); a started thread
    finishes on its own (threads cannot be killed), which is why sandboxed tools run code in
    a child process instead.
    """
    if isinstance(executor, WorkerPool):
        # several times cheaper than anyio's worker hand-off for short calls; context
        # variables (the workspace root lives in one) are copied as anyio does
        loop = asyncio.get_running_loop()
        job = _Job(call, loop.create_future(), _inbox(loop))
        executor.submit(job)
        try:
            return await job.future
        except asyncio.CancelledError:
            job.dropped = True  # not started yet: it never starts
            raise
    if executor is not None:
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        return await loop.run_in_executor(executor, context.run, call)
    return await anyio.to_thread.run_sync(call, limiter=limiter, abandon_on_cancel=True)
