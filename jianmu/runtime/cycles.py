"""When a tree ticked at once is back where it was: the runner's `Ticker` then lets it rest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from py_trees.behaviour import Behaviour

__all__ = ("CYCLE", "ROUNDS", "ticks_back")

CYCLE = 4
"""Ticks taken at once that a tick may repeat to find the tree at rest: one back where it
was two ticks ago (a leaf ending in turn S, F under FailureIsRunning(SuccessIsRunning))
rests as one the same at every tick does (it spun at a full core)."""

ROUNDS = 2 * CYCLE
"""Ticks kept of a round that went through a task (a check re-entered, its task ended, the
action it pre-empted started again): each tick taken at once may be followed by one a task's
end brought."""


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
