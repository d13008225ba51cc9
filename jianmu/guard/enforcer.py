"""`GuardEnforcer`: runs the checker chain over a batch of tool calls.

The executor's use, once per batch::

    enforcer = GuardEnforcer.from_guard_constraints(ctx.constraints.guard)   # first tick
    decisions = enforcer.preflight(calls, toolset, run=ctx,
                                   tokens_used=state.usage, calls_made=len(completed))
    for call, d in zip(calls, decisions):
        if d.awaiting_approval:
            ctx.interaction.suspend(enforcer.approval_request(call, d, node=path))
    ...  # nothing runs while any is PENDING; DENY becomes a rejection observation
    enforcer.record_executed(calls_that_ran)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jianmu.constraints import GuardConstraints
from jianmu.guard.checker import build_chain
from jianmu.guard.checkers import (
    RATE_WINDOW_SECONDS,
    BudgetChecker,
    ConfirmChecker,
    GuardChecker,
    RateLimitChecker,
    ToolPolicyChecker,
)
from jianmu.guard.decision import Decision, DecisionKind, GuardContext
from jianmu.runtime.context import RunContext
from jianmu.runtime.interaction import ApprovalRequest
from jianmu.tools.calls import ToolCall
from jianmu.tools.names import canonical_call

__all__ = ("CHECK_KINDS", "GuardEnforcer", "GuardLedger", "is_denied", "visible_tools")

CHECK_KINDS = frozenset({"tool_call"})
"""What `GuardEnforcer.check` can check; other kinds are reserved."""


@dataclass(kw_only=True)
class GuardLedger:
    """What a run has used that the guard counts: calls made and their times per tool.

    JSON round-trips through `to_dict` / `from_dict`, so the executor can keep it in the state.
    """

    calls_made: int = 0
    """Tool calls executed in the run."""
    call_times: dict[str, list[float]] = field(default_factory=dict)
    """Clock times of the calls of the last minute, per canonical tool name (lower case)."""

    def record(self, names: Iterable[str], at: float) -> None:
        """Count calls of ``names`` made at time ``at``; forget times older than a minute."""
        for name in names:
            self.calls_made += 1
            self.call_times.setdefault(name.strip().lower(), []).append(at)
        for key in list(self.call_times):
            kept = [t for t in self.call_times[key] if at - t < RATE_WINDOW_SECONDS]
            if kept:
                self.call_times[key] = kept
            else:
                del self.call_times[key]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return {
            "calls_made": self.calls_made,
            "call_times": {k: list(v) for k, v in self.call_times.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GuardLedger:
        """Rebuild from `to_dict`."""
        times = data.get("call_times") or {}
        return cls(
            calls_made=int(data.get("calls_made", 0)),
            call_times={str(k): [float(t) for t in v] for k, v in times.items()},
        )


def _iter_tools(tools: Any) -> list[Any]:
    if isinstance(tools, Mapping):
        return list(tools.values())
    inner = getattr(tools, "tools", None)
    if inner is not None and not callable(inner):
        return _iter_tools(inner)
    return list(tools)


class GuardEnforcer:
    """Runs the checker chain: by default `ToolPolicyChecker` → `RateLimitChecker` →
    `BudgetChecker` → `ConfirmChecker`; ``guard.checkers`` may name others (`jianmu.plugins`).

    Holds no per-run counts that matter for correctness: `preflight` takes them as arguments;
    the `ledger` is a convenience for callers that do not keep them in their state.
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
            clock: Time source for `record_executed` (default `time.time`); pass the same to
                the `RateLimitChecker`.
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
        self.ledger = GuardLedger()

    @classmethod
    def from_guard_constraints(
        cls,
        guard: GuardConstraints | None,
        *,
        clock: Callable[[], float] | None = None,
        workspace: str | os.PathLike[str] | None = None,
    ) -> GuardEnforcer:
        """Build the chain that ``guard.checkers`` names (default: the seed's four, in order).

        Args:
            guard: The merged guard constraints.
            clock: Time source for the rate limits.
            workspace: The workspace root that path rules resolve against (pass the merged
                ``execution.workdir``); default the run's ``execution.workdir``, else
                `jianmu.execution.workspace.current_workspace()`.

        Raises:
            ConfigError: a ``tool_policy`` rule or a limit is invalid, or a checker name is
                not registered or does not build a checker (see `jianmu.plugins`).
        """
        clock = clock or time.time
        chain = build_chain(guard or GuardConstraints(), clock=clock, workspace=workspace)
        return cls(chain, clock=clock)

    @property
    def policy(self) -> ToolPolicyChecker | None:
        """The chain's `ToolPolicyChecker`, if it has one."""
        for checker in self.checkers:
            if isinstance(checker, ToolPolicyChecker):
                return checker
        return None

    def check(self, kind: str, context: GuardContext, *, events: Any = None) -> Decision:
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
        decision = Decision.allow("no checker objected", checker=type(self).__name__)
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
        if emitter is not None:
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
        tools: Any,
        *,
        run: RunContext | None = None,
        tokens_used: int = 0,
        calls_made: int | None = None,
        call_times: Mapping[str, Sequence[float]] | None = None,
        events: Any = None,
    ) -> list[Decision]:
        """Check a whole batch in order; one decision per call, in the same order.

        A call that is not denied counts against ``max_tool_calls`` and the per-minute limits
        of the calls after it, so a batch never overshoots them.

        Args:
            calls: The batch.
            tools: The tools by name: a mapping, a `ToolSet` (``get``) or a list of tools.
            run: The run's context (``user_roles``, ``interaction``, ``events``).
            tokens_used: Tokens the run has spent (the state's ``usage``).
            calls_made: Calls executed in the run before this batch; default
                ``self.ledger.calls_made``.
            call_times: Times of recent calls per tool; default ``self.ledger.call_times``.
            events: Where to emit ``guard.decision``; default ``run.events``.
        """
        # every checker sees the canonical call: the registered tool's own name, never a
        # look-alike (callers should pass canonical calls; this makes sure of it)
        resolved = [canonical_call(call, tools) for call in calls]
        batch = tuple(call for call, _tool in resolved)
        made = self.ledger.calls_made if calls_made is None else calls_made
        times = self.ledger.call_times if call_times is None else call_times
        admitted: list[ToolCall] = []
        decisions: list[Decision] = []
        for call, tool in resolved:
            context = GuardContext(
                call=call,
                tool=tool,
                batch=batch,
                admitted=tuple(admitted),
                run=run,
                tokens_used=tokens_used,
                calls_made=made,
                call_times=times,
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
        return any(
            isinstance(c, RateLimitChecker) and c.limit_for(name) is not None
            for c in self.checkers
        )

    def record_executed(self, calls: Iterable[ToolCall | str], *, at: float | None = None) -> None:
        """Count calls that ran (tool calls or tool names) in `ledger`."""
        names = [c if isinstance(c, str) else c.name for c in calls]
        self.ledger.record(names, self.clock() if at is None else at)

    def reset_for_run(self) -> None:
        """Forget the counts of the previous run."""
        self.ledger = GuardLedger()

    def visible(self, tools: Any, *, user_roles: Iterable[str] | None = None) -> list[str]:
        """Names of ``tools`` the model may see (see `visible_tools`)."""
        policy = self.policy or ToolPolicyChecker()
        roles = None if user_roles is None else frozenset(user_roles)
        return [_name(t) for t in _iter_tools(tools) if not policy.hides(t, user_roles=roles)]


def _name(tool: Any) -> str:
    return (tool if isinstance(tool, str) else str(getattr(tool, "name", ""))).lower()


def visible_tools(
    tools: Any, guard: GuardConstraints | None, *, user_roles: Iterable[str] | None = None
) -> list[str]:
    """Lower-cased names of the tools the model may see, in order.

    A tool is hidden when its merged policy is a plain deny: a name rule denies it, or no rule
    allows or confirms any of its calls and ``default_policy`` is deny. With ``user_roles``,
    admin_only tools are hidden from users without the ``admin`` role.

    Args:
        tools: A `ToolSet`, a list of tools or names, or a mapping of name to tool.
        guard: Merged guard constraints.
        user_roles: The run's user roles; ``None`` does not filter by role.
    """
    policy = ToolPolicyChecker.from_guard_constraints(guard or GuardConstraints())
    roles = None if user_roles is None else frozenset(user_roles)
    return [_name(t) for t in _iter_tools(tools) if not policy.hides(t, user_roles=roles)]


def is_denied(tool: Any, guard: GuardConstraints | None) -> bool:
    """Whether ``tool`` (a tool or a name) is hidden from the model by policy alone."""
    return ToolPolicyChecker.from_guard_constraints(guard or GuardConstraints()).hides(tool)
