"""What ToolNode and ToolExecutor share: the runner cache, previews and one call's span."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from jianmu.constraints import ExecutionConstraints
from jianmu.errors import ToolError
from jianmu.execution.runner import ToolRunner
from jianmu.runtime.async_node import RuntimeNode
from jianmu.runtime.context import RunContext
from jianmu.state import StateView
from jianmu.telemetry import (
    ERROR_TYPE,
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
)
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolCall, ToolResult, render_output

if TYPE_CHECKING:
    from opentelemetry.trace import Span

PREVIEW_CHARS = 200


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A short one-line rendering of a value for events and terminal output."""
    text = render_output(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_text(exc: BaseException) -> str:
    """An exception as the model should read it: our errors speak for themselves."""
    if isinstance(exc, ToolError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class RunnerCache:
    """Keeps one `ToolRunner` until the execution constraints' signature changes."""

    def __init__(self) -> None:
        self.runner: ToolRunner | None = None
        self.error: Exception | None = None
        self._signature: str | None = None

    async def get(self, execution: ExecutionConstraints, ctx: RunContext) -> ToolRunner:
        """The runner for ``execution``; raises the construction error (e.g. no isolation)."""
        signature = execution.model_dump_json()
        if self._signature != signature:
            old, self.runner, self.error = self.runner, None, None
            self._signature = signature
            if old is not None:
                await old.close()
            try:
                self.runner = ToolRunner.from_execution_constraints(execution)
            except Exception as exc:  # e.g. network:false with no bubblewrap or Docker
                self.error = exc
        if self.error is not None:
            raise self.error
        ctx.on_close(self.release)  # once per run: the sandbox closes when the run ends
        assert self.runner is not None
        return self.runner

    async def release(self) -> None:
        """At the end of a run: close the sandbox, keep the runner and its thread pool."""
        if self.runner is not None:
            await self.runner.release()

    async def close(self) -> None:
        """Close the runner (its sandbox and worker threads); the next `get` builds a new one."""
        runner, self.runner, self._signature, self.error = self.runner, None, None, None
        if runner is not None:
            await runner.close()


def tool_span_attributes(tool_name: str, call_id: str | None, tool: Tool) -> dict[str, Any]:
    """The GenAI attributes of an ``execute_tool`` span."""
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: "execute_tool",
        GEN_AI_TOOL_NAME: tool_name,
        GEN_AI_TOOL_TYPE: "extension" if tool.remote else "function",
    }
    if call_id:
        attributes[GEN_AI_TOOL_CALL_ID] = call_id
    return attributes


def finish_span(
    span: Span | None, result: ToolResult, arguments: Any, ctx: RunContext | None
) -> None:
    """Record a call's outcome on its span (content only when the config opts in)."""
    if span is None:
        return
    if not result.ok:
        span.set_attribute(ERROR_TYPE, result.error.split(":", 1)[0] if result.error else "error")
    span.set_attribute("jianmu.tool.ok", result.ok)
    if ctx is not None and ctx.config.telemetry.capture_content:
        span.set_attribute(GEN_AI_TOOL_CALL_ARGUMENTS, json.dumps(arguments, default=str))
        span.set_attribute(GEN_AI_TOOL_CALL_RESULT, result.text[:4000])


def unique_ids(calls: list[ToolCall], node: RuntimeNode) -> list[ToolCall]:
    """``calls`` with each id unique in the batch and unused in the run, derived the same each
    time.

    A model may reuse an id (even one approved and used before, maybe in another skill's
    namespace): a clashing id ``x`` becomes ``x.1`` (or ``x.2``...). Stable, so an approval
    asked under it and a run restored mid-batch find the same call again; an id whose call
    finished in the current batch (its observation is still pending) is that call, not a clash.
    """
    used = set(node.state.get("completed_call_ids") or ())
    observed = set((node.state.get("observations") or {}).keys())
    interaction = node.ctx.interaction

    def spent(call_id: str) -> bool:
        reused = call_id in used or (interaction is not None and interaction.consumed(call_id))
        return reused and call_id not in observed

    seen: set[str] = set()
    out: list[ToolCall] = []
    for call in calls:
        call_id, n = call.id, 0
        while call_id in seen or spent(call_id):
            n += 1
            call_id = f"{call.id}.{n}"
        seen.add(call_id)
        out.append(call if call_id == call.id else call.with_id(call_id))
    return out


def ledger_view(node: RuntimeNode) -> StateView:
    """Where the guard's counts live: the root state, so a run's limits hold across skills
    (each in its own namespace); the node's own view if the root schema has no place."""
    manager = node.state_manager
    return manager.root if manager.accepts("guard_ledger") else node.state


def usage_view(node: RuntimeNode) -> StateView:
    """Where the run's token usage adds up: the root state, so a budget holds across skills
    (each in its own namespace); the node's own view if the root schema has no place."""
    manager = node.state_manager
    return manager.root if manager.accepts("usage") else node.state


def tokens_spent(node: RuntimeNode) -> int:
    """Tokens the whole run has spent so far (the run-wide ``usage``)."""
    return getattr(usage_view(node).get("usage"), "total_tokens", 0) or 0


def fresh_request_id(base: str, ctx: RunContext) -> str:
    """``base``, or ``base.N`` when the approvals under the earlier ids were already used."""
    interaction = ctx.interaction
    candidate, n = base, 0
    while interaction is not None and interaction.consumed(candidate):
        n += 1
        candidate = f"{base}.{n}"
    return candidate


def consume_approval(ctx: RunContext, request_id: str) -> None:
    """Mark a person's approval as used once the call it allowed has run."""
    interaction = ctx.interaction
    if interaction is not None and interaction.decision(request_id) is not None:
        interaction.consume(request_id)


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a `time.perf_counter` reading)."""
    return (time.perf_counter() - start) * 1000
