"""Tick a skill's subtree to completion inside a run that is already going (for the tool).

`ReactiveRunner` owns its own context and interaction; a subtree run from inside a tool call
must share the outer run's event bus, interaction channel, config and roles instead. This
loop is the runner's, reduced to that case: it ticks when a node's task finishes, never polls,
and returns as soon as the subtree asks for approval.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from py_trees.behaviour import Behaviour
from py_trees.common import Status

from jianmu.runtime.async_node import close_tree

if TYPE_CHECKING:
    from jianmu.runtime.context import RunContext
    from jianmu.runtime.interaction import ApprovalRequest
    from jianmu.state import StateManager


@dataclass
class SubtreeOutcome:
    """How a subtree run ended."""

    status: str
    """``success``, ``failure``, ``suspended`` or ``timeout``."""
    error: str | None = None
    """Why it failed."""
    pending: list[ApprovalRequest] = field(default_factory=list)
    """The requests it waits for (when suspended)."""


def child_context(ctx: RunContext, wake: asyncio.Event) -> RunContext:
    """The outer context with a wake-up of the subtree's own and its own cleanup lists."""
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def wake_up() -> None:
        if threading.get_ident() == loop_thread:
            wake.set()
        else:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop has closed: nothing to wake
                pass

    return dataclasses.replace(
        ctx, wake=wake_up, cancelled_tasks=set(), closers=[], runner=None
    )


def _bind(node: Behaviour, manager: StateManager, ctx: RunContext, path: str) -> None:
    bind = getattr(node, "bind", None)
    if callable(bind):
        bind(manager, ctx, path)
    names = [c.name for c in node.children]
    for index, child in enumerate(node.children):
        label = child.name if names.count(child.name) == 1 else f"{child.name}[{index}]"
        _bind(child, manager, ctx, f"{path}/{label}")


def _failure_reason(root: Behaviour) -> str | None:
    for node in root.iterate():
        error = getattr(node, "error", None)
        if error is not None:
            return f"{node.name}: {type(error).__name__}: {error}"
    for node in root.iterate():
        if node.status is Status.FAILURE and node.feedback_message:
            return f"{node.name}: {node.feedback_message}"
    return None


async def drive_subtree(
    root: Behaviour,
    manager: StateManager,
    ctx: RunContext,
    *,
    path: str,
    wake: asyncio.Event,
    timeout: float | None = None,
) -> SubtreeOutcome:
    """Bind, set up and tick ``root`` until it finishes, asks for approval or times out.

    ``ctx`` should come from `child_context` with the same ``wake`` event. The subtree is
    stopped (its tasks cancelled and awaited) and ``ctx.closers`` are awaited before returning.
    """
    _bind(root, manager, ctx, path)
    root.setup_with_descendants()
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            wake.clear()
            root.tick_once()
            if root.status is Status.SUCCESS:
                return SubtreeOutcome("success")
            if root.status in (Status.FAILURE, Status.INVALID):
                return SubtreeOutcome("failure", _failure_reason(root))
            interaction = ctx.interaction
            mine = [
                r for r in (interaction.pending if interaction is not None else [])
                if (r.node or "").startswith(path)
            ]
            if mine:
                return SubtreeOutcome("suspended", pending=mine)
            remaining = None if deadline is None else deadline - time.monotonic()
            try:
                if remaining is not None and remaining <= 0:
                    raise TimeoutError
                await asyncio.wait_for(wake.wait(), remaining)
            except TimeoutError:
                return SubtreeOutcome("timeout", f"the skill timed out after {timeout} s")
    finally:
        if root.status is Status.RUNNING:
            root.stop(Status.INVALID)
        while ctx.cancelled_tasks:
            batch = list(ctx.cancelled_tasks)
            ctx.cancelled_tasks.clear()
            await asyncio.gather(*batch, return_exceptions=True)
        for closer in [*ctx.closers, lambda: close_tree(root)]:
            try:
                await closer()
            except Exception as exc:  # cleanup must not hide the skill's outcome
                ctx.events.emit("run.cleanup_failed", error=f"{type(exc).__name__}: {exc}")
