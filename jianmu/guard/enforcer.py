"""`GuardEnforcer`: builds the checker chain that ``guard.checkers`` names and runs it over a
batch of tool calls; and the chain's first link, the tool policy: `ToolPolicyChecker`
(``tool_policy`` rules, each tool's permission and ``default_policy``, registered as the
checker ``policy``) and `visible_tools`, the one place that decides by that policy which tools
a model may see.

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

import dataclasses
import logging
import os
import posixpath
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Self

from jianmu import plugins
from jianmu.constraints import (
    DEFAULT_CHECKERS,
    POLICY_RANK,
    Constraints,
    GuardConstraints,
    Policy,
    once_per_read_only,
    stricter_policy,
)
from jianmu.errors import ConfigError
from jianmu.guard._rules import Rule, parse_rule, run_folder
from jianmu.guard.checkers import (
    _CLAUDE_TOOLS,
    BaseChecker,
    BudgetChecker,
    CheckerSetup,
    ConfirmChecker,
    Decision,
    DecisionKind,
    GuardChecker,
    GuardContext,
    GuardLedger,
    PolicyTarget,
    RateLimitChecker,
    _alias_groups,
    _check_rule_name,
    _covers,
    _granted_names,
    _restricted_names,
    tool_permission,
)
from jianmu.runtime.context import ApprovalRequest, RunContext
from jianmu.runtime.events import EventSink
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolCall, builtin_aliases, is_tool_name, name_key, shown_name
from jianmu.tools.registry import ToolLookup, ToolSet, canonical_call, received_call

if TYPE_CHECKING:
    from jianmu.config import AppConfig

__all__ = (
    "BUILTIN_CHECKERS",
    "CHECK_KINDS",
    "GuardEnforcer",
    "ToolPolicyChecker",
    "build_chain",
    "builtin_chain",
    "check_config_rules",
    "first_bad_rule",
    "is_denied",
    "unmatched_rule_names",
    "visible_tools",
    "warn_unmatched_rules",
)


# -- the tool policy ---------------------------------------------------------------------------


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
    from jianmu.execution.runner import effective_root  # keeps the guard import light

    return os.fspath(effective_root(root))


_NAMES_KEPT = 4096
"""Answers remembered per tool name at most: a chain can serve every run of the process, and
names come from the model and from tools made per request."""


class ToolPolicyChecker(BaseChecker):
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

    A rule naming a built-in by an alias covers the tool under every name (``file_read: deny``
    denies ``read_file``), but an allow rule never grants a tool of the run's own named like
    one of the built-in's aliases (a custom ``web_search``). Path arguments are resolved against the
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
            # a grant covers the built-in an alias names, never a tool of the run's own named
            # like one of its aliases; a restriction holds under every name of the built-in
            names = (_granted_names(rule.tool) if checked == "allow" else
                     _restricted_names(rule.tool, groups)) - {rule.tool}
            searches = _CLAUDE_SEARCHES.get(rule.tool, ()) if checked != "allow" else ()
            if rule.is_name_rule:
                names |= frozenset(searches)  # `Read: deny` reads nothing, searching neither
            rule = dataclasses.replace(rule, aliases=names)
            if rule.tool == "webfetch" and rule.key == "domain" and rule.pattern:
                # Claude Code's WebFetch(domain:evil.com): the URLs of that host
                rule = dataclasses.replace(rule, key="url", pattern=f"*://{rule.pattern}/*")
            derived = [rule]
            pattern = (rule.pattern or "") if checked != "allow" else ""
            for search in (*searches, rule.tool) if pattern else ():
                folder = _SEARCHED.get(search)
                # Claude Code's `Read(path)`, or Jianmu's `Read(path:...)` as read_file's
                if folder is not None and (rule.key in (None, "path") if search in searches
                                           else rule.key is None and "/" in pattern):
                    # its main argument is what it looks for: a path names the files it reads
                    # (a `Read(path)` rule holds for the searches, as Claude Code's does)
                    derived.append(dataclasses.replace(rule, tool=search, key=folder,
                                                       aliases=frozenset()))
            for each in derived:
                rules.append((each, checked))
                for tidy in _tidied(each.pattern) if checked != "allow" else ():
                    # a restriction also holds as its paths are read, tidied
                    rules.append((dataclasses.replace(each, pattern=tidy), checked))
        self.rules: tuple[tuple[Rule, Policy], ...] = tuple(rules)
        # only argument rules look at paths: without one, no call needs the workspace root
        self._needs_root = any(not rule.is_name_rule for rule, _policy in self.rules)
        # with name rules alone, a decision depends on the call's name and the tool's
        # permission only: each is worked out once (see `_by_name`)
        self._decided: dict[tuple[str, str], Decision] = {}
        self._decided_for: tuple[object, object] = (self.rules, self.default_policy)
        self._hidden: dict[tuple[str, str, frozenset[str] | None], bool] = {}
        self._hidden_for: tuple[object, object] = (self.rules, self.default_policy)
        self.floors: tuple[ToolPolicyChecker, ...] = ()
        """The checkers of the callers' guards a team member runs under
        (`GuardConstraints.floors`): the strictest of their decisions and this one's holds."""

    @classmethod
    def from_guard_constraints(
        cls, guard: GuardConstraints, *, workspace: str | os.PathLike[str] | None = None
    ) -> Self:
        """Build from merged guard constraints (``workspace``: see `__init__`)."""
        checker = cls(guard.tool_policy, guard.default_policy, workspace=workspace)
        checker.floors = tuple(cls.from_guard_constraints(f, workspace=workspace)
                               for f in guard.floors)
        return checker

    @classmethod
    def from_setup(cls, setup: CheckerSetup) -> Self:
        """The setup's guard constraints, paths resolved in its workspace."""
        return cls.from_guard_constraints(setup.guard, workspace=setup.workspace)

    def resolve(
        self, call: ToolCall, tool: PolicyTarget | None, *, root: str | None = None,
        received: ToolCall | None = None,
    ) -> tuple[Policy, str, Rule | None]:
        """The policy for ``call`` from rules, permission and default: (policy, reason, rule).

        ``root`` is the workspace root path arguments resolve against (default: the checker's
        ``workspace``, else `current_workspace()`). ``received``: the call as the tool
        receives it (`GuardContext.received`); the stricter of the two policies holds.
        """
        if root is None and self._needs_root:
            root = _workspace_root(None, self.workspace)
        policy, reason, rule = self._resolve(call, tool, root)
        if received is not None and policy != "deny":
            # the tool runs with what it received: a rule holds for that spelling too, and
            # the stricter of the two decides (allow needs both)
            other, why, by = self._resolve(received, tool, root)
            if POLICY_RANK[other] > POLICY_RANK[policy]:
                policy, reason, rule = other, f"{why} (its arguments as the tool receives them)", by
        for floor in self.floors if policy != "deny" else ():
            # a team member's own layer never loosens its caller's decision
            other, why, by = floor.resolve(call, tool, root=root, received=received)
            if POLICY_RANK[other] > POLICY_RANK[policy]:
                policy, reason, rule = other, f"{why} (as its caller's guard decides)", by
        return policy, reason, rule

    def _resolve(
        self, call: ToolCall, tool: PolicyTarget | None, root: str | None
    ) -> tuple[Policy, str, Rule | None]:
        """`resolve` for one spelling of the call."""
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

    def _opacity(self, call: ToolCall, tool: PolicyTarget | None) -> tuple[str, Rule] | None:
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
        self, call: ToolCall, tool: PolicyTarget | None, root: str | None
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

    def _allowing_rules(
        self, call: ToolCall, tool: PolicyTarget | None, root: str | None
    ) -> list[Rule]:
        """Allow rules that together cover every part of the call; empty if none do.

        A name rule covers everything; argument rules looking at the same argument pool
        their parts, so each command of ``git status | head`` may be allowed by its own rule.
        """
        pools: dict[tuple[tuple[str | None, str], ...], tuple[list[str], set[int], list[Rule]]] = {}
        for rule, policy in self.rules:
            if policy != "allow" or not rule.applies_to(call.name):
                continue
            if rule.is_name_rule:
                return [rule]
            found = rule.values_of(call, tool)
            if found is None:
                continue
            parts, covered, rules = pools.setdefault(found, (
                [part for value in found for part in rule.split(*value, tool, root,
                                                                 run_folder(call))],
                set(), [],
            ))
            hit = {i for i, part in enumerate(parts) if rule.match_text(part)}
            if hit:
                covered.update(hit)
                rules.append(rule)
        for parts, covered, rules in pools.values():
            if len(covered) == len(parts):
                return rules
        return []

    def hides(
        self, tool: PolicyTarget | str, *, user_roles: frozenset[str] | None = None
    ) -> bool:
        """Whether the model should not even see ``tool`` (a tool or a tool name).

        True when a name rule denies it, or when no rule names it except to deny and its
        default (permission and ``default_policy``) is deny; and, when ``user_roles`` is given,
        for an admin_only tool without the ``admin`` role.
        """
        name = (tool if isinstance(tool, str) else tool.name).lower()
        permission = tool_permission(None if isinstance(tool, str) else tool)
        # the answer depends on these three alone (and the rules): the model's tools are
        # filtered on every turn, so each is worked out once
        roles = user_roles if user_roles is None or isinstance(user_roles, frozenset) else (
            frozenset(user_roles)
        )
        key = (name, permission, roles)
        rules, default = self._hidden_for
        if rules is not self.rules or default != self.default_policy:
            self._hidden, self._hidden_for = {}, (self.rules, self.default_policy)
        found = self._hidden.get(key)
        if found is None:
            found = self._hides(name, permission, roles)
            if len(self._hidden) >= _NAMES_KEPT:  # never grow unbounded
                self._hidden.clear()
            self._hidden[key] = found
        return found

    def _hides(self, name: str, permission: str, user_roles: frozenset[str] | None) -> bool:
        if user_roles is not None and permission == "admin_only":
            if "admin" not in {str(r).lower() for r in user_roles}:
                return True
        own = [(rule, policy) for rule, policy in self.rules if rule.applies_to(name)]
        if any(rule.is_name_rule and policy == "deny" for rule, policy in own):
            return True
        if any(policy != "deny" for _rule, policy in own):
            return False
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
        if not self._needs_root and type(self) is ToolPolicyChecker:  # a subclass may differ
            return self._by_name(call, tool)
        # only argument rules look at paths: find the workspace only when there are some
        return self._decide(call, tool, _workspace_root(context, self.workspace),
                            context.received)

    def reads_arguments(self, name: str) -> bool:
        """Whether an argument rule is about the tool called ``name`` (its decision then
        depends on the call's arguments, not on its name alone)."""
        if not self._needs_root:  # no argument rule at all: most policies
            return False
        return any(
            not rule.is_name_rule and rule.applies_to(name) for rule, _policy in self.rules
        )

    def received(self, call: ToolCall, tool: Any) -> ToolCall | None:
        """``call`` as ``tool`` (the tool itself, which validates) receives it, when a rule
        of this policy reads its arguments and they are spelt otherwise (`received_call`)."""
        return received_call(call, tool) if self.reads_arguments(call.name) else None

    def _decide(
        self, call: ToolCall, tool: PolicyTarget, root: str | None,
        received: ToolCall | None = None,
    ) -> Decision:
        policy, reason, rule = self.resolve(call, tool, root=root, received=received)
        text = rule.text if rule is not None else None
        if policy == "deny":
            return Decision.deny(reason, checker=self.name, rule=text)
        if policy == "confirm":
            return Decision.confirm(reason, checker=self.name, rule=text)
        return Decision.allow(reason, checker=self.name, rule=text)

    def _by_name(self, call: ToolCall, tool: PolicyTarget) -> Decision:
        """`_decide` for a chain of name rules: the same name and permission, the same answer
        (a `Decision` is immutable), kept until the rules or the default change."""
        rules, default = self._decided_for
        if rules is not self.rules or default != self.default_policy:
            self._decided, self._decided_for = {}, (self.rules, self.default_policy)
        key = (call.name, tool_permission(tool))
        found = self._decided.get(key)
        if found is None:
            found = self._decide(call, tool, None)
            if len(self._decided) >= _NAMES_KEPT:  # names come from a model: never grow unbounded
                self._decided.clear()
            self._decided[key] = found
        return found


def _names_tool(name: str, tool: PolicyTarget | None) -> bool:
    """Whether ``name`` is ``tool``'s own name (ASCII case-insensitive) or one of its aliases."""
    own = getattr(tool, "name", None)
    if not isinstance(own, str):
        return True  # a bare tool-like object: nothing to compare
    if name == own:
        return True
    key, own_key = name_key(name), name_key(own)
    return key == own_key or (key is not None and builtin_aliases().get(key) == own_key)


_SEARCHED = {"grep_search": "path", "glob_search": "root"}
"""The folder argument of the searches whose main argument is a pattern: a restricting rule
on a path written ``grep_search(secrets/*)``, as ``read_file(secrets/*)`` is, also holds for
it (it was read against the regular expression, and ``grep_search .`` returned the key)."""
_CLAUDE_SEARCHES = {"read": ("grep_search", "glob_search")}
"""The searches a Claude Code tool's restriction also holds for: Claude Code applies its
``Read(path)`` rules to Grep and Glob, and a search reads the files beneath its folder."""


def _tidied(pattern: str | None) -> list[str]:
    """A restricting rule's pattern as the paths it is matched against are spelt, where that
    differs: normalised (`path_forms` normalises them: ``./secrets/key`` is ``secrets/key``;
    ``read_file(./secrets/*): deny`` matched no path, and the model read the key), and with
    ``~`` as the home folder (``bash(cat ~/.ssh/*)`` let ``cat /root/.ssh/id_rsa`` run); a URL
    rule written without its scheme (``http_request(url:evil.com/*)``) as any scheme's; a
    folder named alone (``read_file(secrets)``) as the files in it."""
    if not pattern:
        return []
    forms: list[str] = []
    if _HOST_FIRST.fullmatch(pattern):  # the URLs are matched as the client sends them
        forms += [f"*://{host}{rest}" for host in dict.fromkeys((pattern, pattern.lower()))
                  for rest in ("", "/*")]
    if not set(pattern) & set("*?[") and " " not in pattern:
        # a folder named alone (`read_file(secrets)`, `read_file(./secrets/)`) holds its files
        forms.append(posixpath.normpath(pattern) + "/*")
    if "/" not in pattern:
        return [f for f in dict.fromkeys(forms) if f != pattern]

    def tidy(word: str, home: bool) -> str:
        if "/" not in word or "://" in word:
            return word
        return posixpath.normpath(os.path.expanduser(word) if home else word)

    # word by word: a shell rule's words are paths too (`bash(cat ./secrets/*)`)
    forms += [" ".join(tidy(w, home) for w in pattern.split(" ")) for home in (False, True)]
    return [f for f in dict.fromkeys(forms) if f != pattern]


_HOST_FIRST = re.compile(r"[A-Za-z0-9*-]+(?:\.[A-Za-z0-9*-]+)+(?::[0-9*]+)?(?:/\S*)?")
"""A pattern that starts with a host name (``evil.com/*``, ``api.evil.com:8443``)."""


def _check_policy(where: str, policy: Any) -> Policy | None:
    if policy is None or policy in POLICY_RANK:
        return policy  # type: ignore[no-any-return]
    raise ConfigError(f"{where} is {policy!r}; use 'allow', 'confirm' or 'deny'")

# -- what the model sees -----------------------------------------------------------------------


@lru_cache(maxsize=64)
def _policy(guard_json: str, floors_json: tuple[str, ...] = ()) -> ToolPolicyChecker:
    # one parse of the rules per distinct guard: the model's tools are filtered every turn
    checker = ToolPolicyChecker.from_guard_constraints(
        GuardConstraints.model_validate_json(guard_json))
    # a team member's callers' guards (a JSON dump keeps no floors: given apart, none nested)
    checker.floors = tuple(_policy(floor) for floor in floors_json)
    return checker


def _floors_json(guard: GuardConstraints) -> tuple[str, ...]:
    """The JSON of each of ``guard``'s floors, theirs included: the strictest decides."""
    return tuple(each for f in guard.floors for each in (f.model_dump_json(), *_floors_json(f)))


_SHARED_POLICIES: dict[int, ToolPolicyChecker] = {}
"""`_policy_for` of each read-only guard: the runs under the shared defaults dump none per run."""


def _policy_for(guard: GuardConstraints | None) -> ToolPolicyChecker:
    if guard is not None and guard.floors:  # a team member's: its callers' guards too
        return _policy(guard.model_dump_json(), _floors_json(guard))
    return once_per_read_only(
        guard or GuardConstraints(), _SHARED_POLICIES, lambda g: _policy(g.model_dump_json())
    )


def visible_tools(
    toolset: ToolSet | Iterable[Tool],
    ctx: RunContext | None,
    constraints: Constraints | None = None,
) -> ToolSet:
    """The tools of ``toolset`` the model may see, in order, as a `ToolSet`.

    A tool is hidden when its merged policy is a plain deny: a name rule denies it, or no rule
    allows or confirms any of its calls and ``default_policy`` is deny; and an admin_only tool
    is hidden from a run whose user lacks the ``admin`` role.

    Args:
        toolset: The tools that could be offered.
        ctx: The run's context (its ``user_roles``); ``None`` does not filter by role.
        constraints: The merged constraints in force; default ``ctx.constraints``.
    """
    if constraints is None and ctx is not None:
        constraints = ctx.constraints
    policy = _policy_for(constraints.guard if constraints is not None else None)
    roles = ctx.user_roles if ctx is not None else None
    tools = toolset if isinstance(toolset, ToolSet) else ToolSet.from_tools(toolset)
    hidden = [policy.hides(t.tool_spec, user_roles=roles) for t in tools]
    if not any(hidden):
        return tools  # the common case: nothing hidden, no new set
    return ToolSet.from_tools(t for t, gone in zip(tools, hidden, strict=True) if not gone)


def is_denied(tool: Tool | str, guard: GuardConstraints | None) -> bool:
    """Whether ``tool`` (a tool or a name) is hidden from the model by policy alone."""
    return _policy_for(guard).hides(getattr(tool, "tool_spec", tool))


def allowed_unasked(tool: Tool, guard: GuardConstraints | None) -> bool:
    """Whether the policy lets a call of ``tool`` without arguments run with nobody asked:
    for calls that never reach the executor (hand-offs), which cannot ask a person, so a
    rule that denies them or would have a person confirm them takes them away."""
    call = ToolCall(id="", name=tool.name, arguments={})
    return _policy_for(guard).resolve(call, tool)[0] == "allow"


# -- the chain ---------------------------------------------------------------------------------


BUILTIN_CHECKERS: Mapping[str, type[BaseChecker]] = {
    "policy": ToolPolicyChecker,
    "rate_limit": RateLimitChecker,
    "budget": BudgetChecker,
    "confirm": ConfirmChecker,
}
"""The guard's own checkers by their registered names, in the order of the default chain
(`jianmu.plugins.BUILTINS` names the same classes, for a config checked without imports)."""


def _checker_class(name: str) -> type[Any]:
    """The class ``name`` stands for: the guard's own for a built-in name that no
    `jianmu.plugins.register` replaced, else whatever `jianmu.plugins` resolves it to."""
    own = BUILTIN_CHECKERS.get(name)
    if own is not None and name not in plugins.ADDED["checker"]:
        return own
    return plugins.resolve("checker", name)


def builtin_chain(guard: GuardConstraints) -> bool:
    """Whether every checker ``guard.checkers`` names is a built-in one (none replaced by
    `jianmu.plugins.register`): such a chain keeps no per-run counts, so runs may share it."""
    names = guard.checkers if guard.checkers is not None else DEFAULT_CHECKERS
    added = plugins.ADDED["checker"]
    return all(name in BUILTIN_CHECKERS and name not in added for name in names)


def build_chain(
    guard: GuardConstraints,
    *,
    clock: Callable[[], float] | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> tuple[GuardChecker, ...]:
    """The checkers that ``guard.checkers`` names (default `DEFAULT_CHECKERS`), in order.

    A built-in name is the guard's own class (`BUILTIN_CHECKERS`) unless `jianmu.plugins.register`
    put another in its place; any other name is resolved through `jianmu.plugins`. Each is built
    by its class's ``from_setup(CheckerSetup(guard=..., clock=..., workspace=...))``.

    Raises:
        ConfigError: a name is not registered, its class cannot be imported, or it does not
            build a `GuardChecker`; a checker refuses its settings.
    """
    setup = CheckerSetup(guard=guard, clock=clock, workspace=workspace)
    chain: list[GuardChecker] = []
    for name in guard.checkers if guard.checkers is not None else DEFAULT_CHECKERS:
        checker = _checker_class(name).from_setup(setup)
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


# -- the enforcer ------------------------------------------------------------------------------


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
        resolved: Sequence[Any] | None = None,
        node: str | None = None,
        fits: Callable[[ToolCall, Any], bool] | None = None,
    ) -> list[Decision]:
        """Check a whole batch in order; one decision per call, in the same order.

        A call that is not denied counts against ``max_tool_calls`` and the per-minute limits
        of the calls after it, so a batch never overshoots them; but not one that ``fits``
        says cannot run (its arguments do not fit its tool): it takes no later call's place.

        Args:
            calls: The batch.
            tools: The tools by name: a `ToolSet`, a mapping of name to tool, or a list.
            run: The run's context (``user_roles``, ``interaction``, ``events``).
            tokens_used: Tokens the run has spent (the state's ``usage``).
            ledger: What the run used before this batch (calls made, recent call times).
            events: Where to emit ``guard.decision``; default ``run.events``.
            resolved: The tool of each call, in order, when the caller has resolved the calls
                already (`ToolSet.canonical`): a call named by its tool's own name is not looked
                up again.
            node: The path of the node that runs the calls (an approval holds for its own).
            fits: Whether a call (with its tool) can run; asked only of a call the guard lets
                through that has calls after it.
        """
        # every checker sees the canonical call: the registered tool's own name, never a
        # look-alike; a call the caller did not resolve to its tool's own name is resolved here
        if resolved is None:
            pairs = [canonical_call(call, tools) for call in calls]
        else:
            pairs = [
                (call, tool) if tool is not None and getattr(tool, "name", None) == call.name
                else canonical_call(call, tools)
                for call, tool in zip(calls, resolved, strict=True)
            ]
        batch = tuple(call for call, _tool in pairs)
        # the policies with a rule on arguments (most have none): they read what the tool
        # receives
        policies = [c for c in self.checkers
                    if isinstance(c, ToolPolicyChecker) and c._needs_root]
        ledger = ledger if ledger is not None else GuardLedger()
        calls_made, call_times = ledger.calls_made, ledger.call_times
        admitted: tuple[ToolCall, ...] = ()  # a new tuple only when a call is admitted
        decisions: list[Decision] = []
        last = len(pairs) - 1
        for index, (call, tool) in enumerate(pairs):
            context = GuardContext(
                call=call,
                # the checkers read the tool's spec: what it says of itself, in one place
                tool=getattr(tool, "tool_spec", tool),
                batch=batch,
                admitted=admitted,
                run=run,
                tokens_used=tokens_used,
                calls_made=calls_made,
                call_times=call_times,
                node=node,
                # what the tool receives, where a rule reads it: a value the model spells
                # otherwise (`10000.0`, `"yes"`) is the same value to the tool
                received=received_call(call, tool) if policies and any(
                    p.reads_arguments(call.name) for p in policies) else None,
            )
            decision = self.check("tool_call", context, events=events)
            # a call that cannot run never runs: counted, it denied a valid call after it
            if not decision.denied and (
                    fits is None or index == last or tool is None or fits(call, tool)):
                admitted = (*admitted, call)
            decisions.append(decision)
        return decisions

    def approval_request(
        self, call: ToolCall, decision: Decision, *, node: str | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> ApprovalRequest:
        """The request to suspend with for a PENDING call (its id is the call id); with the
        tool's input schema as ``parameters``, a person's edited arguments are checked.

        Only requests built here are honoured by `ConfirmChecker`.
        """
        return ConfirmChecker.request_for(call, decision, node=node, parameters=parameters)

    def rate_limited(self, name: str) -> bool:
        """Whether a per-minute limit applies to the tool ``name`` (its call times must be kept)."""
        known = self._rate_limited.get(name)
        if known is None:  # the chain is fixed once built: ask it once per tool
            known = any(
                isinstance(c, RateLimitChecker) and c.limit_for(name) is not None
                for c in self.checkers
            )
            # one chain serves every run under the shared defaults for the process's life, and
            # names come from the model and from tools made per request: never grow unbounded
            if len(self._rate_limited) >= _NAMES_KEPT:
                self._rate_limited.clear()
            self._rate_limited[name] = known
        return known


def first_bad_rule(guard: GuardConstraints) -> tuple[str, str, str] | None:
    """The first ``tool_policy`` or ``rate_limits`` key the guard could not use, as (section,
    key, what is wrong, beginning ``guard.<section>``), or None."""
    keyed = [("tool_policy", key) for key in guard.tool_policy]
    keyed += [("rate_limits", key) for key in guard.rate_limits]
    for section, key in keyed:
        try:
            if section == "tool_policy":
                parse_rule(key)
            name = key.split("(", 1)[0] if section == "tool_policy" else key
            _check_rule_name(f"guard.{section}", key, name.strip())
        except ConfigError as exc:
            message = str(exc)  # the name check's message already says where
            return section, key, (message if message.startswith("guard.")
                                  else f"guard.{section}: {message}")
    return None


def check_config_rules(config: AppConfig) -> None:
    """Refuse a ``tool_policy`` or ``rate_limits`` key the guard could not use, with its file
    and line.

    The guard parses them when a run starts; checked when the command line loads its config
    too, a typo stops the command before a run is created and saved, and the error names the
    file and line.

    Raises:
        ConfigError: the first key the guard could not use.
    """
    bad = first_bad_rule(config.guard)
    if bad is not None:
        section, key, message = bad
        line = config.key_lines.get(("guard", section, key), "?")
        raise ConfigError(f"{config.source or '<config>'}:{line}: {message}")


_SKILL_TOOLS = frozenset({"run_bt_skill", "read_skill_file", "run_skill_script"})
"""The tools a skill node adds itself when skills load: a rule may name them before."""
_log = logging.getLogger("jianmu.guard")


def unmatched_rule_names(
    guard: GuardConstraints, tool_names: Iterable[str]
) -> list[tuple[str, str, str | None]]:
    """The ``tool_policy`` and ``rate_limits`` keys that name no tool of ``tool_names`` (the
    run's) under any of a restriction's spellings, nor any tool that may still come (a built-in
    or its alias, a Claude Code tool's name, a skill's tool, an MCP server's ``server__tool``
    or ``mcp__server``): a typo (``delet_file: deny``) restricts nothing. Each as (section, key,
    the closest known name or None)."""
    import difflib  # only when a run has rules: the script import loads none of it

    from jianmu.tools.providers import BuiltinToolProvider

    if not guard.tool_policy and not guard.rate_limits:
        return []
    run = {n.strip().lower() for n in tool_names}
    provider = BuiltinToolProvider.default()
    known = (run | {n.lower() for n in provider.list_builtin_names()} | set(provider.aliases())
             | set(_CLAUDE_TOOLS) | _SKILL_TOOLS)
    groups = _alias_groups()
    keyed = [("tool_policy", key, key.split("(", 1)[0]) for key in guard.tool_policy]
    keyed += [("rate_limits", key, key) for key in guard.rate_limits]
    unmatched: list[tuple[str, str, str | None]] = []
    for section, key, written in keyed:
        name = written.strip().lower()
        if name in known or "__" in name:  # an MCP server's tool may connect later
            continue
        names = _restricted_names(name, groups) | _granted_names(name)
        if any(_covers(names, each) for each in run):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        unmatched.append((section, key, close[0] if close else None))
    return unmatched


def warn_unmatched_rules(
    guard: GuardConstraints, tool_names: Callable[[], Iterable[str]], events: EventSink | None,
    node: str,
) -> None:
    """Log and emit ``guard.rule.unmatched`` for each `unmatched_rule_names` key spelt close to
    a known name (a typo): a warning, not an error, for a tool may be another agent's of the
    same run, or come later; a name close to none is taken as one such. ``tool_names`` is
    asked only when there are rules (every run starts here)."""
    if not guard.tool_policy and not guard.rate_limits:
        return
    for section, key, closest in unmatched_rule_names(guard, tool_names()):
        if closest is None:
            continue
        message = (f"guard.{section}[{key!r}] names no tool {node!r} has nor any built-in, "
                   f"skill or MCP tool, so it restricts nothing here; did you mean {closest!r}?")
        _log.warning(message)
        if events is not None:
            events.emit("guard.rule.unmatched", section=section, rule=key, closest=closest,
                        message=message)
