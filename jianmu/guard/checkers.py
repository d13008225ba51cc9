"""What the guard decides and how a checker decides it: `Decision`, the verdict on one tool
call; `GuardContext`, what it is based on; `GuardLedger`, what a run has used that the guard
counts (kept in the run's state); what a checker is; and the counting checkers.

A checker receives the `GuardContext` of one call and the decision of the checkers before it,
and returns the new decision: ``previous`` when it has nothing to add. `GuardEnforcer`
(`jianmu.guard.enforcer`) builds the chain ``guard.checkers`` names and runs it in order: DENY
ends it, CONFIRM goes on (a later checker may still deny; the ``confirm`` checker asks a
person), and PENDING suspends the run once the batch is checked. By default ``policy``
(`ToolPolicyChecker`, in `jianmu.guard.enforcer`) → ``rate_limit`` (`RateLimitChecker`) →
``budget`` (`BudgetChecker`) → ``confirm`` (`ConfirmChecker`), which turns a CONFIRM into
PENDING, ALLOW or DENY.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from jianmu.constraints import GuardConstraints
from jianmu.errors import ConfigError
from jianmu.runtime.context import ApprovalRequest, Interaction
from jianmu.runtime.events import JIANMU_GUARD_DECISION
from jianmu.runtime.scopes import unmarked
from jianmu.tools.calls import (
    ToolCall,
    ToolResult,
    builtin_aliases,
    is_tool_name,
    name_key,
    shown_name,
)

if TYPE_CHECKING:
    from jianmu.runtime.context import RunContext

__all__ = (
    "RATE_WINDOW_SECONDS",
    "BaseChecker",
    "BudgetChecker",
    "CheckerSetup",
    "ConfirmChecker",
    "Decision",
    "DecisionKind",
    "GuardChecker",
    "GuardContext",
    "GuardLedger",
    "PolicyTarget",
    "RateLimitChecker",
    "call_fingerprint",
    "denial",
    "edited_call",
    "screened_rejections",
    "tool_permission",
)


# -- the decision ------------------------------------------------------------------------------


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
    node: str | None = None
    """The path of the node that would run the call (its approval requests name it)."""
    received: ToolCall | None = None
    """The call with its arguments as the tool receives them (validated and coerced, as
    JSON: ``10000.0`` and ``"+10000"`` for an ``int`` are ``10000``), when they are spelt
    otherwise than the model sent them and a rule looks at them; else ``None``."""

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
            # an int and an empty dict: validating them costs less than `model_construct`
            return GuardLedger(calls_made=self.calls_made + len(names), call_times={})
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


# -- what a checker is ------------------------------------------------------------------------


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


_CLAUDE_MCP_NAME = re.compile(r"mcp__([a-z0-9](?:[a-z0-9-]|_(?!_))*)(?:__(.+))?")
"""Claude Code's name of an MCP server's tool, lower-cased: ``mcp__<server>__<tool>``, or of
all of its tools: ``mcp__<server>``."""


_CLAUDE_TOOLS: dict[str, frozenset[str]] = {
    "read": frozenset({"read_file", "read_skill_file"}), "write": frozenset({"write_file"}),
    "edit": frozenset({"str_replace", "write_file"}),
    "multiedit": frozenset({"str_replace", "write_file"}),
    "glob": frozenset({"glob_search"}), "grep": frozenset({"grep_search"}),
    "ls": frozenset({"list_dir"}), "webfetch": frozenset({"http_request"}),
    "websearch": frozenset({"duckduckgo_search"}),
}
"""The built-ins a restriction written with a Claude Code tool's name holds for (its settings'
``Read(./.env)``; a SKILL.md's ``allowed-tools`` maps the same names)."""


def _restricted_names(name: str, groups: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """Every tool a restriction written for ``name`` (lower-cased: a deny or confirm rule, a
    rate limit) holds for: the built-in's names (`_alias_groups`), and for an MCP server's
    tool named as Claude Code names it (``mcp__gh__delete_repo``, a list copied from its
    settings) the name Jianmu gives it (``gh__delete_repo``), and for a whole server
    (``mcp__gh``) each of its tools (``gh__*``, `Rule.applies_to`; a rate limit counts the
    server's calls together): a deny rule so spelt ran the tool. So for a Claude Code tool's name
    (`_CLAUDE_TOOLS`: ``Read`` is ``read_file``)."""
    names = groups.get(name, frozenset({name})) | _CLAUDE_TOOLS.get(name, frozenset())
    claude = [_CLAUDE_MCP_NAME.fullmatch(n) for n in names]
    return names | {f"{m[1]}__{m[2] or '*'}" for m in claude
                    if m is not None and not m[1].endswith("_")}


def _covers(names: Collection[str], name: str | None) -> bool:
    """Whether ``name`` (a tool's, lower-cased) is one of ``names``, or a tool of a server one
    of them names whole (``gh__*``)."""
    return name is not None and (name in names or any(
        n.endswith("__*") and name.startswith(n[:-1]) for n in names))


def _granted_names(name: str) -> frozenset[str]:
    """The tools an allow rule written for ``name`` (lower-cased) grants: that name, and the
    built-in it is an alias of (``file_read: allow`` is ``read_file``'s too). Never a tool of
    the run's own named like one of the built-in's aliases (a custom ``web_search``): a grant
    for the built-in is not one for it, while a rule that restricts covers every name."""
    target = builtin_aliases().get(name)
    return frozenset({name}) if target is None else frozenset({name, target.lower()})


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
    # a lone surrogate is valid JSON (a model's or a person's "\ud800"): strict UTF-8 failed
    # the call's node as it asked; any other text encodes as before, so old fingerprints hold
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


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
            group = _restricted_names(name, groups)
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
        return min((limit for _key, limit in self._limits_of(name)), default=None)

    def _limits_of(self, name: str) -> list[tuple[str, int]]:
        """Each limit that holds for the tool ``name``: its own, and a whole MCP server's
        (``gh__*``, written ``mcp__gh``) for each of the server's tools."""
        key = name_key(name)
        if key is None:
            return []
        return [(each, limit) for each, limit in self.rate_limits.items()
                if _covers((each,), key)]

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
        for each, limit in self._limits_of(context.call.name):
            now = self.clock()
            names = self._names.get(each, frozenset({each}))
            recent = sum(
                1
                for key, times in context.call_times.items()
                if _covers(names, name_key(key))
                for t in times
                if now - t < RATE_WINDOW_SECONDS
            )
            recent += sum(1 for c in context.admitted if _covers(names, name_key(c.name)))
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
        if None not in (request.node, context.node) and request.node != context.node and \
                unmarked(str(request.node)) != unmarked(str(context.node)):
            # ids are qualified by the namespace that owns the call (`jianmu.runtime.scopes`),
            # so two nodes' calls of one id are two requests; should two nodes still share
            # one (one namespace), one person's answer is for the call they were shown only
            # (a request restored from an older version names a sub-agent's node as it spelt
            # the path: `unmarked`)
            return Decision.deny(
                f"call id {call.id!r} was asked about a call of another node "
                f"({request.node}); that answer does not confirm this call",
                checker=self.name,
                rule=rule,
            )
        answer = interaction.decision(call.id)
        expected = payload.get("fingerprint")
        if answer is not None and answer.approved and answer.arguments is not None:
            # a person edited the call: the approval holds for the arguments they gave, and
            # only for the tool they were asked about
            expected = call_fingerprint(ToolCall(
                id=call.id, name=str(payload.get("tool", "")), arguments=answer.arguments
            ))
        if expected != call_fingerprint(call):
            return Decision.deny(
                f"call id {call.id!r} was asked about another tool or other arguments; "
                "that answer does not confirm this call",
                checker=self.name,
                rule=rule,
            )
        if answer is None:
            return Decision.pending(previous.reason, checker=self.name, rule=rule)
        if answer.approved:
            note = f": {answer.message}" if answer.message else ""
            edited = " (with arguments a person edited)" if answer.arguments is not None else ""
            return Decision.allow(f"approved by a person{edited}{note}", checker=self.name,
                                  rule=rule)
        note = f": {answer.message}" if answer.message else " (no reason given)"
        return Decision.deny(f"rejected by a person{note}", checker=self.name, rule=rule)

    @staticmethod
    def request_for(
        call: ToolCall, decision: Decision, *, node: str | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> ApprovalRequest:
        """The approval request for a PENDING call; its id is the call's id (which the run's
        channel, as the call's node sees it, keys under the node's namespace).

        ``parameters`` (the tool's input schema) lets a person's edited arguments be checked
        when they approve, also in another process (`Interaction.approve`).
        """
        args = call.arguments_json()
        shown = args if len(args) <= 200 else args[:200] + "…"
        payload = {
            "tool": call.name,
            "arguments": call.arguments,
            "reason": decision.reason,
            "rule": decision.rule,
            "fingerprint": call_fingerprint(call),
            "asked_by": "guard",
        }
        if parameters is not None:
            payload["parameters"] = parameters
        return ApprovalRequest(
            id=call.id,
            kind="tool_call",
            summary=f"{call.name}({shown})",
            payload=payload,
            node=node,
        )


def edited_call(call: ToolCall, ctx: RunContext) -> ToolCall:
    """``call`` with the arguments a person gave when approving it, if they edited it.

    Only an edit of this very call counts: the request must have been asked about this tool
    and these arguments (its fingerprint), so an edit never carries over to another call that
    reuses the id. The guard (`ConfirmChecker`) then checks the edited call like any other.
    """
    interaction = ctx.interaction
    decision = interaction.decision(call.id) if interaction is not None else None
    if decision is None or decision.arguments is None or not decision.approved:
        return call
    request = interaction.request(call.id) if interaction is not None else None
    if request is None or request.payload.get("fingerprint") != call_fingerprint(call):
        return call
    return dataclasses.replace(call, arguments=dict(decision.arguments))


async def screened_rejections(
    executor: Any, calls: Sequence[ToolCall]
) -> dict[str, tuple[str, str]]:
    """For each of ``calls`` rejected with words the input guardrails refuse, by its id: the
    reason `ConfirmChecker` gives, which quotes them, and the one the model reads instead.

    A person's words on a call they rejected reach the model, as an answer to ``ask_user``
    does: what the user wrote by another way than a message, which the agent's input
    guardrails (``executor``'s, the batch's `ToolExecutor`) read first.
    """
    interaction = executor.run_as_seen.interaction  # its ids, as this node's calls have them
    if interaction is None or not interaction.decided():  # the common case: nothing decided
        return {}
    from jianmu.guard.guardrails import run_guardrails  # only for a batch a person decided

    screened: dict[str, tuple[str, str]] = {}
    guardrails = None
    for call in calls:
        decision = interaction.decision(call.id)
        if decision is None or decision.approved or not decision.message:
            continue
        request = interaction.request(call.id)  # this very call's, not one that reused its id
        if request is None or request.payload.get("fingerprint") != call_fingerprint(call):
            continue
        if guardrails is None:  # looked up once, for a batch that holds such a rejection
            guardrails = executor._input_guardrails()
        if not guardrails:
            return {}
        found = await run_guardrails(
            "input", guardrails, executor.ctx, decision.message, executor.events,
            timeout=executor.effective_constraints.guard.guardrails.timeout_s,
            tool=call.name, call_id=call.id)
        if found is not None:
            name, tripwire = found
            screened[call.id] = (
                f"rejected by a person: {decision.message}",  # as `ConfirmChecker` says it
                f"rejected by a person (their words were withheld: guardrail {name!r} tripped "
                f"({tripwire.reason}))")
    return screened


def denial(
    call: ToolCall, decision: Decision, screened: Mapping[str, tuple[str, str]]
) -> ToolResult:
    """The refusal the model reads for ``call``, which the guard denied: its reason, save a
    person's words the input guardrails refused (`screened_rejections`)."""
    reason = decision.reason
    said = screened.get(call.id)
    if said is not None and decision.checker == ConfirmChecker.name and reason == said[0]:
        reason = said[1]
    return ToolResult(tool=call.name, ok=False, call_id=call.id,
                      error=f"the guard denied this call: {reason}")


def _asked_request(interaction: Interaction, request_id: str) -> ApprovalRequest | None:
    """The request asked under ``request_id``, if the run ever asked one."""
    return interaction.request(request_id)

