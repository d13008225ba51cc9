"""The guard's checkers: what a checker is, how a chain is built, and the built-in ones.

A checker receives the `GuardContext` of one call and the decision of the checkers before it,
and returns the new decision: ``previous`` when it has nothing to add. `GuardEnforcer` runs
the chain in order: DENY ends it, CONFIRM goes on (a later checker may still deny; the
``confirm`` checker asks a person), and PENDING suspends the run once the batch is checked.

`build_chain` builds the chain that ``guard.checkers`` names through `jianmu.plugins`; by
default ``policy`` (`ToolPolicyChecker`, in `jianmu.guard.policy`) → ``rate_limit``
(`RateLimitChecker`) → ``budget`` (`BudgetChecker`) → ``confirm`` (`ConfirmChecker`), which
turns a CONFIRM into PENDING, ALLOW or DENY.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, Self, runtime_checkable

from jianmu import plugins
from jianmu.constraints import DEFAULT_CHECKERS, GuardConstraints
from jianmu.errors import ConfigError
from jianmu.guard.decision import (
    RATE_WINDOW_SECONDS,
    Decision,
    DecisionKind,
    GuardContext,
    PolicyTarget,
)
from jianmu.runtime.interaction import ApprovalRequest, Interaction
from jianmu.tools.calls import ToolCall, builtin_aliases, is_tool_name, name_key, shown_name

__all__ = (
    "RATE_WINDOW_SECONDS",
    "BaseChecker",
    "BudgetChecker",
    "CheckerSetup",
    "ConfirmChecker",
    "GuardChecker",
    "RateLimitChecker",
    "build_chain",
    "call_fingerprint",
    "tool_permission",
)


@runtime_checkable
class GuardChecker(Protocol):
    """One link of the guard chain."""

    name: str
    """Shown as `Decision.checker`."""

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Return the decision after this checker: ``previous`` when it has nothing to add."""
        ...


@dataclass(frozen=True, kw_only=True)
class CheckerSetup:
    """What a checker is built from for a run; its class's ``from_setup`` receives it."""

    guard: GuardConstraints
    """The run's merged guard constraints."""
    clock: Callable[[], float] | None = None
    """The time source of rate limits; `time.time` when ``None``."""
    workspace: str | os.PathLike[str] | None = None
    """The workspace root that path arguments resolve against, if the caller knows it."""


class BaseChecker:
    """A base for checkers: ``name`` defaults to the class name and `from_setup` builds one
    with no arguments. Subclasses implement `check`; one that reads the guard's settings
    overrides `from_setup`.
    """

    name: str = "BaseChecker"
    """Shown as `Decision.checker`; the class name unless a subclass sets it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__

    @classmethod
    def from_setup(cls, setup: CheckerSetup) -> Self:
        """Build the checker for a run (`build_chain` calls it); by default ``cls()``."""
        return cls()

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Return the decision after this checker: ``previous`` when it has nothing to add."""
        raise NotImplementedError(f"{type(self).__name__} must implement check()")


def build_chain(
    guard: GuardConstraints,
    *,
    clock: Callable[[], float] | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> tuple[GuardChecker, ...]:
    """The checkers that ``guard.checkers`` names (default `DEFAULT_CHECKERS`), in order.

    Each name is resolved through `jianmu.plugins` and built by its class's
    ``from_setup(CheckerSetup(guard=..., clock=..., workspace=...))``.

    Raises:
        ConfigError: a name is not registered, its class cannot be imported, or it does not
            build a `GuardChecker`; a checker refuses its settings.
    """
    setup = CheckerSetup(guard=guard, clock=clock, workspace=workspace)
    chain: list[GuardChecker] = []
    for name in guard.checkers if guard.checkers is not None else DEFAULT_CHECKERS:
        checker = plugins.resolve("checker", name).from_setup(setup)
        if type(checker) not in _CHECKER_CLASSES and not _is_checker(checker):
            raise ConfigError(
                f"guard.checkers: {name!r} built {checker!r}, which is not a guard checker: "
                "it needs a 'name' and a check(context, previous) method"
            )
        chain.append(checker)
    return tuple(chain)


_CHECKER_CLASSES: set[type] = set()
"""Classes whose instances passed the `GuardChecker` check: every run builds its chain, and
typing's protocol check walks the class each time."""


def _is_checker(checker: object) -> bool:
    if not isinstance(checker, GuardChecker):
        return False
    _CHECKER_CLASSES.add(type(checker))
    return True


def tool_permission(tool: PolicyTarget | None) -> str:
    """The tool's ``permission`` as a lower-case string (enum values too); ``auto`` if unset."""
    value: object = tool.permission if tool is not None else None
    value = getattr(value, "value", value)  # an enum's value
    return str(value).lower() if value else "auto"


def _alias_groups() -> dict[str, frozenset[str]]:
    """Each built-in name and alias -> every name of that tool (``file_read``, ``read_file``)."""
    groups: dict[str, set[str]] = {}
    for alias, target in builtin_aliases().items():
        groups.setdefault(target, {target}).add(alias)
    return {name: frozenset(group) for group in groups.values() for name in group}


def _check_rule_name(where: str, key: str, name: str) -> None:
    """Refuse a rule for a name no tool can have: it would match nothing, silently."""
    if not is_tool_name(name):
        raise ConfigError(
            f"{where}[{key!r}] names tool {shown_name(name)!r}, which is not a tool name: tool "
            "names are ASCII letters, digits, '_' and '-' (at most 64); write the tool's name "
            "as it is registered"
        )


# -- the built-in checkers ---------------------------------------------------------------------


def call_fingerprint(call: ToolCall) -> str:
    """A hash of the call's tool and arguments: an approval only holds for what was shown."""
    body = json.dumps(
        {"tool": call.name, "arguments": call.arguments},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(body.encode()).hexdigest()


class RateLimitChecker(BaseChecker):
    """``max_tool_calls`` per run and ``rate_limits`` (calls per minute per tool).

    Both count the calls made before this batch plus the calls admitted earlier in the same
    batch, so a parallel batch cannot overshoot: with 3 calls left and a batch of 5, exactly
    the first 3 pass.
    """

    name = "RateLimitChecker"

    def __init__(
        self,
        max_tool_calls: int | None = None,
        rate_limits: Mapping[str, int] | None = None,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """Set the limits; ``clock`` (default `time.time`) gives the time of a check.

        Wall-clock time (not monotonic) because the call times are saved with a run and read
        back by another process after a restore.

        Raises:
            ConfigError: a limit is negative or not an integer.
        """
        if max_tool_calls is not None and (
            not isinstance(max_tool_calls, int) or max_tool_calls < 0
        ):
            raise ConfigError(f"guard.max_tool_calls is {max_tool_calls!r}; use an integer >= 0")
        for key, limit in (rate_limits or {}).items():
            if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
                raise ConfigError(
                    f"guard.rate_limits[{key!r}] is {limit!r}; use calls per minute, "
                    "an integer >= 0"
                )
            _check_rule_name("guard.rate_limits", key, key.strip())
        self.max_tool_calls = max_tool_calls
        groups = _alias_groups() if rate_limits else {}
        self.rate_limits: dict[str, int] = {}
        self._names: dict[str, frozenset[str]] = {}
        for key, limit in (rate_limits or {}).items():
            name = key.strip().lower()
            # a limit written for a built-in's alias holds under each of its names, and the
            # calls under all of them count together
            group = groups.get(name, frozenset({name}))
            for each in group:
                known = self.rate_limits.get(each)
                self.rate_limits[each] = limit if known is None else min(known, limit)
                self._names[each] = self._names.get(each, frozenset()) | group
        self.clock: Callable[[], float] = clock or time.time

    @classmethod
    def from_setup(cls, setup: CheckerSetup) -> Self:
        """``guard.max_tool_calls`` and ``guard.rate_limits``, timed by the setup's clock."""
        guard = setup.guard
        return cls(guard.max_tool_calls, guard.rate_limits, clock=setup.clock)

    def limit_for(self, name: str) -> int | None:
        """The per-minute limit of the tool ``name``, or ``None``."""
        key = name_key(name)
        return None if key is None else self.rate_limits.get(key)

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Deny past a limit; otherwise pass ``previous`` on."""
        if self.max_tool_calls is None and not self.rate_limits:
            return previous  # no limits: nothing to count
        if self.max_tool_calls is not None:
            earlier = len(context.admitted)
            if context.calls_made + earlier >= self.max_tool_calls:
                return Decision.deny(
                    f"max_tool_calls={self.max_tool_calls} reached: {context.calls_made} "
                    f"call(s) made in this run and {earlier} admitted earlier in this batch",
                    checker=self.name,
                )
        name = name_key(context.call.name)
        limit = None if name is None else self.rate_limits.get(name)
        if name is not None and limit is not None:
            now = self.clock()
            names = self._names.get(name, frozenset({name}))
            recent = sum(
                1
                for key, times in context.call_times.items()
                if name_key(key) in names
                for t in times
                if now - t < RATE_WINDOW_SECONDS
            )
            recent += sum(1 for c in context.admitted if name_key(c.name) in names)
            if recent >= limit:
                return Decision.deny(
                    f"rate limit of tool {context.call.name!r} is {limit} call(s) per minute "
                    f"and {recent} ran or are admitted in the last minute; try again later",
                    checker=self.name,
                )
        return previous


class BudgetChecker(BaseChecker):
    """``budget.total_tokens`` against the tokens the run has spent."""

    name = "BudgetChecker"

    def __init__(self, total_tokens: int | None = None) -> None:
        """Set the budget; ``None`` means unlimited.

        Raises:
            ConfigError: the budget is negative or not an integer.
        """
        if total_tokens is not None and (not isinstance(total_tokens, int) or total_tokens < 0):
            raise ConfigError(f"guard.budget.total_tokens is {total_tokens!r}; use an integer >= 0")
        self.total_tokens = total_tokens

    @classmethod
    def from_setup(cls, setup: CheckerSetup) -> Self:
        """``guard.budget.total_tokens``."""
        return cls(setup.guard.budget.total_tokens)

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Deny once the budget is spent; otherwise pass ``previous`` on."""
        if self.total_tokens is not None and context.tokens_used >= self.total_tokens:
            return Decision.deny(
                f"token budget exhausted: {context.tokens_used} of {self.total_tokens} tokens "
                "used (guard.budget.total_tokens)",
                checker=self.name,
            )
        return previous


class ConfirmChecker(BaseChecker):
    """Resolve a CONFIRM: ask a person (PENDING), or apply the answer they recorded.

    - no interaction channel → DENY;
    - the guard has not asked about this call id → PENDING (the executor asks, with
      `ConfirmChecker.request_for`);
    - asked, undecided → PENDING; approved → ALLOW; rejected → DENY with the person's message.

    Only requests the guard asked itself count, and only for the same tool and arguments:
    an answer for any other id, a request of another kind or other arguments under the same id
    never allows anything.
    """

    name = "ConfirmChecker"

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Turn a CONFIRM into PENDING, ALLOW or DENY; pass other decisions on."""
        if previous.kind is not DecisionKind.CONFIRM:
            return previous
        call, rule = context.call, previous.rule
        interaction: Interaction | None = getattr(context.run, "interaction", None)
        if interaction is None:
            return Decision.deny(
                f"this call needs a person's confirmation ({previous.reason}) and the run has "
                "no interaction channel to ask",
                checker=self.name,
                rule=rule,
            )
        request = _asked_request(interaction, call.id)
        if request is None:
            return Decision.pending(previous.reason, checker=self.name, rule=rule)
        payload = request.payload or {}
        if request.kind != "tool_call" or payload.get("asked_by") != "guard":
            return Decision.deny(
                f"call id {call.id!r} is already used by another approval request; "
                "refusing to treat its answer as a confirmation",
                checker=self.name,
                rule=rule,
            )
        if payload.get("fingerprint") != call_fingerprint(call):
            return Decision.deny(
                f"call id {call.id!r} was asked about another tool or other arguments; "
                "that answer does not confirm this call",
                checker=self.name,
                rule=rule,
            )
        answer = interaction.decision(call.id)
        if answer is None:
            return Decision.pending(previous.reason, checker=self.name, rule=rule)
        if answer.approved:
            note = f": {answer.message}" if answer.message else ""
            return Decision.allow(f"approved by a person{note}", checker=self.name, rule=rule)
        note = f": {answer.message}" if answer.message else " (no reason given)"
        return Decision.deny(f"rejected by a person{note}", checker=self.name, rule=rule)

    @staticmethod
    def request_for(
        call: ToolCall, decision: Decision, *, node: str | None = None
    ) -> ApprovalRequest:
        """The approval request for a PENDING call; its id is the call's id."""
        args = call.arguments_json()
        shown = args if len(args) <= 200 else args[:200] + "…"
        return ApprovalRequest(
            id=call.id,
            kind="tool_call",
            summary=f"{call.name}({shown})",
            payload={
                "tool": call.name,
                "arguments": call.arguments,
                "reason": decision.reason,
                "rule": decision.rule,
                "fingerprint": call_fingerprint(call),
                "asked_by": "guard",
            },
            node=node,
        )


def _asked_request(interaction: Interaction, request_id: str) -> ApprovalRequest | None:
    """The request asked under ``request_id``, if the run ever asked one."""
    return interaction.request(request_id)
