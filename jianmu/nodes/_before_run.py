"""What an admitted call of a `ToolExecutor`'s batch must still pass before it runs: its
sandbox started (`sandboxes_started`), and the guard again after an earlier call of the batch
changed what it touches (`still_allowed`). A call held back here never ran: it is recorded
as refused, not executed (no ``tool.call.started``, not in ``usage.tool_calls``).

Neither runs for a batch of in-process calls that change nothing (a plain call's path)."""

from __future__ import annotations

from typing import Any

from jianmu.execution.runner import ToolRunner
from jianmu.guard import Decision, DecisionKind
from jianmu.nodes.state import tokens_spent
from jianmu.nodes.tool_failures import error_text
from jianmu.nodes.tool_spans import denied_span
from jianmu.runtime.context import StepRecorder
from jianmu.runtime.events import EventBus
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolCall, ToolResult

__all__ = ("replays", "sandbox_refusal", "sandboxes_started", "still_allowed")

Batch = list[tuple[ToolCall, Tool, Decision]]

_UNHEARD = EventBus()
"""A bus nobody listens to: a call checked again is not announced twice."""


async def sandboxes_started(
    executor: Any, batch: Batch, runner: ToolRunner, steps: StepRecorder | None
) -> Batch:
    """``batch`` without its sandboxed calls when their sandbox cannot start (no bubblewrap
    or Docker, a plug-in sandbox that raises): each is recorded as refused with the reason,
    never as run. In-process calls go on (they need no sandbox), and so do the calls of a
    durable run that replay or settle their step (`steps`): they start nothing now."""
    failed: Exception | None = None
    kept: Batch = []
    for entry in batch:
        call, tool, _decision = entry
        if not tool.sandboxed or _replayed(steps, call, tool):
            kept.append(entry)
            continue
        if failed is None:
            try:
                await runner.start_sandbox(tool)
            except Exception as exc:  # one sandbox per runner: the batch's others wait on it
                failed = exc
        if failed is not None:
            executor._record(call, tool, ToolResult(
                tool=tool.name, ok=False, call_id=call.id, error=error_text(failed)))
        else:
            kept.append(entry)
    return kept


def _replayed(steps: StepRecorder | None, call: ToolCall, tool: Tool) -> bool:
    """Whether ``call``'s durable step replays or settles (`replays`)."""
    return steps is not None and not tool.records_own_steps and replays(steps, f"tool:{call.id}")


def replays(steps: StepRecorder, key: str) -> bool:
    """Whether the durable step under ``key`` replays its recorded result, or settles one in
    flight as a worker died: its call starts nothing now. A recorder without ``replays`` (not
    the durable engine's) is asked only the latter."""
    recorded = getattr(steps, "replays", None)
    return steps.maybe_repeated(key) or bool(callable(recorded) and recorded(key))


async def sandbox_refusal(node: Any, tool: Tool) -> str | None:
    """Why the sandbox ``tool`` runs in cannot start, if it cannot (`sandboxes_started`): a
    `ToolNode`'s step is then refused before it starts, never said to have run."""
    try:
        runner = await node._runners.get(node.effective_constraints.execution, node.ctx)
        await runner.start_sandbox(tool)
    except Exception as exc:
        return error_text(exc)
    return None


def still_allowed(executor: Any, call: ToolCall, tool: Tool) -> bool:
    """Whether the guard still allows ``call`` after earlier calls of its batch ran
    (`checked_again`); if not, its refusal is recorded."""
    objection = checked_again(executor, call, tool)
    if objection is not None:
        denied_span(call, tool, objection, executor.ctx)
        executor._record(call, None, ToolResult(
            tool=call.name, ok=False, call_id=call.id,
            error=f"the guard denied this call: {objection.reason} (checked again after "
            "an earlier call of this batch ran; call it again alone)",
        ))
    return objection is None


def checked_again(executor: Any, call: ToolCall, tool: Tool) -> Decision | None:
    """The guard's objection to ``call`` now that earlier calls of its batch have run, if it
    has one: the batch was checked before any ran, and a call that writes or runs something
    may have changed what a later one touches (a link ``l`` made to a folder a path rule
    denies, then ``read_file l/key``). What the run has used was counted when the batch was
    admitted, so it is not counted again here."""
    enforcer = executor._guard(executor.effective_constraints)
    (decision,) = enforcer.preflight(
        [call], executor.toolset, run=executor.run_as_seen, tokens_used=tokens_spent(executor),
        events=_UNHEARD, resolved=[tool], node=executor.path,
    )
    if decision.allowed:
        return None
    if executor.events.wants("guard.decision"):
        executor.events.emit(
            "guard.decision", check="tool_call", tool=call.name, call_id=call.id,
            decision=DecisionKind.DENY.value, reason=decision.reason,
            checker=decision.checker, rule=decision.rule,
        )
    return decision
