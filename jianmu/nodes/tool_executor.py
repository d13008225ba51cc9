"""`ToolExecutor`: runs the tool calls a model asked for, through the guard, into observations.

One call, from `ToolExecutor.update_async` to its observation, is decided by these modules:

1. ``nodes/tool_executor.py`` (here): reads ``actions`` (canonical `ToolCall`s, written once by
   the model's node), resolves each call once to its tool (``tools/registry.py``), gives a
   reused id a stable fresh one in memory, and passes the (call, tool) pair down;
2. ``guard/enforcer.py``: `GuardEnforcer.preflight` runs the checker chain (the checkers are
   plug-ins it calls in turn, ``guard/checkers.py``) over the batch against the run's
   `GuardLedger`;
3. ``tools/base.py``: `Tool.bind_args` validates the arguments (``tools/schema.py``) and adds
   injected values;
4. ``execution/runner.py``: `ToolRunner.run` applies the timeout and runs the tool on the loop,
   in a worker thread or through the sandbox;
5. ``tools/calls.py``: `ToolResult.from_raw` turns what came back into one result, once;
6. ``llm/messages.py``: `Message.tool` is the observation, appended to ``messages`` in order.

Around them, the call's span (``runtime/events.py``) and the state update (``state.py``)
record it; they decide nothing about the call. Every module a plain call's whole run crosses
is listed, in order, in docs/design.md ("A plain call's path").

The helpers a call's node needs are here too, for `ToolNode` as well: the runner kept between
runs (`RunnerCache`), ids unique in the run (`unique_ids`), the run as the node keys its calls
in it (`own_run`), previews and the call's span.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import anyio
from py_trees.common import Status

from jianmu.constraints import (
    Constraints,
    ExecutionConstraints,
    is_read_only,
    once_per_read_only,
)
from jianmu.errors import ToolInputError, ToolSuspended
from jianmu.execution.runner import (
    ToolRunner,
    pinned_paths,
    repin_paths,
    reset_redirect_check,
    set_redirect_check,
)
from jianmu.execution.threads import thread_starts
from jianmu.guard import Decision, GuardEnforcer, GuardLedger, visible_tools
from jianmu.guard.checkers import denial, edited_call, screened_rejections
from jianmu.guard.enforcer import builtin_chain, warn_unmatched_rules
from jianmu.guard.guardrails import (
    Guardrail,
    configured_guardrails,
    given_guardrails,
    run_guardrails,
)
from jianmu.llm.messages import Message, Usage
from jianmu.nodes import _under_way as under_way
from jianmu.nodes._before_run import sandboxes_started, still_allowed
from jianmu.nodes._redirects import executor_refusal
from jianmu.nodes.executor_config import ToolExecutorConfig
from jianmu.nodes.state import ledger_view, tokens_spent, usage_view
from jianmu.nodes.tool_failures import (
    error_text,
    interrupts,
    own_failure,
    transient,
    withheld,
)
from jianmu.nodes.tool_spans import call_span_attributes, denied_span, finish_span
from jianmu.runtime.async_node import AsyncNode, RuntimeNode
from jianmu.runtime.context import RunContext, consume_approval, owner_prefix, unattended
from jianmu.runtime.events import span
from jianmu.runtime.scopes import seen_from
from jianmu.tools._edit_schema import input_schema_of
from jianmu.tools.base import Tool
from jianmu.tools.calls import (
    ToolCall,
    ToolResult,
    not_json_message,
    render_output,
    shown_name,
    unknown_tool_text,
)
from jianmu.tools.registry import ToolSet

__all__ = (
    "ToolExecutor",
    "ToolExecutorConfig",
)


PREVIEW_CHARS = 200


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A short one-line rendering of a value for events and terminal output."""
    text = render_output(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


_SIGNATURES: dict[int, str] = {}
"""The signature of each read-only `ExecutionConstraints`: worked out once per process, not
per batch, for the runs under the shared defaults."""


def _signature(execution: ExecutionConstraints) -> str:
    """What tells two execution constraints apart for `RunnerCache`: their JSON."""
    return once_per_read_only(execution, _SIGNATURES, ExecutionConstraints.model_dump_json)


class RunnerCache:
    """Keeps one `ToolRunner` until the execution constraints' signature changes."""

    def __init__(self) -> None:
        self.runner: ToolRunner | None = None
        self.error: Exception | None = None
        self._signature: str | None = None

    async def get(self, execution: ExecutionConstraints, ctx: RunContext) -> ToolRunner:
        """The runner for ``execution``; raises the construction error (e.g. no isolation)."""
        signature = _signature(execution)
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


MAX_CALL_ID = 128
"""The longest call id kept as the model sent it; a longer one is cut and given a digest."""


def unique_ids(calls: list[ToolCall], node: RuntimeNode) -> list[ToolCall]:
    """``calls`` with each id unique in the batch and unused in the run, derived the same each
    time.

    A model may reuse an id (even one approved and used before in the node's namespace; in
    another namespace it is another call, `own_run`): a clashing id ``x`` becomes ``x.1`` (or
    ``x.2``...). Stable, so an approval asked under it and a run restored mid-batch find the
    same call again; an id whose call finished in the current batch (its observation is still
    pending) is that call, not a clash.
    """
    state = node.state
    completed = state.get("completed_call_ids")
    used = set(completed) if completed else ()  # the first batch of a run: nothing used yet
    observed = state.get("observations") or {}  # its keys: the ids of this batch's results
    interaction = own_run(node).interaction  # the approvals of the node's namespace
    seen: set[str] = set()
    # the suffix each id got last in this batch: what was taken below it stays taken, so a
    # reply repeating one id 10,000 times is not 50,000,000 tries (the event loop's seconds)
    last: dict[str, int] = {}
    out: list[ToolCall] = []
    for call in calls:
        # '/' separates the parts of a sub-agent's request id (``helper/<call>/<its call>``)
        # and ':' a question's (``ask:<call>``): an id of the model's must never read as
        # either, or its approval would be the sub-agent's or the question's too
        base = call.id.replace("/", "%2F").replace(":", "%3A")
        if len(base) > MAX_CALL_ID:  # it names state namespaces, requests and steps: keep it short
            digest = hashlib.sha256(base.encode("utf-8", "replace")).hexdigest()[:16]
            base = f"{base[:MAX_CALL_ID - 17]}~{digest}"
        n = last.get(base, 0)
        call_id = f"{base}.{n}" if n else base
        # taken: by an earlier call of this batch, or spent (used in the run or its approval
        # consumed) unless it is this batch's own finished call
        while call_id in seen or (
            (call_id in used or (interaction is not None and interaction.consumed(call_id)))
            and call_id not in observed
        ):
            n += 1
            call_id = f"{base}.{n}"
        last[base] = n
        seen.add(call_id)
        out.append(call if call_id == call.id else call.with_id(call_id))
    return out


def own_run(node: RuntimeNode) -> RunContext:
    """The run with ``node``'s calls keyed under its namespace (`seen_from`): the run itself in
    its own namespace (a lone agent's, most runs: no view is made)."""
    ctx = node.ctx
    return seen_from(ctx, node.namespace) if owner_prefix(ctx.namespace, node.namespace) else ctx


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a `time.perf_counter` reading)."""
    return (time.perf_counter() - start) * 1000


def with_calls_in_flight(
    ledger: GuardLedger, running: dict[object, list[str]], enforcer: GuardEnforcer
) -> GuardLedger:
    """``ledger`` plus the calls admitted and not done yet in every branch and sub-agent of
    the run (an agent tool's call, its sub-agent's, a parallel sibling's), as made now: each
    limit counts them, or two branches both fit under a limit only one of them may use."""
    names = [name for batch in running.values() for name in batch]
    if not names:
        return ledger
    timed = [name for name in names if enforcer.rate_limited(name)]
    if timed:
        ledger = ledger.after(timed, enforcer.clock())
    return ledger.model_copy(update={"calls_made": ledger.calls_made + len(names) - len(timed)})


@dataclasses.dataclass(slots=True)
class _Record:
    """One finished call, before it is written to the state."""

    call: ToolCall
    tool: Tool | None
    result: ToolResult
    executed: bool
    at: float
    message: Message
    """The observation, rendered when the call ended: a later call of the batch may change
    what the result refers to (a method returning its object's own list)."""


@functools.cache
def _default_config() -> ToolExecutorConfig:
    """What an executor given no config uses (frozen: one serves them all), made by the first
    executor rather than at import, where it would build the model's validator."""
    return ToolExecutorConfig()


_SHARED_GUARDS: dict[tuple[int, str | None], GuardEnforcer] = {}
"""The guard of the runs under each read-only constraints object (which lives for good)."""


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

    The ids of finished calls go to ``completed_call_ids``. With a checkpointer, each call's
    observation is written and the run checkpointed as the call finishes, so a run restored
    after a crash never runs a finished call again; without one (nothing to restore from),
    the batch's observations are written together when it ends, or when it is cancelled.
    A halted batch's calls that had not begun, or whose tool is idempotent, run again on the
    next run; one that began and may not run twice is recorded as maybe done, the model told.

    Args:
        name: the node's name.
        tools: a list of tools or a `ToolSet`.
        config: how batches run.
        constraints: this node's layer of constraints, merged under the run's (it may only
            tighten them).
        tool_output_guardrails: guardrails of each call's result (`jianmu.guard.guardrails`),
            before the configured ones: a trip replaces the result with a refusal the model
            reads, and the run goes on.
    """

    eager_start = False  # it waits on a model, a thread or a person (`AsyncNode.eager_start`)

    records_own_steps = True
    unwinds_first = True  # a call begun is recorded before the node starts again
    node_kind = "tool"

    def __init__(
        self,
        name: str = "ToolExecutor",
        tools: ToolSet | Iterable[Tool] | None = None,
        *,
        config: ToolExecutorConfig | None = None,
        constraints: Constraints | None = None,
        tool_output_guardrails: Sequence[Guardrail] = (),
    ) -> None:
        super().__init__(name)
        # a name ("prompt_injection") or a guardrail of another shape tripped on every result;
        # none (most executors): no code of the guardrails' module on a plain call's path
        given = tool_output_guardrails
        self.tool_output_guardrails: tuple[Guardrail, ...] = (
            given if type(given) is tuple and not given
            else given_guardrails("tool_output", given))
        """Guardrails of each result, before the configured ones."""
        self.llm_node: Any = None  # the AgentLLMNode whose calls it runs (set by it)
        self.toolset = tools if isinstance(tools, ToolSet) else ToolSet.from_tools(tools or ())
        self.config = config or _default_config()
        self.constraints = constraints
        self._enforcer: GuardEnforcer | None = None
        self._runners = RunnerCache()
        self._tool_sources: tuple[Callable[[], Awaitable[None]], ...] = ()
        self._held: list[_Record] | None = None
        self._visible: tuple[tuple[object, ...], ToolSet] | None = None
        self._suspended: tuple[str, ...] = ()
        """Calls of the batch that wait for a person (a sub-agent's approval)."""
        self._running: object | None = None
        """This batch's key in the run's ``running_calls``, while its calls run."""
        self._halted = False
        """Whether the runner stopped this batch: a cancel its calls see is not a tool's own."""
        self._raised: dict[str, str] = {}
        """The class of the exception each traced call that failed raised, for its span."""
        self._unstarted: set[str] = set()  # timed out waiting for a thread: never executed
        self._marked: set[str] = set()
        """Calls this node marked as under way (`jianmu.nodes._under_way`), until recorded."""
        self._bound: dict[str, dict[str, Any]] = {}
        """Each admitted call's validated arguments (`_valid`), until its first attempt."""
        self._began: set[str] = set()
        """The batch's calls whose first attempt began: one stopped now may have taken effect."""

    # -- configuration ---------------------------------------------------------------------------
    def register_tool(self, tool: Tool) -> None:
        """Add a tool (last registration of a name wins)."""
        self.toolset = self.toolset.with_tools([tool])

    def unregister_tool(self, name: str) -> None:
        """Remove the tool ``name`` if there is one (a server that dropped it)."""
        if name in self.toolset:
            self.toolset = self.toolset.remove(name)

    def add_tool_source(self, source: Callable[[], Awaitable[None]]) -> None:
        """Await ``source`` once before the tools are next needed (it may `register_tool`).

        For tools that need a connection first, such as an MCP server's: they are fetched on
        first use, also after a run is restored in a new process.
        """
        self._tool_sources = (*self._tool_sources, source)

    async def prepare_tools(self) -> None:
        """Run the pending tool sources (once each)."""
        while self._tool_sources:
            source = self._tool_sources[0]
            await source()
            self._tool_sources = self._tool_sources[1:]

    def reset_for_run(self) -> None:
        """Forget the guard built on the first tick; the next tick builds it anew."""
        self._enforcer = None
        self._visible = None

    def visible_toolset(self) -> ToolSet:
        """The tools the model may see: this executor's, minus those whose policy is deny.

        Worked out once per run, toolset and constraints (the model asks every turn), as the
        guard that checks the calls is built once (`reset_for_run` forgets both).
        """
        ctx = getattr(self, "ctx", None)
        constraints = self.effective_constraints
        key = (self.toolset, ctx, constraints, getattr(ctx, "user_roles", None))
        seen = self._visible
        if seen is not None and all(a is b for a, b in zip(seen[0], key, strict=True)):
            return seen[1]
        visible = visible_tools(self.toolset, ctx, constraints)
        self._visible = (key, visible)
        return visible

    async def aclose(self) -> None:
        """Close the sandbox and end the worker threads kept for the next run."""
        await self._runners.close()

    async def __aenter__(self) -> ToolExecutor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- the tick --------------------------------------------------------------------------------
    def settled(self) -> Status | None:
        """SUCCESS when no call is pending (a model that answered): nothing to run."""
        return None if self.state.get("actions") else Status.SUCCESS

    def terminate(self, new_status: Status) -> None:
        """Stop the batch, if it runs (`AsyncNode.terminate`): its calls are then halted."""
        self._halted = True
        super().terminate(new_status)

    async def update_async(self) -> Status:
        """Run the pending batch; RUNNING while approvals are pending, else SUCCESS."""
        calls = self._batch()
        if not calls:
            return Status.SUCCESS
        if self._tool_sources:
            await self.prepare_tools()
        try:
            screened = await screened_rejections(self, calls)  # a person's words, checked
            with pinned_paths():  # the tools open the paths the guard checked, links swapped
                allowed = self._admit(calls, screened)
                if allowed is None:
                    return Status.RUNNING
                batch = self._running = object()
                running = self.ctx.running_calls
                running[batch] = [call.name for call, _, _ in allowed]
                try:
                    await self._execute(allowed)
                finally:
                    running.pop(batch, None)
                    self._running = None
        except BaseException:  # cancelled (halted, pre-empted): keep what finished
            held, self._held = self._held, None
            if held:
                self._write(held)
            raise
        held, self._held = self._held, None
        if self._suspended:  # a call waits for a person: the batch stays, the rest is kept
            if held:
                self._write(held)
            return Status.RUNNING
        self._write(held or [], flush=calls)
        return Status.SUCCESS

    # -- steps -----------------------------------------------------------------------------------
    def _guard(self, constraints: Constraints) -> GuardEnforcer:
        """The guard of this run, built on the first batch (`reset_for_run` forgets it).

        Runs under the shared read-only defaults (`run_constraints`) share one: the built-in
        checkers keep no per-run counts (the run's `GuardLedger` is passed to each batch),
        so one chain serves them all. A chain with any other checker is built per run.
        """
        if self._enforcer is None:  # a run starts: a rule naming no tool is likely a typo
            warn_unmatched_rules(constraints.guard, self.toolset.names, self.events, self.name)
            shareable = is_read_only(constraints) and builtin_chain(constraints.guard)
            key = (id(constraints), constraints.execution.workdir)
            enforcer = _SHARED_GUARDS.get(key) if shareable else None
            if enforcer is None:
                enforcer = GuardEnforcer.from_guard_constraints(
                    constraints.guard, workspace=constraints.execution.workdir)
                if shareable:
                    _SHARED_GUARDS[key] = enforcer
            self._enforcer = enforcer
        return self._enforcer

    def _admit(self, calls: list[ToolCall], screened: Mapping[str, tuple[str, str]],
               ) -> list[tuple[ToolCall, Tool, Decision]] | None:
        """Check the batch with the guard: the calls that may run, each with its tool (resolved
        once, here, and passed down) and its decision.

        Unknown and denied calls get their observation here. None when a call needs a
        person's approval: each such call is asked, and nothing runs until all are decided.
        (A plain method: what it works with is gone before the calls run, not held by the
        node's task while they do.)
        """
        enforcer = self._guard(self.effective_constraints)
        done = set(self.state.get("completed_call_ids") or ())
        toolset = self.toolset
        pending = [toolset.canonical(c) for c in calls if c.id not in done]
        run = self.run_as_seen  # its requests are keyed under this node's namespace
        if run.interaction is not None:  # a person may have edited calls when approving
            pending = [(edited_call(c, run), found) for c, found in pending]
        if self.ctx.checkpointed:  # calls a process that died had started: not run again
            pending = under_way.settle_in_doubt(self, pending, self._marked, self._record)
        known = [(c, found) for c, found in pending if found is not None]
        ledger = with_calls_in_flight(GuardLedger.of(ledger_view(self).get("guard_ledger")),
                                      self.ctx.running_calls, enforcer)
        self._bound = {}  # a call whose arguments do not fit takes no later call's place
        decisions = enforcer.preflight(
            [c for c, _ in known], toolset, run=run, tokens_used=tokens_spent(self),
            ledger=ledger, events=self.events, resolved=[found for _, found in known],
            node=self.path, fits=self._fits,
        )
        # a call whose arguments do not fit is refused below, never put to a person
        waiting = [(c, d) for (c, found), d in zip(known, decisions, strict=True)
                   if d.awaiting_approval and self._fits(c, found)]
        if waiting:
            interaction = run.interaction
            assert interaction is not None  # without one, ConfirmChecker denies instead
            tools = {c.id: found for c, found in known}
            for call, decision in waiting:
                interaction.suspend(enforcer.approval_request(
                    call, decision, node=self.path, parameters=input_schema_of(tools.get(call.id)),
                ))
            return None
        # without a checkpointer nothing can be saved between calls: the batch's observations
        # are held here and written with the flush, one state update instead of one per call
        self._held = None if self.ctx.checkpointed else []
        self._suspended, self._halted, self._began = (), False, set()
        for call, found in pending:
            if found is None:  # named among the tools the model may see: never a hidden one
                self._record(call, None, ToolResult(
                    tool=shown_name(call.name) if call.name else "<missing name>", ok=False,
                    call_id=call.id, error=unknown_tool_text(
                        call.name, self._offered_names(), "available tools"),
                ))
        allowed: list[tuple[ToolCall, Tool, Decision]] = []
        for (call, found), decision in zip(known, decisions, strict=True):
            if decision.denied:
                denied_span(call, found, decision, self.ctx)
                self._record(call, None, denial(call, decision, screened))
            elif self._valid(call, found, decision):
                allowed.append((call, found, decision))
        return allowed

    def _offered_names(self) -> list[str]:
        """The names of every tool the model was offered: its node's answer and hand-off tools
        too, which that node runs itself (a call misnaming one is pointed to it)."""
        node = self.llm_node
        offered = node.offered_tools() if node is not None else self.visible_toolset()
        return offered.names()

    def _valid(self, call: ToolCall, tool: Tool, decision: Decision) -> bool:
        """Whether ``call``'s arguments fit ``tool`` (kept for its run); if not, its refusal is
        recorded: a call the tool never ran is not executed, as an unknown or denied one."""
        try:
            if call.id not in self._bound:  # else bound by `_fits` for the guard already
                self._bound[call.id] = self._bind(call, tool)
        except ToolInputError as exc:
            denied_span(call, tool, decision, self.ctx, error_type=type(exc).__name__)
            self._record(call, tool, ToolResult(
                tool=tool.name, ok=False, call_id=call.id, error=error_text(exc)))
            consume_approval(own_run(self), call.id)  # decided and answered: never asked again
            return False
        return True

    def _fits(self, call: ToolCall, tool: Tool) -> bool:
        """Whether ``call``'s arguments fit ``tool`` (nothing recorded; bound, kept by `_valid`)."""
        try:
            self._bound[call.id] = self._bind(call, tool)
        except ToolInputError:
            return False
        return True

    def _bind(self, call: ToolCall, tool: Tool) -> dict[str, Any]:
        """``call``'s arguments checked and bound for ``tool``, its injected values added.

        Raises:
            ToolInputError: they do not fit (not JSON, a wrong type, a missing one).
        """
        if isinstance(call.arguments, str) and not tool.wraps_input:
            raise ToolInputError(not_json_message(tool.name, tool.parameters, call.arguments))
        return tool.bind_args(call.arguments, self._injected(call))

    def _batch(self) -> list[ToolCall]:
        """The pending calls, each with an id no earlier call used (`unique_ids`); ``actions``
        itself is not rewritten."""
        return unique_ids(ToolCall.from_list(self.state.get("actions") or []), self)

    def _mode(self, tools: Sequence[Tool]) -> Literal["serial", "parallel"]:
        mode = self.config.execution_mode
        if mode != "auto":
            return mode
        if len(tools) <= 1 or not all(t.parallel_safe for t in tools):
            return "serial"
        return "parallel"

    async def _execute(self, batch: list[tuple[ToolCall, Tool, Decision]]) -> None:
        if not batch:
            return
        try:
            runner = await self._runners.get(self.effective_constraints.execution, self.ctx)
        except Exception as exc:  # no isolation available: every call says why
            for call, _tool, _decision in batch:
                self._record(call, None, ToolResult(
                    tool=call.name, ok=False, call_id=call.id, error=error_text(exc)
                ))
            return
        steps = own_run(self).steps  # keyed under this node's namespace, as its requests
        if any(tool.sandboxed for _, tool, _ in batch):  # started first: a call whose
            batch = await sandboxes_started(self, batch, runner, steps)  # cannot, never ran
        if steps is not None:  # a worker that dies from here on leaves these calls in flight
            await steps.mark_started([f"tool:{call.id}" for call, tool, _ in batch
                                      if under_way.rerunnable(tool)])
        if self._mode([tool for _, tool, _ in batch]) == "serial":
            changed = False  # whether a call that may change what later ones touch has run
            for call, tool, decision in batch:
                if self._suspended:  # the calls after one that waits run after it
                    break
                if changed:
                    repin_paths()  # checked again, and opened, as the workspace is now
                    if not still_allowed(self, call, tool):
                        continue
                await self._run_one(call, tool, decision, runner)
                changed = changed or tool.tool_spec.category != "read"
            return
        reads: list[tuple[ToolCall, Tool, Decision]] = []
        writes: list[tuple[ToolCall, Tool, Decision]] = []
        for entry in batch:
            (reads if entry[1].tool_spec.category == "read" else writes).append(entry)
        if reads and writes:
            # calls that write or run something (parallel-safe by their own word) run first,
            # and the reads after them, checked again, as in a serial batch: a write could
            # make a link that a read running beside it would follow
            await self._run_parallel(writes, runner)
            repin_paths()
            batch = [entry for entry in reads if still_allowed(self, entry[0], entry[1])]
        await self._run_parallel(batch, runner)

    async def _run_parallel(
        self, batch: list[tuple[ToolCall, Tool, Decision]], runner: ToolRunner
    ) -> None:
        """Run ``batch``'s calls at once, at most ``max_concurrency`` at a time."""
        # _run_one never raises: plain tasks awaited in turn do what a TaskGroup would, cheaper
        limiter = (
            anyio.CapacityLimiter(self.config.max_concurrency)
            if len(batch) > self.config.max_concurrency else None
        )
        loop, batch_task = asyncio.get_running_loop(), asyncio.current_task()
        tasks = []
        for call, tool, decision in batch:  # a loop, not a comprehension: no closure cells kept
            tasks.append(loop.create_task(
                self._run_one(call, tool, decision, runner) if limiter is None
                else self._run_limited(limiter, call, tool, decision, runner, batch_task)
            ))
        try:
            for task in tasks:
                if not task.done():  # shielded: a stop cancels every call at once (bare, the
                    await asyncio.shield(task)  # awaited call's thread place went on first)
        except BaseException:  # the node was halted (or a bug): stop the calls still running
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _run_limited(
        self, limiter: anyio.CapacityLimiter, call: ToolCall, tool: Tool, decision: Decision,
        runner: ToolRunner, batch: asyncio.Task[Any] | None,
    ) -> None:
        async with limiter:  # freed by a sibling the batch's stop ended: this one never begins
            if not (self._halted or (batch is not None and batch.cancelling())):
                await self._run_one(call, tool, decision, runner)

    async def _run_one(
        self, call: ToolCall, tool: Tool, decision: Decision, runner: ToolRunner
    ) -> None:
        """Run one call (``tool`` is the one `_admit` resolved it to) with retries; record
        exactly one observation. Raises only `RunClaimedError`: the run went to another owner
        before the call could be saved as under way, so it does not start."""
        ctx = self.ctx
        if (ctx.checkpointed and ctx.steps is None and not tool.tool_spec.idempotent
                and not tool.records_own_steps and under_way.start(self, call.id, tool.name)):
            self._marked.add(call.id)  # saved as under way before it starts: never run twice
        retries = tool.tool_spec.max_retries
        tracer = self.ctx.tracer
        # the span's attributes only when a tracer records them
        attributes = None if tracer is None else call_span_attributes(call, tool, decision, ctx)
        events = self.events
        guarded = bool(self.tool_output_guardrails or (
            self.effective_constraints.guard.guardrails.tool_output
        ) or self.ctx.guardrails.get("tool_output") or (  # checked before the model reads it
            getattr(tool, "person_answers", False) and self._input_guardrails()))
        if events.wants("tool.call.started"):
            if call.id in (self.state.get("suspended_call_ids") or ()):  # it goes on
                events.emit("tool.call.started", tool=tool.name, call_id=call.id, mode="agent",
                            args_preview=preview(call.arguments), resumed=True)
            else:
                events.emit("tool.call.started", tool=tool.name, call_id=call.id, mode="agent",
                            args_preview=preview(call.arguments))
        ran: ToolResult | None = None  # the tool's result, once it has one
        began = thread_starts()  # whether a worker thread took the call (a sync tool's)
        got: list[ToolResult] = []  # ...from inside a durable step, which returns it checked
        try:
            # a redirect the tool is told to follow is checked as the call itself was; the
            # guard is looked up only if the tool asks (`redirect_refusal`)
            checking = set_redirect_check(functools.partial(executor_refusal, self, call, tool))
            try:
                if tracer is None and self.ctx.steps is None:  # the common path
                    result = ran = await self._attempts(call, tool, runner, retries, guarded)
                    if guarded:
                        result = await self._guarded(call, tool, result)
                else:
                    with span(tracer, f"execute_tool {tool.name}", attributes,
                              pauses=(ToolSuspended,)) as current:
                        # checked inside the step: it records what the model may read, never
                        # what a guardrail withholds (steps are shown: the studio, `steps()`)
                        result = await self._recorded(call, tool, functools.partial(
                            self._checked, call, tool, runner, retries, guarded, got))
                        ran = got[0] if got else result
                        if not got and guarded:  # replayed: checked again, by today's rules
                            result = await self._guarded(call, tool, result)
                        raised = self._raised.pop(call.id, None)
                        # the span never holds what a guardrail withholds
                        finish_span(current, result, call.arguments, self.ctx,
                                    "withheld" if result is not ran else raised)
            finally:
                reset_redirect_check(checking)
        except ToolSuspended as exc:  # runs again, to its end, once the person has answered
            self._unmark(call)
            self._suspended = (*self._suspended, call.id)
            if call.id not in (self.state.get("suspended_call_ids") or ()):
                # kept in the state, so the call run again says it goes on, in any process
                self.state.update({"suspended_call_ids": [call.id]})
            events.emit("tool.call.suspended", tool=tool.name, call_id=call.id, reason=str(exc))
            return
        except BaseException as exc:  # halted, Ctrl-C: a call stopped before it began runs again
            if not interrupts(exc):  # a bug of ours, a lost run: not a stop
                raise
            ran = ran or (got[0] if got else None)
            if ran is not None:  # ...unless it had ended and a guardrail was reading its result:
                # it is done (never run again), its result withheld, as no guardrail passed it
                result = withheld(ran, "the run was stopped while a guardrail checked it")
                self._forget(call, tool, result)
                self._record(call, tool, result, executed=True)
                events.emit("tool.call.failed", tool=tool.name, call_id=call.id,
                            error=result.error)
            elif call.id in self._began and not under_way.rerunnable(tool) and (
                    began or tool.is_async or tool.sandboxed):  # (a thread took a sync one)
                # ...or it began and may not run twice: it may have taken effect (a thread even
                # goes on), so it is recorded as maybe done, never run again, and the model told
                under_way.settle(self, call, tool, self._record, under_way.why_stopped(tool))
            else:  # safe to repeat, or never begun: it runs again, here or restored elsewhere
                self._unmark(call)
                events.emit("tool.call.stopped", tool=tool.name, call_id=call.id)
            raise
        if result.ok and events.wants("tool.call.completed"):
            events.emit("tool.call.completed", tool=tool.name, call_id=call.id,
                        result_preview=preview(result.output),
                        duration_ms=result.duration_ms, truncated=result.truncated)
        elif not result.ok:
            events.emit("tool.call.failed", tool=tool.name, call_id=call.id, error=result.error,
                        **({"in_doubt": True} if result.maybe_done else {}))
        if result is not ran:
            self._forget(call, tool, result)
        self._record(call, tool, result, executed=True)

    def _forget(self, call: ToolCall, tool: Tool, result: ToolResult) -> None:
        """Tell a tool that keeps its result in the state (an agent tool: its sub-agent's
        answer) that a guardrail withheld it: it keeps ``result``, the refusal, instead."""
        forget = getattr(tool, "result_withheld", None)
        if forget is not None:
            forget(self.state, call.id, result)

    def _unmark(self, call: ToolCall) -> None:
        """Unmark a call that ended unrecorded: stopped, or waiting for a person."""
        if call.id in self._marked:
            self._marked.discard(call.id)
            under_way.stopped(self, [call.id])

    def _input_guardrails(self) -> tuple[Guardrail, ...]:
        """The input guardrails of this loop's user messages (its model node's, configured,
        its callers')."""
        return configured_guardrails("input", getattr(self.llm_node, "input_guardrails", ()),
                                     self.effective_constraints, self.ctx.guardrails)

    async def _guarded(self, call: ToolCall, tool: Tool, result: ToolResult) -> ToolResult:
        """``result``, or a refusal in its place when a tool-output guardrail trips, or an
        input one on a person's answer (``ask_user``'s: a user's message by another way)."""
        constraints = self.effective_constraints
        guardrails = configured_guardrails("tool_output", self.tool_output_guardrails,
                                           constraints, self.ctx.guardrails)
        timeout = constraints.guard.guardrails.timeout_s
        found = await run_guardrails("tool_output", guardrails, self.ctx, result, self.events,
                                     timeout=timeout, tool=result.tool, call_id=call.id)
        if found is None and result.ok and getattr(tool, "person_answers", False):
            found = await run_guardrails("input", self._input_guardrails(), self.ctx,
                                         result.text, self.events, timeout=timeout,
                                         tool=result.tool, call_id=call.id)
        if found is None:
            return result
        name, tripwire = found
        return withheld(result, f"guardrail {name!r} tripped ({tripwire.reason})")

    async def _checked(
        self, call: ToolCall, tool: Tool, runner: ToolRunner, retries: int, guarded: bool,
        got: list[ToolResult],
    ) -> ToolResult:
        """`_attempts`, then the tool-output guardrails when ``guarded``; the tool's own
        result is put in ``got`` for the caller, never returned if a guardrail withholds it."""
        result = await self._attempts(call, tool, runner, retries, guarded)
        got.append(result)
        # an output the same guardrails passed inside the call (`ToolResult.judged`) is not
        # judged twice: a judge that asks a model would be paid twice
        return (await self._guarded(call, tool, result) if guarded and not result.judged
                else result)

    async def _recorded(
        self, call: ToolCall, tool: Tool, attempts: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        """``attempts()``, as a durable step when the run is durable."""
        steps = own_run(self).steps
        if steps is None or tool.records_own_steps:
            return await attempts()
        # durable: the call id is the step's identity; a finished call is replayed
        key = f"tool:{call.id}"
        repeated = steps.maybe_repeated(key)
        # one that may not run twice: marked started now (not with its batch), or, in flight
        # as its worker died, maybe done
        result = await steps.run(key, await under_way.durable_factory(
            steps, key, call, tool, attempts))
        if repeated and under_way.rerunnable(tool):  # in flight as a worker died: ran again
            result = dataclasses.replace(result, maybe_repeated=True)
            self.events.emit("tool.call.repeated", tool=tool.name, call_id=call.id)
        return result

    async def _attempts(
        self, call: ToolCall, tool: Tool, runner: ToolRunner, retries: int, guarded: bool
    ) -> ToolResult:
        """Run the call, retrying transient failures; its one `ToolResult`. A failure's text
        that tool-output guardrails will read (``guarded``) is not in a retry's event."""
        attempt = 0
        start = time.perf_counter()
        raised: BaseException | None = None
        self._began.add(call.id)
        while True:
            try:
                args = self._bound.pop(call.id, None)  # checked by `_valid`; again on a retry
                raw = await runner.run(tool, self._bind(call, tool) if args is None else args)
                error = None
                break
            except ToolInputError as exc:  # the model must fix the call: no retry
                raw, error, raised = None, error_text(exc), exc
                break
            except ToolSuspended:
                raise
            except Exception as exc:
                raw, error, raised = None, error_text(exc), exc
                if attempt >= retries or not transient(exc):
                    break
                attempt += 1
                self.events.emit("tool.call.retry", tool=tool.name, call_id=call.id,
                                 attempt=attempt, error=error if not guarded else
                                 f"{type(exc).__name__} (its text is the guardrails' to read)")
                await anyio.sleep(self.config.retry_backoff * attempt)
            except BaseException as exc:  # sys.exit(), pytest's Failed, gevent's Timeout...
                error, raised = own_failure(exc, halted=self._halted), exc
                if error is None:  # halted, timed out, Ctrl-C: not the tool's
                    raise
                raw = None
                break
        if error is not None and self.ctx.tracer is not None:  # its span's error.type
            self._raised[call.id] = type(raised).__name__
        if not getattr(raised, "started", True):
            self._unstarted.add(call.id)  # a timeout before any thread took it
        return ToolResult.from_raw(
            tool.name, raw, error=error, call_id=call.id, duration_ms=elapsed_ms(start)
        ).truncate(tool.max_result_length)

    @property
    def run_as_seen(self) -> RunContext:
        """The run as the guard and the tools see it (`own_run`): nobody to ask where the
        config says so."""
        run = own_run(self)
        return run if self.config.interactive else unattended(run)

    def _injected(self, call: ToolCall) -> dict[str, Any]:
        """What a tool may ask to be given (`jianmu.tools.schema.Injected`)."""
        return {
            "ctx": self.run_as_seen, "state": self.state, "call_id": call.id,
            "constraints": self.effective_constraints, "node_path": self.path,
            "guardrails": self.guardrails_in_force,
        }

    def guardrails_in_force(self) -> dict[str, tuple[Guardrail, ...]]:
        """The guardrails given in code here, to its model node and to this run's callers, by
        kind: the sub-agents its calls start run under them all."""
        node, outer = self.llm_node, self.ctx.guardrails
        return {k: tuple(dict.fromkeys([*v, *outer.get(k, ())])) for k, v in (
            ("input", getattr(node, "input_guardrails", ())),
            ("output", getattr(node, "output_guardrails", ())),
            ("tool_output", self.tool_output_guardrails))}

    def _record(
        self, call: ToolCall, tool: Tool | None, result: ToolResult, *, executed: bool = False
    ) -> None:
        """Store one observation and mark the call finished, then checkpoint (or hold it for
        the batch's one write when the run has no checkpointer)."""
        if not executed:  # unknown tool, denied, no sandbox: say so like a failed call
            # bounded like every observation (a denial may quote the model's arguments)
            result = result.truncate(tool.max_result_length if tool else Tool.max_result_length)
            self.events.emit("tool.call.failed", tool=result.tool, call_id=call.id,
                             error=result.error)
        else:
            consume_approval(own_run(self), call.id)
        message = self._message(result, self._edit_of(call))
        record = _Record(call, tool, result, executed, time.time(), message)
        if self._held is not None:
            self._held.append(record)
            return
        self._write([record])
        self.ctx.save_checkpoint()

    def _write(self, records: list[_Record], *, flush: list[ToolCall] | None = None) -> None:
        """One state update for ``records``: observations, finished ids, effects, the ledger.

        With ``flush`` (the batch's calls), the observations go to ``messages`` in the calls'
        order and the batch is cleared in the same update: a crash leaves either the whole
        batch pending or none of it.
        """
        state = self.state
        observations = {r.call.id: r.message for r in records}
        update: dict[str, Any] = {}
        if records:
            update["completed_call_ids"] = [r.call.id for r in records]
            if self._marked:  # recorded now: no longer under way
                done = [r.call.id for r in records if r.call.id in self._marked]
                self._marked.difference_update(done)
                update.update(under_way.unmarked(done))
        effects: dict[str, int] = {}
        for r in records:
            if r.result.ok and r.tool is not None:
                for tag in r.tool.tool_spec.effect_tags:
                    effects[tag] = effects.get(tag, 0) + 1
        if effects:
            update["tool_effects"] = effects
        if flush is None:
            update["observations"] = observations
        else:
            earlier = state.get("observations") or {}  # held over from an interrupted tick
            found = (observations.get(c.id, earlier.get(c.id)) for c in flush)
            update.update(actions=[], messages=[m for m in found if m is not None])
            if earlier:  # else none are stored (a run without a checkpointer): nothing to clear
                update["observations"] = {}
        ran = [r for r in records if r.executed]
        if self._unstarted:  # ended, but never begun (no thread took them): not counted
            never = [r for r in ran if r.call.id in self._unstarted]
            self._unstarted.difference_update(r.call.id for r in records)
            self._not_running(never)
            ran = [r for r in ran if r not in never]
        if not ran:
            state.update(update)
            return
        counted_calls = Usage(tool_calls=len(ran))  # the run's count of executed calls
        update["usage"] = counted_calls
        run_usage = usage_view(self)
        if run_usage.manager is not state.manager or run_usage.namespace != state.namespace:
            run_usage.update({"usage": counted_calls})  # the run's total, at the root
        self._not_running(ran)  # counted in the ledger now
        ledgers = ledger_view(self)
        counted = self._counted(GuardLedger.of(ledgers.get("guard_ledger")), ran)
        if ledgers.manager is state.manager and ledgers.namespace == state.namespace:
            update["guard_ledger"] = counted  # the same view: one update, not two
            state.update(update)
        else:
            state.update(update)
            ledgers.update({"guard_ledger": counted})

    def _not_running(self, records: list[_Record]) -> None:
        """``records``' calls no longer count as running (`RunContext.running_calls`)."""
        names = self.ctx.running_calls.get(self._running)
        if names is not None:
            for r in records:
                if r.call.name in names:
                    names.remove(r.call.name)

    def _counted(self, ledger: GuardLedger, ran: list[_Record]) -> GuardLedger:
        """``ledger`` plus the calls that ran, each at the time it finished."""
        # the guard as it now stands: a `load_skill` in this batch may have tightened the
        # constraints and dropped the one built before (`reset_for_run`), and a call it
        # rate-limits must still be timed, or the next batch's check would not see it
        enforcer = self._enforcer or self._guard(self.effective_constraints)
        untimed: list[str] = []
        for r in ran:
            # call times matter only under a rate limit
            if enforcer.rate_limited(r.call.name):
                ledger = ledger.after([r.call.name], r.at, timed=True)
            else:
                untimed.append(r.call.name)
        if untimed:
            ledger = ledger.after(untimed, ran[-1].at, timed=False)
        return ledger

    def _edit_of(self, call: ToolCall) -> Any:
        """The arguments a person edited this call to, or None (the model's ran)."""
        interaction = own_run(self).interaction
        decision = interaction.decision(call.id) if interaction is not None else None
        if decision is None or decision.arguments is None:
            return None
        return decision.arguments if call.arguments == decision.arguments else None

    def _message(self, result: ToolResult, edited: Any = None) -> Message:
        if self.config.observation_format == "json":
            body = {"ok": result.ok, "output": result.output, "error": result.error}
            if edited is not None:
                body["edited_arguments"] = edited
            content = render_output(body)  # a returned model as its fields, not its repr
        else:
            content = result.text
            if edited is not None:
                # the assistant message keeps what the model asked; this says what ran instead
                shown = json.dumps(edited, default=str, ensure_ascii=False)
                content = f"[a person edited this call's arguments to {shown}]\n{content}"
        return Message.tool(
            content, tool_call_id=result.call_id or "", name=result.tool, media=result.media
        )
