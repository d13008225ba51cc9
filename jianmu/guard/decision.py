"""`Decision`, the guard's verdict on one tool call; `GuardContext`, what it is based on; and
`GuardLedger`, what a run has used that the guard counts, kept in the run's state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jianmu.telemetry import JIANMU_GUARD_DECISION
from jianmu.tools.calls import ToolCall

if TYPE_CHECKING:
    from jianmu.runtime.context import RunContext

__all__ = (
    "RATE_WINDOW_SECONDS",
    "Decision",
    "DecisionKind",
    "GuardContext",
    "GuardLedger",
    "PolicyTarget",
)


class PolicyTarget(Protocol):
    """What the guard reads of a tool: its name, who may allow it, its effects, its schema."""

    @property
    def name(self) -> str:
        """The registered name that rules match."""

    @property
    def permission(self) -> str:
        """``auto``, ``user_confirm`` or ``admin_only``."""

    @property
    def category(self) -> str:
        """``read``, ``write``, ``execute``, ``communicate`` or ``dangerous``."""

    @property
    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments (argument rules find the main argument in it)."""

    @property
    def parameters(self) -> dict[str, Any]:
        """The arguments as an object schema (a non-object input wrapped as ``input``)."""


class DecisionKind(StrEnum):
    """What the guard says about a call."""

    ALLOW = "allow"
    """Run it."""
    DENY = "deny"
    """Refuse it; the model gets a rejection observation with the reason."""
    CONFIRM = "confirm"
    """A person must confirm it; only seen between checkers (`ConfirmChecker` resolves it)."""
    PENDING = "pending"
    """A person was (or is about to be) asked; the run suspends until they decide."""


@dataclass(frozen=True, kw_only=True)
class Decision:
    """The guard's verdict on one tool call, with the reason and the checker that gave it."""

    kind: DecisionKind
    """ALLOW, DENY, CONFIRM or PENDING."""
    reason: str = ""
    """Why, in words a model or a person can act on."""
    checker: str = ""
    """Name of the checker that decided (``ToolPolicyChecker``...)."""
    rule: str | None = None
    """The ``tool_policy`` key that matched, if a rule decided."""

    @classmethod
    def allow(cls, reason: str = "", *, checker: str = "", rule: str | None = None) -> Decision:
        """An ALLOW decision."""
        return cls(kind=DecisionKind.ALLOW, reason=reason, checker=checker, rule=rule)

    @classmethod
    def deny(cls, reason: str, *, checker: str = "", rule: str | None = None) -> Decision:
        """A DENY decision."""
        return cls(kind=DecisionKind.DENY, reason=reason, checker=checker, rule=rule)

    @classmethod
    def confirm(cls, reason: str, *, checker: str = "", rule: str | None = None) -> Decision:
        """A CONFIRM decision: a person must confirm the call."""
        return cls(kind=DecisionKind.CONFIRM, reason=reason, checker=checker, rule=rule)

    @classmethod
    def pending(cls, reason: str, *, checker: str = "", rule: str | None = None) -> Decision:
        """A PENDING decision: the run waits for a person."""
        return cls(kind=DecisionKind.PENDING, reason=reason, checker=checker, rule=rule)

    @property
    def allowed(self) -> bool:
        """Whether the call may run now."""
        return self.kind is DecisionKind.ALLOW

    @property
    def denied(self) -> bool:
        """Whether the call is refused."""
        return self.kind is DecisionKind.DENY

    @property
    def awaiting_approval(self) -> bool:
        """Whether the call waits for a person (PENDING)."""
        return self.kind is DecisionKind.PENDING

    def span_attributes(self) -> dict[str, str]:
        """OpenTelemetry attributes for the tool's span (no ``None`` values)."""
        attrs = {
            JIANMU_GUARD_DECISION: self.kind.value,
            "jianmu.guard.checker": self.checker,
            "jianmu.guard.reason": self.reason,
        }
        if self.rule is not None:
            attrs["jianmu.guard.rule"] = self.rule
        return attrs

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (for events and the state)."""
        return {
            "kind": self.kind.value,
            "reason": self.reason,
            "checker": self.checker,
            "rule": self.rule,
        }


@dataclass(frozen=True, kw_only=True)
class GuardContext:
    """Everything the checkers look at for one call; `GuardEnforcer.preflight` builds it.

    Counts come from the caller (the executor keeps them in the run's state), never from
    hidden state in the guard, so a run restored in a new process counts right.
    """

    call: ToolCall
    """The call being checked."""
    tool: PolicyTarget | None = None
    """The tool it names; ``None`` when no tool has that name."""
    batch: Sequence[ToolCall] = ()
    """Every call of this preflight, in order."""
    admitted: Sequence[ToolCall] = ()
    """Calls earlier in this batch that were not denied (they may run): they count against
    ``max_tool_calls`` and the per-minute limits before this one."""
    run: RunContext | None = None
    """The run's context: ``user_roles``, ``interaction``, ``events``."""
    tokens_used: int = 0
    """Tokens the run has spent so far (the LLM node's ``usage``)."""
    calls_made: int = 0
    """Tool calls the run executed before this batch."""
    call_times: Mapping[str, Sequence[float]] = field(default_factory=dict)
    """Clock times of the calls executed so far, per lower-cased tool name (rate limits)."""

    @property
    def user_roles(self) -> frozenset[str]:
        """The run's user roles, lower-cased; empty without a run context."""
        roles = getattr(self.run, "user_roles", None) or ()
        return frozenset(str(r).lower() for r in roles)


RATE_WINDOW_SECONDS = 60.0
"""The window of the per-minute rate limits."""


class GuardLedger(BaseModel):
    """Tool calls a run made, and their clock times per tool for the per-minute limits.

    Immutable: `after` returns the next ledger, which the node writes back to the state in the
    same update as the call's observation, so a restored run counts exactly what ran.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    calls_made: int = 0
    """Tool calls executed in the run."""
    call_times: dict[str, tuple[float, ...]] = Field(default_factory=dict)
    """Clock times of the calls of the last minute, per canonical tool name (lower case)."""

    @classmethod
    def of(cls, value: Any) -> GuardLedger:
        """The ledger stored in a state: a `GuardLedger`, its JSON dict, or nothing yet."""
        if isinstance(value, GuardLedger):
            return value
        return cls.model_validate(value or {})

    def after(self, names: Iterable[str], at: float, *, timed: bool = True) -> GuardLedger:
        """This ledger plus calls of ``names`` made at ``at``; times older than a minute go.

        ``timed=False`` counts the calls without keeping their times (no rate limit applies).
        """
        names = list(names)
        if not timed and not self.call_times:  # nothing to keep or prune: just count
            return GuardLedger.model_construct(
                calls_made=self.calls_made + len(names), call_times={}
            )
        times = {k: list(v) for k, v in self.call_times.items()}
        if timed:
            for name in names:
                times.setdefault(name.lower(), []).append(at)
        kept = {
            k: tuple(t for t in v if at - t < RATE_WINDOW_SECONDS) for k, v in times.items()
        }
        # built from this ledger's own valid data: no need to validate it again
        return GuardLedger.model_construct(
            calls_made=self.calls_made + len(names),
            call_times={k: v for k, v in kept.items() if v},
        )
