"""The four checkers of the guard chain, in the order `GuardEnforcer` runs them.

`ToolPolicyChecker` → `RateLimitChecker` → `BudgetChecker` → `ConfirmChecker`. Each receives the
`GuardContext` and the decision so far and returns the new decision; DENY ends the chain, and a
CONFIRM goes on so that a later checker may still deny. `ConfirmChecker` turns the CONFIRM into
PENDING, ALLOW or DENY.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from jianmu.constraints import POLICY_RANK, GuardConstraints, Policy, stricter_policy
from jianmu.errors import ConfigError
from jianmu.guard._rules import Rule, parse_rule
from jianmu.guard.decision import Decision, DecisionKind, GuardContext
from jianmu.guard.ledger import RATE_WINDOW_SECONDS
from jianmu.runtime.interaction import ApprovalRequest, Interaction
from jianmu.tools.calls import ToolCall
from jianmu.tools.names import builtin_aliases, is_tool_name, name_key, shown_name

__all__ = (
    "RATE_WINDOW_SECONDS",
    "BudgetChecker",
    "ConfirmChecker",
    "GuardChecker",
    "RateLimitChecker",
    "ToolPolicyChecker",
    "call_fingerprint",
    "tool_permission",
)

"""The window of ``rate_limits`` (calls per minute)."""


@runtime_checkable
class GuardChecker(Protocol):
    """One link of the guard chain."""

    name: str
    """Shown as `Decision.checker`."""

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Return the decision after this checker: ``previous`` when it has nothing to add."""
        ...


def tool_permission(tool: Any) -> str:
    """The tool's ``permission`` as a lower-case string (enum values too); ``auto`` if unset."""
    value = getattr(tool, "permission", None)
    value = getattr(value, "value", value)
    return str(value).lower() if value else "auto"


def _alias_groups() -> dict[str, frozenset[str]]:
    """Each built-in name and alias -> every name of that tool (``file_read``, ``read_file``)."""
    groups: dict[str, set[str]] = {}
    for alias, target in builtin_aliases().items():
        groups.setdefault(target, {target}).add(alias)
    return {name: frozenset(group) for group in groups.values() for name in group}


def _workspace_root(
    context: GuardContext | None = None, workspace: str | os.PathLike[str] | None = None
) -> str:
    """The folder relative paths resolve against: ``workspace``, else the run's
    ``execution.workdir``, else `current_workspace()` — as the file tools see it."""
    root: Any = workspace
    if root is None and context is not None:
        constraints = getattr(context.run, "constraints", None)
        execution = getattr(constraints, "execution", None)
        root = getattr(execution, "workdir", None)
    from jianmu.execution.workspace import effective_root  # keeps the guard import light

    return os.fspath(effective_root(root))


def call_fingerprint(call: ToolCall) -> str:
    """A hash of the call's tool and arguments: an approval only holds for what was shown."""
    body = json.dumps(
        {"tool": call.name, "arguments": call.arguments},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(body.encode()).hexdigest()


class ToolPolicyChecker:
    """Allow, deny or confirm by ``tool_policy`` rules, the tool's permission and the default.

    Resolution for a call of tool ``t``:

    1. no such tool → DENY; ``admin_only`` and no ``admin`` in the run's ``user_roles`` → DENY;
    2. the rules for ``t`` that match the call — a deny or confirm rule when any part of a
       shell command matches, allow rules only when every part is matched by one of them (see
       `Rule`) — the strictest wins, deny > confirm > allow, whatever their order;
    3. no rule matches: the tool's permission is its default — ``user_confirm`` is confirm
       (deny if ``default_policy`` is deny), ``auto`` and ``admin_only`` take ``default_policy``,
       and an unset ``default_policy`` allows;
    4. fail closed: when steps 2–3 allow a call whose shell command an argument rule of ``t``
       looks at, and the command cannot be fully seen through (``$R x``, ``eval``, ``| sh``,
       ``xargs``, ``./script``, a parse error... see `jianmu.guard._rules`), it is confirm
       instead — deny where nobody can answer. With no argument rule for ``t`` (plain
       ``bash: allow``) nothing needs seeing through and the allow stands.

    A rule naming a built-in by an alias covers the tool under every name
    (``file_read: deny`` denies ``read_file``). Path arguments are resolved against the
    workspace root — the checker's ``workspace``, else the run's ``execution.workdir``, else
    `current_workspace()` — so a rule sees the file the tool will really touch.
    """

    name = "ToolPolicyChecker"

    def __init__(
        self,
        tool_policy: Mapping[str, Policy] | None = None,
        default_policy: Policy | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
    ) -> None:
        """Parse the rules.

        Args:
            tool_policy: Rule key -> policy.
            default_policy: The policy when no rule matches.
            workspace: The workspace root path rules resolve against; default the run's
                ``execution.workdir``, else `current_workspace()` at check time.

        Raises:
            ConfigError: a rule key cannot be parsed or a policy is not allow/confirm/deny.
        """
        self.default_policy = _check_policy("guard.default_policy", default_policy)
        self.workspace = workspace
        groups = _alias_groups() if tool_policy else {}
        rules: list[tuple[Rule, Policy]] = []
        for key, policy in (tool_policy or {}).items():
            checked = _check_policy(f"guard.tool_policy[{key!r}]", policy)
            assert checked is not None
            try:
                rule = parse_rule(key)
            except ConfigError as exc:
                raise ConfigError(f"guard.tool_policy: {exc}") from None
            _check_rule_name("guard.tool_policy", key, key.split("(", 1)[0].strip())
            names = groups.get(rule.tool, frozenset()) - {rule.tool}
            rules.append((dataclasses.replace(rule, aliases=names), checked))
        self.rules: tuple[tuple[Rule, Policy], ...] = tuple(rules)

    @classmethod
    def from_guard_constraints(
        cls, guard: GuardConstraints, *, workspace: str | os.PathLike[str] | None = None
    ) -> ToolPolicyChecker:
        """Build from merged guard constraints (``workspace``: see `__init__`)."""
        return cls(guard.tool_policy, guard.default_policy, workspace=workspace)

    def resolve(
        self, call: ToolCall, tool: Any, *, root: str | None = None
    ) -> tuple[Policy, str, Rule | None]:
        """The policy for ``call`` from rules, permission and default: (policy, reason, rule).

        ``root`` is the workspace root path arguments resolve against (default: the checker's
        ``workspace``, else `current_workspace()`).
        """
        if root is None:
            root = _workspace_root(None, self.workspace)
        for wanted in ("deny", "confirm"):
            for rule, policy in self.rules:
                if policy == wanted and rule.matches_any_part(call, tool, root=root):
                    verb = "denies" if policy == "deny" else "asks to confirm"
                    return policy, f"tool_policy rule {rule.text!r} {verb} this call", rule
        resolved = self._allow_or_default(call, tool, root)
        if resolved[0] == "allow":
            opaque = self._opacity(call, tool)
            if opaque is not None:
                return "confirm", *opaque
        return resolved

    def _opacity(self, call: ToolCall, tool: Any) -> tuple[str, Rule] | None:
        """Why a shell command that argument rules look at cannot be auto-allowed, if so.

        Only argument rules need to see inside a command: with none for the tool (a plain
        ``bash: allow``), the operator allowed every command and nothing is left to see.
        """
        for rule, _policy in self.rules:
            why = rule.opacity(call, tool)
            if why is not None:
                return (
                    f"the guard cannot see through this command ({why}), so tool_policy rule "
                    f"{rule.text!r} cannot be checked; a person must confirm it",
                    rule,
                )
        return None

    def _allow_or_default(
        self, call: ToolCall, tool: Any, root: str
    ) -> tuple[Policy, str, Rule | None]:
        """The policy from allow rules, else from the tool's permission and the default."""
        allowing = self._allowing_rules(call, tool, root)
        if allowing:
            texts = " and ".join(repr(r.text) for r in allowing)
            verb = "allows" if len(allowing) == 1 else "allow"
            return "allow", f"tool_policy rule {texts} {verb} this call", allowing[0]
        permission = tool_permission(tool)
        default = self.default_policy
        if permission == "user_confirm" or permission not in ("auto", "admin_only"):
            policy = stricter_policy("confirm", default) or "confirm"
            if policy == "deny":
                return policy, "default_policy is 'deny' and no rule allows this tool", None
            return policy, f"tool {call.name!r} has permission {permission!r}", None
        if default is None:
            return "allow", f"no rule names tool {call.name!r}; allowed by default", None
        return default, f"default_policy is {default!r} and no rule names tool {call.name!r}", None

    def _allowing_rules(self, call: ToolCall, tool: Any, root: str) -> list[Rule]:
        """Allow rules that together cover every part of the call; empty if none do.

        A name rule covers everything; argument rules looking at the same argument pool
        their parts, so each command of ``git status | head`` may be allowed by its own rule.
        """
        pools: dict[tuple[str | None, str], tuple[list[str], set[int], list[Rule]]] = {}
        for rule, policy in self.rules:
            if policy != "allow" or not rule.applies_to(call.name):
                continue
            if rule.is_name_rule:
                return [rule]
            found = rule.value_of(call, tool)
            if found is None:
                continue
            parts, covered, rules = pools.setdefault(
                found, (rule.split(*found, tool, root), set(), [])
            )
            hit = {i for i, part in enumerate(parts) if rule.match_text(part)}
            if hit:
                covered.update(hit)
                rules.append(rule)
        for parts, covered, rules in pools.values():
            if len(covered) == len(parts):
                return rules
        return []

    def hides(self, tool: Any, *, user_roles: frozenset[str] | None = None) -> bool:
        """Whether the model should not even see ``tool`` (a tool or a tool name).

        True when a name rule denies it, or when no rule names it except to deny and its
        default (permission and ``default_policy``) is deny; and, when ``user_roles`` is given,
        for an admin_only tool without the ``admin`` role.
        """
        name = (tool if isinstance(tool, str) else str(getattr(tool, "name", ""))).lower()
        obj = None if isinstance(tool, str) else tool
        if user_roles is not None and tool_permission(obj) == "admin_only":
            if "admin" not in {str(r).lower() for r in user_roles}:
                return True
        own = [(rule, policy) for rule, policy in self.rules if rule.applies_to(name)]
        if any(rule.is_name_rule and policy == "deny" for rule, policy in own):
            return True
        if any(policy != "deny" for _rule, policy in own):
            return False
        permission = tool_permission(obj)
        base: Policy = "confirm" if permission not in ("auto", "admin_only") else "allow"
        return stricter_policy(base, self.default_policy) == "deny"

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Decide by policy; the decision so far is replaced."""
        call, tool = context.call, context.tool
        if tool is None or not is_tool_name(call.name):
            return Decision.deny(
                f"no tool named {shown_name(call.name)!r} is registered", checker=self.name
            )
        if not _names_tool(call.name, tool):
            # rules match by the call's name: it must be the tool's own (the executor makes it so)
            return Decision.deny(
                f"call name {call.name!r} is not the name of the tool it runs "
                f"({getattr(tool, 'name', tool)!r})",
                checker=self.name,
            )
        if tool_permission(tool) == "admin_only" and "admin" not in context.user_roles:
            roles = ", ".join(sorted(context.user_roles)) or "none"
            return Decision.deny(
                f"tool {call.name!r} is admin_only and the run's user does not hold the "
                f"'admin' role (user_roles: {roles})",
                checker=self.name,
            )
        # only argument rules look at paths: skip finding the workspace when there are none
        needs_root = any(not rule.is_name_rule for rule, _policy in self.rules)
        root = _workspace_root(context, self.workspace) if needs_root else None
        policy, reason, rule = self.resolve(call, tool, root=root)
        text = rule.text if rule is not None else None
        if policy == "deny":
            return Decision.deny(reason, checker=self.name, rule=text)
        if policy == "confirm":
            return Decision.confirm(reason, checker=self.name, rule=text)
        return Decision.allow(reason, checker=self.name, rule=text)


def _check_rule_name(where: str, key: str, name: str) -> None:
    """Refuse a rule for a name no tool can have: it would match nothing, silently."""
    if not is_tool_name(name):
        raise ConfigError(
            f"{where}[{key!r}] names tool {shown_name(name)!r}, which is not a tool name: tool "
            "names are ASCII letters, digits, '_' and '-' (at most 64); write the tool's name "
            "as it is registered"
        )


def _names_tool(name: str, tool: Any) -> bool:
    """Whether ``name`` is ``tool``'s own name (ASCII case-insensitive) or one of its aliases."""
    own = getattr(tool, "name", None)
    if not isinstance(own, str):
        return True  # a bare tool-like object: nothing to compare
    key, own_key = name_key(name), name_key(own)
    return key == own_key or (key is not None and builtin_aliases().get(key) == own_key)


def _check_policy(where: str, policy: Any) -> Policy | None:
    if policy is None or policy in POLICY_RANK:
        return policy  # type: ignore[no-any-return]
    raise ConfigError(f"{where} is {policy!r}; use 'allow', 'confirm' or 'deny'")


class RateLimitChecker:
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

    def limit_for(self, name: str) -> int | None:
        """The per-minute limit of the tool ``name``, or ``None``."""
        key = name_key(name)
        return None if key is None else self.rate_limits.get(key)

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Deny past a limit; otherwise pass ``previous`` on."""
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


class BudgetChecker:
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

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Deny once the budget is spent; otherwise pass ``previous`` on."""
        if self.total_tokens is not None and context.tokens_used >= self.total_tokens:
            return Decision.deny(
                f"token budget exhausted: {context.tokens_used} of {self.total_tokens} tokens "
                "used (guard.budget.total_tokens)",
                checker=self.name,
            )
        return previous


class ConfirmChecker:
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
