"""`run_in_worker`: a blocking call in a worker thread, with the caller's context variables."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

import anyio
import anyio.to_thread

__all__ = ("run_in_worker",)


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


async def run_in_worker(
    call: Callable[[], Any],
    *,
    limiter: anyio.CapacityLimiter | None = None,
    executor: Executor | None = None,
) -> Any:
    """Run a blocking ``call`` in a worker thread, carrying the caller's context variables.

    A cancelled caller stops waiting (a call not yet started never starts); a started thread
    finishes on its own (threads cannot be killed), which is why sandboxed tools run code in
    a child process instead.
    """
    if executor is None:
        return await anyio.to_thread.run_sync(call, limiter=limiter, abandon_on_cancel=True)
    # several times cheaper than anyio's worker hand-off for short calls; context variables
    # (the workspace root lives in one) are copied as anyio does
    loop = asyncio.get_running_loop()
    inbox = _inbox(loop)
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            value = context.run(call)
        except BaseException as exc:  # handed to the caller, as run_in_executor does
            inbox.deliver(future, False, exc)
        else:
            inbox.deliver(future, True, value)

    submitted = executor.submit(work)

    def dropped(done: Future[Any]) -> None:
        # the pool cancelled the call before it ran (shut down): the caller must not hang
        if done.cancelled():
            try:
                loop.call_soon_threadsafe(future.cancel)
            except RuntimeError:  # the loop closed: nobody waits
                pass

    submitted.add_done_callback(dropped)
    try:
        return await future
    except asyncio.CancelledError:
        submitted.cancel()  # not started yet: it never starts
        raise
