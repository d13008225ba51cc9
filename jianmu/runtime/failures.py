"""A failed tree: why it failed, in one line (what a failed run or a skill's subtree reports),
and the nodes a tick that raised (or a stop) left running, stopped whatever their
``terminate`` raises."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from py_trees.behaviour import Behaviour
from py_trees.common import Status

from jianmu.errors import RunFailed
from jianmu.runtime.async_node import AsyncNode
from jianmu.runtime.eager import read_outcome

if TYPE_CHECKING:
    from jianmu.runtime.context import RunContext
    from jianmu.runtime.events import EventBus

__all__ = ("drained", "failing_path", "failure_exception", "failure_reason", "stop_failed",
           "stop_running_nodes")


def failing_path(root: Behaviour) -> list[Behaviour]:
    """The nodes that failed the tree, children first (as ``root.iterate()`` orders them):
    ``root``, and below each of them its children that failed. A child that failed and was
    recovered from (a selector's earlier child, a branch a decorator turned into success) is
    under no node that failed, so it is not among them, whatever error it keeps."""
    found = []
    stack = [root]
    while stack:  # parents first, the last child first: reversed, children first in order
        node = stack.pop()
        found.append(node)
        stack.extend([c for c in node.children if c.status is Status.FAILURE])
    found.reverse()
    return found


def failure_exception(root: Behaviour, run_id: str, error: str | None) -> BaseException:
    """What a failed run raises: the exception of the first node that failed the tree (its
    `failing_path`), else a `RunFailed` saying ``error`` (why the tree failed)."""
    for node in failing_path(root):
        raised = getattr(node, "error", None)
        if isinstance(raised, BaseException):
            return raised
    return RunFailed(f"run {run_id} failed: {error or 'the tree failed'}", status="failure")


def failure_reason(root: Behaviour) -> str | None:
    """The error of the first node that failed the tree (`failing_path`; ``name: Type:
    text``), else the feedback of the first of them that says something; None when nothing
    says why."""
    path = failing_path(root)
    for node in path:
        error = getattr(node, "error", None)
        if error is not None:
            return f"{node.name}: {type(error).__name__}: {error}"
    for node in path:
        if node.feedback_message:
            return f"{node.name}: {node.feedback_message}"
    return None


def stop_running_nodes(root: Behaviour) -> list[tuple[Behaviour, Exception]]:
    """Stop every running node under ``root``, each once, and cancel the task of every async
    node that keeps one; return each node whose ``terminate`` (or ``stop``) raised, with the
    error, in the order they raised.

    A tick that raised midway left the statuses of the nodes above the raise unset, so
    stopping the root would not reach their running children. Parents first, with py_trees'
    own ``stop`` (which reaches the running nodes below them, in its order), then what is
    still running below a node it skipped: stopped children first, a decorator stopped after
    them stopped its child again, and a leaf's ``terminate`` ran once per decorator above it.

    A ``terminate`` that raises does not end the stop: for the time of it each node's
    ``terminate`` is wrapped so that its error is kept, not raised, and py_trees' ``stop``
    goes on to the node's siblings and ancestors as if it had returned (the node then takes
    its new status: it is stopped). An async node whose ``terminate`` raised before it
    reached `AsyncNode.terminate`, or whose own ``initialise`` raised once its task was made
    (never RUNNING, so never stopped), has its task cancelled here: nothing of it runs on."""
    raised: list[tuple[Behaviour, Exception]] = []
    # an instance attribute hides the class's method for the time of the stop (not on a node
    # that has one of its own already)
    nodes = [node for node in root.iterate() if "terminate" not in vars(node)]
    for node in nodes:
        node.terminate = functools.partial(  # type: ignore[method-assign]
            _kept, node, type(node).terminate, raised)
    try:
        stack = [root]
        while stack:
            node = stack.pop()
            if node.status is Status.RUNNING:
                try:
                    node.stop(Status.INVALID)
                except Exception as exc:  # a stop of its own that raised: taken as stopped
                    _note(raised, node, exc)
                    node.status = Status.INVALID
            stack.extend(reversed(node.children))
    finally:
        for node in nodes:
            vars(node).pop("terminate", None)
    for node in root.iterate():
        if isinstance(node, AsyncNode) and node._task is not None and (
                node.status is not Status.RUNNING):
            AsyncNode.terminate(node, Status.INVALID)  # the runtime's own part: the task
    return raised


def _kept(node: Behaviour, terminate: Callable[[Behaviour, Status], None],
          raised: list[tuple[Behaviour, Exception]], new_status: Status) -> None:
    """``terminate`` of ``node``, its error kept in ``raised`` rather than raised."""
    try:
        terminate(node, new_status)
    except Exception as exc:
        _note(raised, node, exc)


def _note(raised: list[tuple[Behaviour, Exception]], node: Behaviour, exc: Exception) -> None:
    """Add ``node``'s error to ``raised``, once (a decorator's stop stops its child again)."""
    if all(node is not other for other, _ in raised):
        raised.append((node, exc))


def stop_failed(events: EventBus, raised: list[tuple[Behaviour, Exception]]) -> str | None:
    """Emit ``node.stop_failed`` for each node whose ``terminate`` raised while the tree was
    stopped (`stop_running_nodes`); say them in one line (None when none did)."""
    if not raised:
        return None
    said = []
    for node, exc in raised:
        error = f"{type(exc).__name__}: {exc}"
        events.emit("node.stop_failed", node=getattr(node, "path", "") or node.name,
                    error=error, error_type=type(exc).__name__)
        said.append(f"{node.name}: {error}")
    return "stopping it raised: " + "; ".join(said)


async def drained(ctx: RunContext, until: float | None, grace: float) -> None:
    """Let the tasks the run cancelled (``ctx.cancelled_tasks``) run their ``finally`` blocks:
    all of them, or, by ``until`` (a run with a timeout: its deadline and ``grace``), those
    that end by then; the others go on, named in a ``run.cleanup_pending`` event."""
    tasks = ctx.cancelled_tasks
    while tasks:
        batch = list(tasks)
        tasks.clear()
        if until is None:
            await asyncio.gather(*batch, return_exceptions=True)
            continue
        try:  # not gather: cancelled, it would cancel the cleanups again, cut halfway
            done, left = await asyncio.wait(batch, timeout=max(until - time.monotonic(), 0.0))
        except asyncio.CancelledError:
            tasks.update(task for task in batch if not task.done())  # the next drain's
            raise
        for task in (*done, *left):
            task.add_done_callback(read_outcome)  # nobody awaits them: asyncio logs none
        if left:
            ctx.cleaning.update(left)  # its tree is not another run's while they write
            for task in left:
                task.add_done_callback(ctx.cleaning.discard)
            ctx.events.emit("run.cleanup_pending", tasks=sorted(t.get_name() for t in left),
                            grace=grace)
            return
