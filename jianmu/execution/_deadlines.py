"""`within`: an in-process call cancelled into `ToolTimeoutError` at its deadline, with
calls whose deadlines fall close together sharing one loop timer."""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ("GRAIN_S", "on_asyncio", "within")

T = TypeVar("T")

GRAIN_S = 0.01
"""Deadlines are rounded up to this: a timeout fires at most this much late."""


class _Watch:
    """One call under a deadline: its task, and whether the deadline cancelled it."""

    __slots__ = ("fired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.fired = False


class _Timers:
    """One loop's deadlines, by grain: the calls of a batch start together and share a timer.

    A loop timer per call (what `asyncio.timeout` sets) costs more than a trivial tool. A
    grain's timer stays set when its calls finish early (a few per second at most, each
    gone at its deadline), so calls that start and end one after another reuse it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.grains: dict[int, set[_Watch]] = {}

    def watch(self, task: asyncio.Task[Any], timeout: float) -> tuple[int, _Watch]:
        grain = math.ceil((self.loop.time() + timeout) / GRAIN_S)
        watches = self.grains.get(grain)
        if watches is None:
            watches = self.grains[grain] = set()
            self.loop.call_at(grain * GRAIN_S, self._expire, grain)
        watch = _Watch(task)
        watches.add(watch)
        return grain, watch

    def unwatch(self, grain: int, watch: _Watch) -> None:
        watches = self.grains.get(grain)
        if watches is not None:
            watches.discard(watch)

    def _expire(self, grain: int) -> None:
        for watch in self.grains.pop(grain, ()):
            watch.fired = True
            watch.task.cancel()


_TIMERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Timers] = (
    weakref.WeakKeyDictionary()
)


def on_asyncio() -> bool:
    """Whether this runs in an asyncio task (`within` needs one; trio under anyio is not)."""
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no asyncio loop running
        return False


_last: list[_Timers] = []
"""The loop seen last, with its timers: most processes run one loop (no weak lookup then)."""


def _timers(loop: asyncio.AbstractEventLoop) -> _Timers:
    if _last and _last[0].loop is loop:
        return _last[0]
    timers = _TIMERS.get(loop)
    if timers is None:
        timers = _TIMERS[loop] = _Timers(loop)
    _last[:] = [timers]
    return timers


async def within(
    call: Awaitable[T], timeout: float, timed_out: Callable[[], Exception]
) -> T:
    """Await ``call``; past ``timeout`` seconds cancel it and raise ``timed_out()``.

    What `asyncio.timeout` does: a cancel from anyone else stays a cancel, a call's own
    TimeoutError stays its own, and a call that swallows the cancel keeps its result.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None  # in-process calls run in tasks
    timers = _timers(loop)
    cancelling = task.cancelling()
    grain, watch = timers.watch(task, timeout)
    try:
        return await call
    except asyncio.CancelledError:
        if watch.fired:
            watch.fired = False
            if task.uncancel() <= cancelling:  # ours alone: the call timed out
                raise timed_out() from None
        raise
    finally:
        timers.unwatch(grain, watch)
        if watch.fired:  # the call swallowed our cancel: take it back all the same
            task.uncancel()
