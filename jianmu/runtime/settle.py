"""A suspension's settling: what the tree already started finishes before `run()` returns;
and on the next run, the time spent waiting for a person is not the tree's.

No tick starts anything new: a branch's calls in flight (a parallel sibling, a sub-agent) run
to their end or to their own request, bounded by their own timeouts, and record themselves,
so nothing of the run goes on unrecorded once it has returned; their nodes report on the next
run's first tick. A timeout or `cancel` meanwhile stops the tree instead (the runner does):
what finished is kept, the rest is cancelled and runs again later.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Literal

from py_trees.behaviour import Behaviour
from py_trees.common import Status
from py_trees.decorators import Timeout

from jianmu.runtime.async_node import AsyncNode, WakeEvent

__all__ = ("in_flight", "postpone_timeouts", "settled")


def in_flight(root: Behaviour) -> list[asyncio.Task[Any]]:
    """The tasks of the tree's nodes that have not finished."""
    found = []
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        task = node.in_flight if isinstance(node, AsyncNode) else None
        if task is not None:
            found.append(task)
    return found


async def settled(root: Behaviour, wake: WakeEvent, cancelled: Callable[[], bool],
                  deadline: float | None) -> Literal["cancelled", "timeout"] | None:
    """Wait until no node task under ``root`` is in flight (None); ``cancelled`` or
    ``timeout`` when a cancel (which sets ``wake``) or the ``deadline`` came first."""
    while tasks := in_flight(root):
        if cancelled():
            return "cancelled"
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return "timeout"
        wake.clear()  # cancel() sets it: a waiter on it ends the wait
        woken = wake.wait()
        try:
            await asyncio.wait([*tasks, woken], timeout=remaining,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
    return None


def postpone_timeouts(root: Behaviour, seconds: float) -> None:
    """Move every running `Timeout`'s deadline under ``root`` ``seconds`` on: the time a run
    spent returned, waiting for a person, is not its children's (a run restored in another
    process starts its Timeouts anew)."""
    for node in root.iterate():
        if node.status is Status.RUNNING and isinstance(node, Timeout):
            node.finish_time += seconds
