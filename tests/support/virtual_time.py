"""`VirtualLoop`: an asyncio loop on virtual time, for runs whose waits are all timers.

When nothing is ready, the loop's clock jumps to its next timer, so a 0.7 s sleep or a poll
every millisecond costs no wall time and every timer fires at its exact (virtual) time; what
is ready still runs first, in asyncio's own order. `clock_is` makes py_trees' decorators
(``Timeout``) and the runner's ticker read the same clock.
"""

from __future__ import annotations

import asyncio
import selectors
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import py_trees

import jianmu.runtime.async_node as async_node_module

T0 = 1000.0
"""A virtual loop's time at its start."""


class _JumpingSelector:
    """The loop's selector: with nothing ready, jump the clock to the next timer."""

    def __init__(self, real: selectors.BaseSelector, loop: VirtualLoop) -> None:
        self._real, self._loop = real, loop

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # nothing scheduled: only another thread could wake it
            ready = self._real.select(5.0)
            if not ready:
                raise RuntimeError("the loop sleeps with no timer: the run hangs")
            return ready
        self._loop.now += timeout
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` moves only to its next timer."""

    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self._selector = _JumpingSelector(self._selector, self)  # type: ignore[has-type]

    def time(self) -> float:
        return self.now


@contextmanager
def clock_is(monotonic: Callable[[], float]) -> Iterator[None]:
    """py_trees' decorators (Timeout) and the runner's ticker read ``monotonic``."""
    fake = types.SimpleNamespace(monotonic=monotonic)
    saved = py_trees.decorators.time, async_node_module.time
    py_trees.decorators.time = fake  # type: ignore[attr-defined]
    async_node_module.time = fake  # type: ignore[attr-defined,assignment]
    try:
        yield
    finally:
        py_trees.decorators.time, async_node_module.time = saved  # type: ignore[attr-defined]
