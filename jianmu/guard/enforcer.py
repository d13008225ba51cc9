"""`GuardEnforcer`: runs the checker chain over a batch of tool calls.

The executor's use, once per batch::

    enforcer = GuardEnforcer.from_guard_constraints(ctx.constraints.guard)   # first tick
    decisions = enforcer.preflight(calls, toolset, run=ctx, tokens_used=state.usage,
                                   ledger=GuardLedger.of(state.guard_ledger))
    for call, d in zip(calls, decisions):
        if d.awaiting_approval:
            ctx.interaction.suspend(enforcer.approval_request(call, d, node=path))
    ...  # nothing runs while any is PENDING; DENY becomes a rejection observation
    state.guard_ledger = ledger.after([call.name], now)   # for each call that ran
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from jianmu.constraints import GuardConstraints
from jianmu.guard.checkers import (
    BudgetChecker,
    ConfirmChecker,
    GuardChecker,
    RateLimitChecker,
    build_chain,
)
from jianmu.guard.decision import Decision, DecisionKind, GuardContext, GuardLedger
from jianmu.guard.policy import ToolPolicyChecker
from jianmu.runtime.context import RunContext
from jianmu.runtime.events import EventSink
from jianmu.runtime.interaction import ApprovalRequest
from jianmu.tools.calls import ToolCall
from jianmu.tools.registry import ToolLookup, canonical_call

__all__ = ("CHECK_KINDS", "GuardEnforcer")

CHECK_KINDS = frozenset({"tool_call"})
"""What `GuardEnforcer.check` can check; other kinds are reserved."""


_NO_OBJECTION = Decision.allow("no checker objected", checker="GuardEnforcer")
"""Where the chain starts (a `Decision` is immutable: one serves every call)."""


class GuardEnforcer:
    """Runs the checker chain: by default `ToolPolicyChecker` → `RateLimitChecker` →
    `BudgetChecker` → `ConfirmChecker`; ``guard.checkers`` may name others (`jianmu.plugins`).

    Holds no per-run counts: `preflight` takes the run's `GuardLedger`, which the nodes keep
    in the run's state, so a run restored in another process counts right.
    """

    def __init__(
        self,
        checkers: Sequence[GuardChecker] | None = None,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """Use ``checkers`` in order (default: the four with no limits and no rules).

        Args:
            checkers: The chain.
            clock: Time source (default `time.time`); pass the same to the `RateLimitChecker`.
        """
        self.clock: Callable[[], float] = clock or time.time
        if checkers is None:
            checkers = (
                ToolPolicyChecker(),
                RateLimitChecker(clock=self.clock),
                BudgetChecker(),
                ConfirmChecker(),
            )
        self.checkers: tuple[GuardChecker, ...] = tuple(checkers)
        self._rate_limited: dict[str, bool] = {}

    @classmethod
    def from_guard_constraints(
        cls,
        guard: GuardConstraints | None,
        *,
        clock: Callable[[], float] | None = None,
        workspace: str | os.PathLike[str] | None = None,
    ) -> GuardEnforcer:
        """Build the chain that ``guard.checkers`` names (default: `DEFAULT_CHECKERS`, in order).

        Args:
            guard: The merged guard constraints.
            clock: Time source for the rate limits.
            workspace: The workspace root that path rules resolve against (pass the merged
                ``execution.workdir``); default the run's ``execution.workdir``, else
                `jianmu.execution.runner.current_workspace()`.

        Raises:
            ConfigError: a ``tool_policy`` rule or a limit is invalid, or a checker name is
                not registered or does not build a checker (see `jianmu.plugins`).
        """
        clock = clock or time.time
        chain = build_chain(guard or GuardConstraints(), clock=clock, workspace=workspace)
        return cls(chain, clock=clock)

    def check(
        self, kind: str, context: GuardContext, *, events: EventSink | None = None
    ) -> Decision:
        """Run the chain for one call and emit ``guard.decision``.

        Args:
            kind: What is checked; only ``"tool_call"`` for now.
            context: The call and what the checkers need.
            events: Where to emit (e.g. a node-bound emitter); default ``context.run.events``.

        Raises:
            ValueError: ``kind`` is not a known check kind.
        """
        if kind not in CHECK_KINDS:
            raise ValueError(f"unknown guard check kind {kind!r}; supported: {sorted(CHECK_KINDS)}")
        decision = _NO_OBJECTION
        for checker in self.checkers:
            decision = checker.check(context, decision)
            if decision.kind is DecisionKind.DENY:
                break
        if decision.kind is DecisionKind.CONFIRM:
            # a chain without ConfirmChecker must not leave a CONFIRM for the caller to misread
            decision = Decision.deny(
                f"this call needs confirmation ({decision.reason}) and no checker can ask",
                checker=decision.checker,
                rule=decision.rule,
            )
        emitter = events if events is not None else getattr(context.run, "events", None)
        wants = getattr(emitter, "wants", None)  # a bare EventSink is always told
        if emitter is not None and (wants is None or wants("guard.decision")):
            emitter.emit(
                "guard.decision",
                check=kind,
                tool=context.call.name,
                call_id=context.call.id,
                decision=decision.kind.value,
                reason=decision.reason,
                checker=decision.checker,
                rule=decision.rule,
            )
        return decision

    def preflight(
        self,
        calls: Sequence[ToolCall],
        tools: ToolLookup,
        *,
        run: RunContext | None = None,
        tokens_used: int = 0,
        ledger: GuardLedger | None = None,
        events: EventSink | None = None,
    ) -> list[Decision]:
        """Check a whole batch in order; one decision per call, in the same order.

        A call that is not denied counts against ``max_tool_calls`` and the per-minute limits
        of the calls after it, so a batch never overshoots them.

        Args:
            calls: The batch.
            tools: The tools by name: a `ToolSet`, a mapping of name to tool, or a list.
            run: The run's context (``user_roles``, ``interaction``, ``events``).
            tokens_used: Tokens the run has spent (the state's ``usage``).
            ledger: What the run used before this batch (calls made, recent call times).
            events: Where to emit ``guard.decision``; default ``run.events``.
        """
        # every checker sees the canonical call: the registered tool's own name, never a
        # look-alike (callers should pass canonical calls; this makes sure of it)
        resolved = [canonical_call(call, tools) for call in calls]
        batch = tuple(call for call, _tool in resolved)
        ledger = ledger if ledger is not None else GuardLedger()
        admitted: list[ToolCall] = []
        decisions: list[Decision] = []
        for call, tool in resolved:
            context = GuardContext(
                call=call,
                # the checkers read the tool's spec: what it says of itself, in one place
                tool=getattr(tool, "tool_spec", tool),
                batch=batch,
                admitted=tuple(admitted),
                run=run,
                tokens_used=tokens_used,
                calls_made=ledger.calls_made,
                call_times=ledger.call_times,
            )
            decision = self.check("tool_call", context, events=events)
            if not decision.denied:
                admitted.append(call)
            decisions.append(decision)
        return decisions

    def approval_request(
        self, call: ToolCall, decision: Decision, *, node: str | None = None
    ) -> ApprovalRequest:
        """The request to suspend with for a PENDING call (its id is the call id).

        Only requests built here are honoured by `ConfirmChecker`.
        """
        return ConfirmChecker.request_for(call, decision, node=node)

    def rate_limited(self, name: str) -> bool:
        """Whether a per-minute limit applies to the tool ``name`` (its call times must be kept)."""
        known = self._rate_limited.get(name)
        if known is None:  # the chain is fixed once built: ask it once per tool
            known = self._rate_limited[name] = any(
                isinstance(c, RateLimitChecker) and c.limit_for(name) is not None
                for c in self.checkers
            )
        return known
