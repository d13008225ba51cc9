"""Work an async node finished that no tick has read yet, kept for the run that goes on.

A run that suspends first lets the work under way in its other branches finish (`settle`),
and a run stopped (``cancel()``, its timeout) may stop a node whose task had just finished:
either way the work is done (a payment made, the model answered) and its result written to
the state, but no tick read the node's status. The node keeps that status
(``AsyncNode._finished``), and so does the run's checkpoint, and the run that goes on, in this
process or after a restore in another, reads it where the node is next ticked instead of
starting the work again. A kept status serves the next run only: one that does not reach the
node again drops it as it ends (a later entry of the node is new work). It is that run's
alone (`forget`): another run of the same tree (a new runner's) drops it as it binds the tree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from py_trees.common import Status

__all__ = ("forget", "keep", "outcome_of", "restore", "unread")


def outcome_of(task: asyncio.Task[Any], coerce: Callable[[Any], Status]) -> Status | None:
    """SUCCESS or FAILURE, as a tick would read ``task``'s end (its result made a status by
    ``coerce``, `AsyncNode`'s); None for a task not done, cancelled, or ending with RUNNING
    ("call me again": its work runs anew anyway)."""
    if not task.done() or task.cancelled():
        return None
    exc = task.exception()
    if exc is not None:
        return Status.FAILURE if isinstance(exc, Exception) else None
    try:
        status = coerce(task.result())
    except TypeError:
        return Status.FAILURE
    return status if status in (Status.SUCCESS, Status.FAILURE) else None


def unread(node: Any, coerce: Callable[[Any], Status]) -> Status | None:
    """The status ``node`` keeps, or that of its finished task no tick has read (a node
    still RUNNING): what its checkpoint records for the run that goes on."""
    kept: Status | None = getattr(node, "_finished", None)
    if kept is not None:
        return kept
    task = getattr(node, "_task", None)
    if task is None or node.status is not Status.RUNNING:
        return None
    return outcome_of(task, coerce)


def keep(node: Any, task: asyncio.Task[Any], runner: Any,
         coerce: Callable[[Any], Status]) -> None:
    """``node``, stopped by ``runner``'s halt, keeps what its finished ``task`` ended with."""
    status = outcome_of(task, coerce)
    if status is None:
        return
    node._finished, node._kept_for = status, runner.run_id
    if status is Status.FAILURE:
        node.error = task.exception()
    runner._kept = (*runner._kept, node)


def restore(node: Any, entry: dict[str, Any], runner: Any) -> None:
    """The status a checkpoint's ``entry`` of ``node`` says it kept, kept again."""
    name = entry.get("finished")
    if name in ("SUCCESS", "FAILURE") and hasattr(node, "_finished"):
        node._finished, node._kept_for = Status[name], runner.run_id
        runner._kept = (*runner._kept, node)


def forget(node: Any, run_id: str) -> None:
    """Drop the status ``node`` keeps unless run ``run_id`` kept it: a new runner's run of
    the tree is no run going on (it read another run's end, without doing the work, however
    many runs later it reached the node, where py_trees' loop does the work again)."""
    if getattr(node, "_kept_for", None) != run_id:
        node._finished = None
