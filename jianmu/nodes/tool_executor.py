"""`ToolExecutor`: runs the tool calls a model asked for, through the guard, into observations."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal

import anyio
from py_trees.common import Status
from pydantic import BaseModel, ConfigDict, Field

from jianmu.constraints import Constraints
from jianmu.errors import MCPError, ToolInputError, ToolTimeoutError
from jianmu.guard import Decision, GuardEnforcer, GuardLedger, visible_tools
from jianmu.llm.messages import Message
from jianmu.nodes._tool_calls import (
    RunnerCache,
    consume_approval,
    elapsed_ms,
    error_text,
    finish_span,
    ledger_view,
    preview,
    tool_span_attributes,
)
from jianmu.runtime.async_node import AsyncNode
from jianmu.telemetry import span
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolCall, ToolResult, new_call_id
from jianmu.tools.names import shown_name
from jianmu.tools.toolset import ToolSet

__all__ = ("ToolExecutor", "ToolExecutorConfig")


def _transient(exc: Exception) -> bool:
    """Whether another attempt may succeed: a dropped connection, a server that restarts.

    A tool's own timeout is not retried (a hung call must not pile up), nor are the tool's
    deliberate failures (`ToolError`) or bugs (ValueError, TypeError, ...).
    """
    if isinstance(exc, ToolTimeoutError):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError, MCPError)):
        return True
    return bool(getattr(exc, "transient", False))


def _not_json(tool: Tool, raw: str) -> str:
    allowed = ", ".join(tool.parameters.get("properties", {})) or "none"
    shown = raw if len(raw) <= 80 else raw[:77] + "..."
    return (
        f"the arguments for tool {tool.name!r} are not valid JSON: {shown!r}; "
        f"send a JSON object with these keys: {allowed}"
    )


class ToolExecutorConfig(BaseModel):
    """How a `ToolExecutor` runs a batch."""

    model_config = ConfigDict(extra="forbid")

    execution_mode: Literal["auto", "serial", "parallel"] = "auto"
    """``auto``: parallel when the batch has several calls and every tool is parallel-safe."""
    max_concurrency: int = Field(default=32, ge=1)
    """Calls that may run at once in parallel mode."""
    retry_backoff: float = Field(default=0.5, ge=0)
    """Seconds to wait before retry ``n``, times ``n``."""
    observation_format: Literal["text", "json"] = "text"
    """Tool message content: the result text, or ``{"ok", "output", "error"}`` as JSON."""


class ToolExecutor(AsyncNode):
    """Runs the calls in ``actions``: guard preflight, execution, one tool message per call.

    Reads ``actions`` (``ToolCall``s or raw dicts), gives every call a unique id, checks the whole
    batch with the guard, suspends the run if any call needs approval (nothing runs until every
    request is decided), runs the rest serially or in parallel, appends one tool message per
    call to ``messages`` in the calls' order, adds ``tool_effects`` for the calls that succeeded,
    clears ``actions`` and returns SUCCESS. Every failure — unknown tool, bad arguments, an
    exception, a timeout, a denial — is an observation, never an exception out of the node.

    A call that fails with a transient error (a dropped connection, a restarting server) is
    retried up to the tool's ``max_retries`` times, waiting ``retry_backoff * attempt``; tools
    that are not idempotent default to no retries, and timeouts and deliberate failures are
    never retried.

    The ids of finished calls go to ``completed_call_ids`` (and the run is checkpointed after
    each), so a run restored after a crash never runs a finished call again.

    Args:
        name: the node's name.
        tools: a list of tools or a `ToolSet`.
        config: how batches run.
        constraints: this node's layer of constraints, merged under the run's (it may only
            tighten them).
    """

    def __init__(
        self,
        name: str = "ToolExecutor",
        tools: ToolSet | Iterable[Tool] | None = None,
        *,
        config: ToolExecutorConfig | None = None,
        constraints: Constraints | None = None,
    ) -> None:
        super().__init__(name)
        self.toolset = tools if isinstance(tools, ToolSet) else ToolSet.from_tools(tools or ())
        self.config = config or ToolExecutorConfig()
        self.constraints = constraints
        self._enforcer: GuardEnforcer | None = None
        self._runners = RunnerCache()
        self._tool_sources: list[Callable[[], Awaitable[None]]] = []

    # -- configuration ---------------------------------------------------------------------------
    def register_tool(self, tool: Tool) -> None:
        """Add a tool (last registration of a name wins)."""
        self.toolset = self.toolset.with_tools([tool])

    def add_tool_source(self, source: Callable[[], Awaitable[None]]) -> None:
        """Await ``source`` once before the tools are next needed (it may `register_tool`).

        For tools that need a connection first, such as an MCP server's: they are fetched on
        first use, also after a run is restored in a new process.
        """
        self._tool_sources.append(source)

    async def prepare_tools(self) -> None:
        """Run the pending tool sources (once each)."""
        while self._tool_sources:
            source = self._tool_sources[0]
            await source()
            self._tool_sources.pop(0)

    def reset_for_run(self) -> None:
        """Forget the guard built on the first tick; the next tick builds it anew."""
        self._enforcer = None

    def effective_constraints(self) -> Constraints:
        """The run's constraints with this node's layer merged in (tighten only)."""
        ctx = getattr(self, "ctx", None)
        run_layer = ctx.constraints if ctx is not None else None
        return Constraints.merge(run_layer, self.constraints)

    def visible_toolset(self) -> ToolSet:
        """The tools the model may see: this executor's, minus those whose policy is deny."""
        ctx = getattr(self, "ctx", None)
        roles = ctx.user_roles if ctx is not None else None
        guard = self.effective_constraints().guard
        names = set(visible_tools(self.toolset, guard, user_roles=roles))
        return ToolSet.from_tools(t for t in self.toolset if t.name.lower() in names)

    # -- the tick --------------------------------------------------------------------------------
    async def update_async(self) -> Status:
        """Run the pending batch; RUNNING while approvals are pending, else SUCCESS."""
        calls = self._normalised_actions()
        if not calls:
            return Status.SUCCESS
        await self.prepare_tools()
        constraints = self.effective_constraints()
        if self._enforcer is None:
            self._enforcer = GuardEnforcer.from_guard_constraints(
                constraints.guard, workspace=constraints.execution.workdir
            )
        done = set(self.state.get("completed_call_ids") or ())
        # the boundary: each call is renamed, once, to the one tool it means; the guard, the
        # ledger, the span and the observation see only that name
        resolved = [self.toolset.canonical(c) for c in calls if c.id not in done]
        unknown = [c for c, found in resolved if found is None]
        known = [c for c, found in resolved if found is not None]
        ledger = GuardLedger.from_dict(ledger_view(self).get("guard_ledger") or {})
        usage = self.state.get("usage")
        decisions = self._enforcer.preflight(
            known,
            self.toolset,
            run=self.ctx,
            tokens_used=getattr(usage, "total_tokens", 0) or 0,
            calls_made=ledger.calls_made,
            call_times=ledger.call_times,
            events=self.events,
        )
        waiting = [(c, d) for c, d in zip(known, decisions, strict=True) if d.awaiting_approval]
        if waiting:
            for call, decision in waiting:
                self.ctx.interaction.suspend(  # type: ignore[union-attr]
                    self._enforcer.approval_request(call, decision, node=self.path)
                )
            return Status.RUNNING
        for call in unknown:
            available = ", ".join(self.toolset.names()) or "none"
            shown = shown_name(call.name) if call.name else "<missing name>"
            self._record(call, None, ToolResult(
                tool=shown, ok=False, call_id=call.id,
                error=f"unknown tool {shown!r}; available tools: {available}",
            ))
        allowed: list[tuple[ToolCall, Decision]] = []
        for call, decision in zip(known, decisions, strict=True):
            if decision.denied:
                self._record(call, None, ToolResult(
                    tool=call.name, ok=False, call_id=call.id,
                    error=f"the guard denied this call: {decision.reason}",
                ))
            else:
                allowed.append((call, decision))
        await self._execute(allowed, constraints)
        self._flush(calls)
        return Status.SUCCESS

    # -- steps -----------------------------------------------------------------------------------
    def _normalised_actions(self) -> list[ToolCall]:
        """The batch with unique ids that no earlier call used; written back if changed."""
        raw = self.state.get("actions") or []
        calls = ToolCall.from_list(raw)
        used = set(self.state.get("completed_call_ids") or ())
        observed = set((self.state.get("observations") or {}).keys())
        interaction = self.ctx.interaction
        seen: set[str] = set()
        fixed: list[ToolCall] = []
        for call in calls:
            # a model may reuse an id (even one approved and used before, maybe in another
            # skill's namespace): never trust it twice
            reused = call.id in used or (
                interaction is not None and interaction.consumed(call.id)
            )
            if call.id in seen or (reused and call.id not in observed):
                call = call.with_id(new_call_id())
            seen.add(call.id)
            fixed.append(call)
        if fixed != list(raw):
            self.state.replace({"actions": fixed})
        return fixed

    def _mode(self, calls: Sequence[ToolCall]) -> Literal["serial", "parallel"]:
        mode = self.config.execution_mode
        if mode != "auto":
            return mode
        if len(calls) <= 1 or not self.toolset.is_parallel_safe([c.name for c in calls]):
            return "serial"
        return "parallel"

    async def _execute(
        self, batch: list[tuple[ToolCall, Decision]], constraints: Constraints
    ) -> None:
        if not batch:
            return
        try:
            runner = await self._runners.get(constraints.execution, self.ctx)
        except Exception as exc:  # no isolation available: every call says why
            for call, _decision in batch:
                self._record(call, None, ToolResult(
                    tool=call.name, ok=False, call_id=call.id, error=error_text(exc)
                ))
            return
        if self._mode([c for c, _ in batch]) == "serial":
            for call, decision in batch:
                await self._run_one(call, decision, runner)
            return
        limiter = asyncio.Semaphore(self.config.max_concurrency)

        async def guarded(call: ToolCall, decision: Decision) -> None:
            async with limiter:
                await self._run_one(call, decision, runner)

        # _run_one never raises, so one call's failure cannot cancel its siblings
        await asyncio.gather(*(guarded(call, decision) for call, decision in batch))

    async def _run_one(self, call: ToolCall, decision: Decision, runner: Any) -> None:
        """Run one call with retries; record exactly one observation. Never raises."""
        tool = self.toolset.get(call.name)
        assert tool is not None and tool.name == call.name  # canonical since update_async
        retries = max(0, int(getattr(tool, "max_retries", 0) or 0))
        attributes = {
            **tool_span_attributes(tool.name, call.id, tool), **decision.span_attributes()
        }
        events = self.events
        if events.wants("tool.call.started"):
            events.emit("tool.call.started", tool=tool.name, call_id=call.id, mode="agent",
                        args_preview=preview(call.arguments))
        injected = {"ctx": self.ctx, "state": self.state, "call_id": call.id}
        with span(self.ctx.tracer, f"execute_tool {tool.name}", attributes) as current:
            attempt = 0
            start = time.perf_counter()
            while True:
                try:
                    if isinstance(call.arguments, str) and not tool.wraps_input:
                        raise ToolInputError(_not_json(tool, call.arguments))
                    raw = await tool.execute(call.arguments, injected, runner)
                    result = ToolResult.from_raw(tool.name, raw, call_id=call.id)
                    break
                except ToolInputError as exc:  # the model must fix the call: no retry
                    result = ToolResult(tool=tool.name, ok=False, call_id=call.id,
                                        error=error_text(exc))
                    break
                except Exception as exc:
                    result = ToolResult(tool=tool.name, ok=False, call_id=call.id,
                                        error=error_text(exc))
                    if attempt >= retries or not _transient(exc):
                        break
                    attempt += 1
                    self.events.emit("tool.call.retry", tool=tool.name, call_id=call.id,
                                     attempt=attempt, error=result.error)
                    await anyio.sleep(self.config.retry_backoff * attempt)
            result = ToolResult.from_raw(
                tool.name, result, call_id=call.id, duration_ms=elapsed_ms(start)
            ).truncate(tool.max_result_length)
            finish_span(current, result, call.arguments, self.ctx)
        if result.ok and events.wants("tool.call.completed"):
            events.emit("tool.call.completed", tool=tool.name, call_id=call.id,
                        result_preview=preview(result.output),
                        duration_ms=result.duration_ms, truncated=result.truncated)
        elif not result.ok:
            events.emit("tool.call.failed", tool=tool.name, call_id=call.id, error=result.error)
        self._record(call, tool, result, executed=True)

    def _record(
        self, call: ToolCall, tool: Tool | None, result: ToolResult, *, executed: bool = False
    ) -> None:
        """Store one observation and mark the call finished, then checkpoint."""
        if not executed:  # unknown tool, denied, no sandbox: say so like a failed call
            self.events.emit("tool.call.failed", tool=result.tool, call_id=call.id,
                             error=result.error)
        update: dict[str, Any] = {
            "observations": {call.id: self._message(result)},
            "completed_call_ids": [call.id],
        }
        if result.ok and tool is not None and tool.effect_tags:
            update["tool_effects"] = {tag: 1 for tag in tool.effect_tags}
        self.state.update(update)
        if executed:
            ledgers = ledger_view(self)
            ledger = GuardLedger.from_dict(ledgers.get("guard_ledger") or {})
            enforcer = self._enforcer
            # call times matter only under a rate limit
            if enforcer is not None and enforcer.rate_limited(call.name):
                ledger.record([call.name], time.time())
            else:
                ledger.calls_made += 1
            ledgers.update({"guard_ledger": ledger.to_dict()})
            consume_approval(self.ctx, call.id)
        self.ctx.save_checkpoint()

    def _message(self, result: ToolResult) -> Message:
        if self.config.observation_format == "json":
            content = json.dumps(
                {"ok": result.ok, "output": result.output, "error": result.error},
                default=str, ensure_ascii=False,
            )
        else:
            content = result.text
        return Message.tool(content, tool_call_id=result.call_id or "", name=result.tool)

    def _flush(self, calls: list[ToolCall]) -> None:
        """Append the batch's observations in the calls' order; clear the batch."""
        observations = self.state.get("observations") or {}
        ordered = [observations[c.id] for c in calls if c.id in observations]
        # one atomic update: a crash leaves either the whole batch pending or none of it
        self.state.update({"actions": [], "observations": {}, "messages": ordered})
