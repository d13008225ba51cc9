"""When a tree ticked at once is back where it was: the runner's `Ticker` then lets it rest."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from py_trees.behaviour import Behaviour
from py_trees.common import Status

from jianmu.runtime.eager import NOT_YET, FirstStep

__all__ = ("CYCLE", "ROUNDS", "AtRest", "Round", "ticks_back", "unstepped")

CYCLE = 4
"""Ticks taken at once that a tick may repeat to find the tree at rest: one back where it
was two ticks ago (a leaf ending in turn S, F under FailureIsRunning(SuccessIsRunning))
rests as one the same at every tick does (it spun at a full core)."""

ROUNDS = 2 * CYCLE
"""Ticks taken at once kept to find a round through tasks (a check re-entered, its task ended,
the action it pre-empted started again; a Retry or a "wait until" of such a check): a round
may hold several (`Round`)."""


def ticks_back(seen: list[Any], at_rest: Sequence[list[Any]], root: Behaviour) -> int | None:
    """How many ticks ago (1 to `CYCLE`) the tree was as ``seen`` (each visited node, its
    status and steady feedback), the last ticks' first in ``at_rest``; None if it was not.

    Back where it was a tick ago, the next tick repeats it: the nodes it did not visit did
    not change. Further back, those may have changed in between (a sequence without memory
    went on to its later children, then re-entered its first, whose count came round to the
    same): only a tick that visited every node of the tree shows it all.
    """
    if at_rest and seen == at_rest[0]:
        return 1
    if seen not in at_rest:
        return None
    if len({id(node) for node, _, _ in seen}) != sum(1 for _ in root.iterate()):
        return None
    return at_rest.index(seen) + 1


class AtRest:
    """The last `CYCLE` ticks taken at once, newest first: each visited node, its status and
    steady feedback (`ticks_back`), and every node's status when a tick that left some nodes
    unvisited looked like an earlier one (None before, as `Round.statuses`)."""

    __slots__ = ("seen", "statuses")

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []
        self.statuses: list[list[Any] | None] = []

    def clear(self) -> None:
        self.seen.clear()
        self.statuses.clear()

    def keep(self, seen: list[Any]) -> None:
        """Forget all but ``seen``: the runner waits, and a cycle is of ticks taken at once."""
        self.seen[:], self.statuses[:] = [seen], [None]

    def push(self, seen: list[Any], statuses: list[Any] | None) -> None:
        self.seen[:CYCLE] = [seen, *self.seen[:CYCLE - 1]]
        self.statuses[:CYCLE] = [statuses, *self.statuses[:CYCLE - 1]]

    def back(self, seen: list[Any], root: Behaviour, statuses_of: Callable[[Behaviour], list[Any]],
             ) -> tuple[int | None, list[Any] | None]:
        """`ticks_back`, and where a tick that left nodes unvisited (a finished `OneShot`'s
        child) looks like an earlier one, every node's status compared too: back where it
        was if they are the same as then (taken then, so such a cycle rests a cycle later;
        left out, a Condition over a Repeat over a finished OneShot went round at the loop's
        speed, a full core). Also every node's status now, if taken, for `push`, and whether
        a tick of such a cycle ticked a leaf (`leafy`)."""
        back = ticks_back(seen, self.seen, root)
        if back is not None or seen not in self.seen:
            return back, None
        now = statuses_of(root)
        i = self.seen.index(seen)
        return (i + 1 if self.statuses[i] == now else None), now

    def leafy(self, seen: list[Any], back: int) -> bool:
        """Whether a tick of the cycle ``back`` ticks long ending with ``seen`` ticked a leaf:
        found through unvisited nodes, the leaf may have moved on unseen (started for the
        third time, to fail): polled, as py_trees' loop ticks it at its rate (ticked at once,
        a sequence re-entering a Repeat over an instant child before an action spun)."""
        return any(not node.children for ticked in (seen, *self.seen[:back - 1])
                   for node, _, _ in ticked)


class Round(NamedTuple):
    """A tick taken at once, as `Ticker` compares it with the next ones."""

    seen: list[tuple[Behaviour, Status, str]]
    """Each visited node, its status and its steady feedback (`_seen`)."""
    statuses: list[Any] | None
    """Every node's status (and a `OneShot`'s outcome): the nodes a tick does not visit
    (a memory sequence's earlier children, an action not reached) show what they were.
    Taken only once a tick that left some unvisited looked like an earlier one (None
    before): such a round rests a round later, and other ticks walk no tree."""
    waits: int
    """`Ticker`'s count of ticks followed by a wait, then: a round goes through one."""
    at: float
    """When it was taken (``time.monotonic`` less the time rounds spent resting): a round
    slower than the poll interval is no spin, and ticked at once as py_trees' loop would."""


def started_now(node: Any) -> bool:
    """Whether ``node`` (an async node started eagerly: the engine's own nodes always wait, a
    model, a thread, a person, and keep their ticks; a tool's call ended before the next tick,
    and no point showed it under way to fork from) holds a task the last tick made, not yet
    stepped by the loop: work that may end without waiting for anything (`ready_first`)."""
    task = node._task
    return task is not None and unstepped(task)


def unstepped(task: asyncio.Task[Any]) -> bool:
    """Whether the loop has not yet run a step of ``task``: it was made in this tick (the
    runner lets the loop run between two ticks). Its eager first step, taken in the tick,
    waits for the task's own (`FirstStep.waits`); a task started lazily has not begun."""
    coro = task.get_coro()
    if isinstance(coro, FirstStep):
        return coro.waits is not NOT_YET
    return inspect.iscoroutine(coro) and (
        inspect.getcoroutinestate(coro) == inspect.CORO_CREATED)
