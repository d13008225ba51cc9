"""Calls under way, and what becomes of one stopped before it was recorded.

A call that may not run twice (`rerunnable` says which may) and was stopped after it began
(a ``cancel()``, the run's timeout, Ctrl-C, a pre-empted node, a stream left by ``break``, a
worker thread nobody can stop) is never started again by the engine: it is recorded as maybe
done and the model reads that (`maybe_done`), so it can check before asking again, and a call
asked again is a new one, checked and approved anew. The same holds when the process itself
died under the call: in a checkpointed run such a call is marked in the state and checkpointed
before it starts, and unmarked as it is recorded, so a run restored after a crash or a SIGKILL
knows which calls may have taken effect unrecorded (`settle_in_doubt`); a durable run keeps
its own record of steps in flight (`jianmu.durable`), which a takeover reads the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from jianmu.tools.calls import ToolCall, ToolResult

if TYPE_CHECKING:
    from jianmu.runtime.async_node import RuntimeNode
    from jianmu.tools.base import Tool

__all__ = (
    "UNDER_WAY",
    "durable_factory",
    "maybe_done",
    "merge_under_way",
    "rerunnable",
    "settle",
    "settle_in_doubt",
    "settled",
    "start",
    "stopped",
    "uncertain",
    "unmarked",
    "why_stopped",
)

_Factory = TypeVar("_Factory", bound=Callable[[], Awaitable[ToolResult]])

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
        mine.add(call.id)  # the node's own now: its record unmarks it
        settle(node, call, tool, record, PROCESS_DIED)
    return left


def rerunnable(tool: Tool) -> bool:
    """Whether a call of ``tool`` stopped mid-flight may simply run again: the tool is
    idempotent (a read is, unless it says otherwise), or it records its own steps and goes on
    where it stopped (a sub-agent, a question), its own calls each under this rule."""
    return bool(tool.tool_spec.idempotent or tool.records_own_steps)


STOPPED = "the run was stopped"
"""Why a call did not finish: its run was stopped (cancelled, timed out, pre-empted)."""
IN_A_THREAD = "the run was stopped (the call ran in a worker thread, which cannot be stopped)"
"""...the same, for a call in a worker thread, which may even finish after the run stopped."""
PROCESS_DIED = "the run's process stopped"
"""...its process died (a crash, a SIGKILL) or lost the run to another owner."""


def uncertain(tool_name: str, why: str = PROCESS_DIED) -> str:
    """The observation of a call of ``tool_name`` stopped mid-flight, and not run again."""
    return (
        f"{why} while {tool_name!r} was running, so whether it did its work is unknown; it was "
        "not run again (the call was interrupted and may or may not have taken effect). "
        "Check before calling it again (a new call is checked, and approved, again)"
    )


def maybe_done(call: ToolCall | None, tool: Tool, why: str = STOPPED) -> ToolResult:
    """The result recorded for ``call`` (None: a `ToolNode`'s step), stopped after it began
    and not run again."""
    return ToolResult(tool=tool.name, ok=False, call_id=None if call is None else call.id,
                      error=uncertain(tool.name, why), maybe_done=True)


def settle(
    node: RuntimeNode, call: ToolCall, tool: Tool, record: Callable[..., None], why: str,
) -> None:
    """Record ``call`` as maybe done (``record``, the executor's) and say so in an event."""
    result = maybe_done(call, tool, why)
    record(call, tool, result, executed=True)
    node.events.emit("tool.call.failed", tool=tool.name, call_id=call.id, error=result.error,
                     in_doubt=True)


async def settled(result: ToolResult) -> ToolResult:
    """``result``, as a durable step's factory (a call settled without running)."""
    return result


def why_stopped(tool: Tool) -> str:
    """Why a call of ``tool`` stopped mid-flight did not finish: its run was stopped, or so was
    the worker thread it ran in, which goes on."""
    return STOPPED if tool.is_async or tool.sandboxed else IN_A_THREAD


async def durable_factory(
    steps: Any, key: str, call: ToolCall | None, tool: Tool, factory: _Factory,
) -> _Factory:
    """What the durable step ``key`` of a call of ``tool`` runs: ``factory``; for a tool that
    may not run twice, its start recorded first (a takeover must know it began), or, one in
    flight as its worker died, settled as maybe done instead (``call`` None: a step's)."""
    if rerunnable(tool):
        return factory
    if steps.maybe_repeated(key):
        return cast(_Factory, functools.partial(settled, maybe_done(call, tool, PROCESS_DIED)))
    await steps.mark_started([key])
    return factory
