"""Calls under way in a checkpointed run: a call that may not be run twice is marked in the
state and checkpointed before it starts, and unmarked as it is recorded, so a run restored after
its process died (a crash, a SIGKILL) knows which calls may have taken effect unrecorded.

Such a call is not run again: it is recorded as maybe done and the model told, as a call in a
worker thread that a stopped run could not stop is (`ToolExecutor`). A durable run keeps its
own record of steps in flight (`jianmu.durable`), and an idempotent tool simply runs again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jianmu.tools.calls import ToolCall, ToolResult

if TYPE_CHECKING:
    from jianmu.runtime.async_node import RuntimeNode
    from jianmu.tools.base import Tool

__all__ = (
    "UNDER_WAY", "merge_under_way", "settle_in_doubt", "start", "stopped", "uncertain", "unmarked",
)

UNDER_WAY = "calls_under_way"
"""The state key: call id -> tool name, for each call started and not recorded yet."""


def merge_under_way(old: Any, new: Any) -> dict[str, str]:
    """The reducer of ``calls_under_way``: merged by call id; a ``None`` value unmarks."""
    merged = {**(old or {}), **(new or {})}
    return {key: value for key, value in merged.items() if value is not None}


def start(node: RuntimeNode, key: str, tool_name: str) -> bool:
    """Mark the call ``key`` (a call id, a `ToolNode`'s step) as under way and checkpoint the
    run before it starts; False where the state has no place for the mark (nothing marked).

    Raises:
        RunClaimedError: the run's lease went to another owner: the call must not start.
        CheckpointError: the save failed (a locked or full store): the call must not start,
            and the mark is taken back.
    """
    if not node.state.manager.accepts(UNDER_WAY):
        return False
    node.state.update({UNDER_WAY: {key: tool_name}})
    try:
        node.ctx.save_checkpoint()
    except BaseException:  # not saved, so the call does not start: no mark may say it did
        node.state.update(unmarked([key]))
        raise
    return True


def stopped(node: RuntimeNode, call_ids: list[str]) -> None:
    """Unmark calls that ended without a record: stopped for sure (they run again), or waiting
    for a person (`ToolSuspended`: they go on later)."""
    if call_ids:
        node.state.update(unmarked(call_ids))


def unmarked(call_ids: list[str]) -> dict[str, Any]:
    """The part of a state update that unmarks ``call_ids`` as they are recorded."""
    return {UNDER_WAY: dict.fromkeys(call_ids)}


def settle_in_doubt(
    node: RuntimeNode, pending: list[tuple[ToolCall, Tool | None]], mine: set[str],
    record: Callable[..., None],
) -> list[tuple[ToolCall, Tool | None]]:
    """``pending`` without the calls a process that has since died had started (marked, yet
    not by this node in this process, ``mine``): each is recorded as maybe done (``record``,
    the executor's, which unmarks it) and the model told, instead of running again."""
    marked = node.state.get(UNDER_WAY) or {}
    if not marked:
        return pending
    left = []
    for call, tool in pending:
        if tool is None or call.id not in marked or call.id in mine:
            left.append((call, tool))
            continue
        result = ToolResult(tool=tool.name, ok=False, call_id=call.id,
                            error=uncertain(tool.name))
        mine.add(call.id)  # the node's own now: its record unmarks it
        record(call, tool, result, executed=True)
        node.events.emit("tool.call.failed", tool=tool.name, call_id=call.id,
                         error=result.error, in_doubt=True)
    return left


def uncertain(tool_name: str) -> str:
    """The observation of a call under way when the run's process stopped."""
    return (
        f"the run's process stopped while {tool_name!r} was running, so whether it did its "
        "work is unknown; it was not run again. Check before calling it again"
    )
