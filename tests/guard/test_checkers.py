"""Each checker alone (jianmu/guard/checkers.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jianmu.constraints import Constraints, ExecutionConstraints, Policy
from jianmu.errors import ConfigError
from jianmu.execution.runner import use_workspace
from jianmu.guard import (
    BudgetChecker,
    ConfirmChecker,
    Decision,
    DecisionKind,
    GuardContext,
    RateLimitChecker,
    ToolPolicyChecker,
)
from jianmu.runtime.context import ApprovalRequest, Interaction, RunContext
from jianmu.tools.calls import ToolCall
from tests.guard.guard_fakes import FakeTool, bash, write_file

START = Decision.allow("start", checker="test")


def ctx(call: ToolCall, tool: Any = None, **kw: Any) -> GuardContext:
    return GuardContext(call=call, tool=tool, **kw)


def bash_call(command: str, call_id: str = "c1") -> ToolCall:
    return ToolCall(name="bash", arguments={"command": command}, id=call_id)


# --- ToolPolicyChecker ---------------------------------------------------------------


def policy_kind(checker: ToolPolicyChecker, call: ToolCall, tool: Any, **kw: Any) -> DecisionKind:
    return checker.check(ctx(call, tool, **kw), START).kind


def test_permission_is_the_default() -> None:
    checker = ToolPolicyChecker()
    assert policy_kind(checker, bash_call("ls"), bash()) is DecisionKind.CONFIRM
    auto = FakeTool(name="calc")
    assert policy_kind(checker, ToolCall(name="calc"), auto) is DecisionKind.ALLOW
    strict = ToolPolicyChecker(default_policy="confirm")
    assert policy_kind(strict, ToolCall(name="calc"), auto) is DecisionKind.CONFIRM
    closed = ToolPolicyChecker(default_policy="deny")
    assert policy_kind(closed, ToolCall(name="calc"), auto) is DecisionKind.DENY
    # user_confirm is never loosened by a permissive default, but a deny default wins
    assert policy_kind(ToolPolicyChecker(default_policy="allow"), bash_call("ls"), bash()) is (
        DecisionKind.CONFIRM
    )
    assert policy_kind(closed, bash_call("ls"), bash()) is DecisionKind.DENY


def test_permission_enum_values_are_read() -> None:
    class Permission:
        value = "user_confirm"

    tool = FakeTool(name="mail")
    tool.permission = Permission()  # type: ignore[assignment]
    assert policy_kind(ToolPolicyChecker(), ToolCall(name="mail"), tool) is DecisionKind.CONFIRM


def test_explicit_rule_overrides_permission_and_deny_always_wins() -> None:
    assert policy_kind(ToolPolicyChecker({"Bash": "allow"}), bash_call("ls"), bash()) is (
        DecisionKind.ALLOW
    )
    both = ToolPolicyChecker({"bash": "allow", "bash(rm *)": "deny"})
    assert policy_kind(both, bash_call("ls"), bash()) is DecisionKind.ALLOW
    decision = both.check(ctx(bash_call("ls && rm -rf /"), bash()), START)
    assert decision.denied and decision.rule == "bash(rm *)"
    assert "bash(rm *)" in decision.reason


@pytest.mark.parametrize("reverse", [False, True])
def test_rule_strength_ignores_order(reverse: bool) -> None:
    rules: list[tuple[str, Policy]] = [
        ("bash", "allow"),
        ("bash(git push*)", "confirm"),
        ("bash(git push --force*)", "deny"),
    ]
    checker = ToolPolicyChecker(dict(reversed(rules) if reverse else rules))
    tool = bash()
    assert policy_kind(checker, bash_call("git status"), tool) is DecisionKind.ALLOW
    assert policy_kind(checker, bash_call("git push origin"), tool) is DecisionKind.CONFIRM
    assert policy_kind(checker, bash_call("git push --force x"), tool) is DecisionKind.DENY


def test_argument_allow_rule_on_a_confirm_tool() -> None:
    checker = ToolPolicyChecker({"bash(git status*)": "allow", "Bash(ls:*)": "allow"})
    tool = bash()
    assert policy_kind(checker, bash_call("git status -s"), tool) is DecisionKind.ALLOW
    assert policy_kind(checker, bash_call("ls -la"), tool) is DecisionKind.ALLOW
    assert policy_kind(checker, bash_call("git status | ls"), tool) is DecisionKind.ALLOW
    # not every part is allowed: falls back to the permission, confirm
    assert policy_kind(checker, bash_call("git status; rm -rf /"), tool) is DecisionKind.CONFIRM
    assert policy_kind(checker, bash_call("git push"), tool) is DecisionKind.CONFIRM


def test_named_argument_rules() -> None:
    checker = ToolPolicyChecker(
        {"write_file(path:docs/*)": "allow", "write_file": "confirm"}, default_policy="deny"
    )
    tool = write_file()
    call = ToolCall(name="write_file", arguments={"path": "docs/a.md", "content": "x"})
    # the name rule (confirm) is stricter than the argument allow: confirm wins
    assert policy_kind(checker, call, tool) is DecisionKind.CONFIRM
    only_docs = ToolPolicyChecker({"write_file(path:docs/*)": "allow"}, default_policy="deny")
    assert policy_kind(only_docs, call, tool) is DecisionKind.ALLOW
    other = ToolCall(name="write_file", arguments={"path": "src/a.py", "content": "x"})
    assert policy_kind(only_docs, other, tool) is DecisionKind.DENY


def test_admin_only_needs_the_admin_role() -> None:
    tool = FakeTool(name="drop_db", permission="admin_only")
    checker = ToolPolicyChecker({"drop_db": "allow"})
    call = ToolCall(name="drop_db")
    denied = checker.check(ctx(call, tool, run=RunContext(user_roles=frozenset({"dev"}))), START)
    assert denied.denied and "admin_only" in denied.reason and "dev" in denied.reason
    assert checker.check(ctx(call, tool), START).denied  # no run context: no roles
    admin = RunContext(user_roles=frozenset({"Admin"}))
    assert checker.check(ctx(call, tool, run=admin), START).allowed
    # with the role, the policy still applies
    deny = ToolPolicyChecker({"drop_db": "deny"})
    assert deny.check(ctx(call, tool, run=admin), START).denied


def test_unknown_tool_is_denied() -> None:
    decision = ToolPolicyChecker().check(ctx(ToolCall(name="nope"), None), START)
    assert decision.denied and "'nope'" in decision.reason


def test_bad_policy_config_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"tool_policy\['bash'\] is 'maybe'"):
        ToolPolicyChecker({"bash": "maybe"})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"guard\.tool_policy: invalid tool rule 'bash\('"):
        ToolPolicyChecker({"bash(": "deny"})
    with pytest.raises(ConfigError, match="default_policy is 'nah'"):
        ToolPolicyChecker(default_policy="nah")  # type: ignore[arg-type]


def test_hides_only_plain_deny() -> None:
    tool = bash()
    assert ToolPolicyChecker({"bash": "deny"}).hides(tool)
    assert ToolPolicyChecker({"bash": "deny", "bash(ls*)": "allow"}).hides(tool)
    assert not ToolPolicyChecker({"bash(rm*)": "deny"}).hides(tool)
    assert ToolPolicyChecker(default_policy="deny").hides(tool)
    assert not ToolPolicyChecker({"bash(ls*)": "allow"}, default_policy="deny").hides(tool)
    assert not ToolPolicyChecker({"BASH": "confirm"}, default_policy="deny").hides("bash")
    admin = FakeTool(name="drop", permission="admin_only")
    assert not ToolPolicyChecker().hides(admin)
    assert ToolPolicyChecker().hides(admin, user_roles=frozenset({"dev"}))
    assert not ToolPolicyChecker().hides(admin, user_roles=frozenset({"admin"}))


# --- RateLimitChecker ------------------------------------------------------------------


def test_max_tool_calls_counts_made_and_admitted() -> None:
    checker = RateLimitChecker(max_tool_calls=3)
    call = ToolCall(name="calc")
    earlier = (ToolCall(name="calc"),)
    assert checker.check(ctx(call, calls_made=1, admitted=earlier), START) is START
    decision = checker.check(ctx(call, calls_made=2, admitted=earlier), START)
    assert decision.denied and "max_tool_calls=3" in decision.reason
    assert decision.checker == "RateLimitChecker"


def test_rate_limit_per_minute_with_a_fake_clock() -> None:
    now = [1000.0]
    checker = RateLimitChecker(rate_limits={"Search": 2}, clock=lambda: now[0])
    call = ToolCall(name="search")
    times = {"search": [950.0, 990.0]}
    decision = checker.check(ctx(call, call_times=times), START)
    assert decision.denied and "2 call(s) per minute" in decision.reason
    now[0] = 1011.0  # 950 left the window
    assert checker.check(ctx(call, call_times=times), START) is START
    # a call admitted earlier in the batch counts too
    assert checker.check(ctx(call, call_times=times, admitted=(call,)), START).denied
    # other tools are not limited
    assert checker.check(ctx(ToolCall(name="calc"), call_times=times), START) is START


@pytest.mark.parametrize(
    ("kwargs", "hint"),
    [
        ({"max_tool_calls": -1}, "max_tool_calls is -1"),
        ({"rate_limits": {"x": -2}}, r"rate_limits\['x'\] is -2"),
        ({"rate_limits": {"x": "5"}}, r"rate_limits\['x'\] is '5'"),
    ],
)
def test_bad_limits_are_rejected(kwargs: dict[str, Any], hint: str) -> None:
    with pytest.raises(ConfigError, match=hint):
        RateLimitChecker(**kwargs)


# --- BudgetChecker ---------------------------------------------------------------------


def test_budget() -> None:
    checker = BudgetChecker(total_tokens=100)
    call = ToolCall(name="calc")
    assert checker.check(ctx(call, tokens_used=99), START) is START
    decision = checker.check(ctx(call, tokens_used=100), START)
    assert decision.denied and "100 of 100 tokens" in decision.reason
    assert BudgetChecker().check(ctx(call, tokens_used=10**9), START) is START
    with pytest.raises(ConfigError, match="total_tokens is -5"):
        BudgetChecker(-5)


# --- ConfirmChecker --------------------------------------------------------------------

CONFIRM = Decision.confirm("tool 'bash' has permission 'user_confirm'", checker="ToolPolicyChecker")


def test_confirm_passes_other_decisions_through() -> None:
    run = RunContext()
    call = bash_call("ls")
    assert ConfirmChecker().check(ctx(call, run=run), START) is START


def test_confirm_without_channel_is_denied() -> None:
    no_channel = RunContext(interaction=None)
    decision = ConfirmChecker().check(ctx(bash_call("ls"), run=no_channel), CONFIRM)
    assert decision.denied and "no interaction channel" in decision.reason
    assert ConfirmChecker().check(ctx(bash_call("ls")), CONFIRM).denied  # no run at all


def test_confirm_pending_then_approved_or_rejected() -> None:
    run = RunContext()
    assert run.interaction is not None
    checker = ConfirmChecker()
    call = bash_call("ls", "c1")
    first = checker.check(ctx(call, run=run), CONFIRM)
    assert first.awaiting_approval and first.reason == CONFIRM.reason
    run.interaction.suspend(ConfirmChecker.request_for(call, first))
    assert checker.check(ctx(call, run=run), CONFIRM).awaiting_approval  # asked, undecided
    run.interaction.approve("c1", "fine")
    ok = checker.check(ctx(call, run=run), CONFIRM)
    assert ok.allowed and ok.checker == "ConfirmChecker" and "fine" in ok.reason

    other = bash_call("rm x", "c2")
    run.interaction.suspend(ConfirmChecker.request_for(other, first))
    run.interaction.reject("c2", "not on my machine")
    no = checker.check(ctx(other, run=run), CONFIRM)
    assert no.denied and no.reason == "rejected by a person: not on my machine"


def test_answer_for_other_arguments_under_same_id_does_not_confirm() -> None:
    run = RunContext()
    assert run.interaction is not None
    shown = bash_call("ls", "c1")
    run.interaction.suspend(ConfirmChecker.request_for(shown, CONFIRM))
    run.interaction.approve("c1")
    swapped = bash_call("rm -rf /", "c1")
    decision = ConfirmChecker().check(ctx(swapped, run=run), CONFIRM)
    assert decision.denied and "another tool or other arguments" in decision.reason


def test_answer_to_a_request_the_guard_did_not_ask_is_refused() -> None:
    run = RunContext()
    assert run.interaction is not None
    run.interaction.suspend(ApprovalRequest(id="c1", kind="input", summary="name?"))
    run.interaction.approve("c1")
    decision = ConfirmChecker().check(ctx(bash_call("ls", "c1"), run=run), CONFIRM)
    assert decision.denied and "another approval request" in decision.reason


def test_decision_for_an_id_never_asked_allows_nothing() -> None:
    class Forged(Interaction):
        """A channel whose decision() answers for ids nobody asked."""

        def decision(self, request_id: str) -> Any:
            from jianmu.runtime.context import ApprovalDecision

            return ApprovalDecision(request_id=request_id, approved=True)

    run = RunContext(interaction=Forged())
    decision = ConfirmChecker().check(ctx(bash_call("ls", "c9"), run=run), CONFIRM)
    assert decision.awaiting_approval  # asks instead of trusting the answer


RULES: list[tuple[str, Policy]] = [
    ("bash", "allow"),
    ("bash(git push*)", "confirm"),
    ("Bash(rm:*)", "deny"),
    ("bash(ls*)", "allow"),
    ("bash(command:curl *)", "confirm"),
]


@given(
    order=st.permutations(RULES),
    command=st.sampled_from(
        ["ls", "git push", "rm -rf /", "ls; rm x", "curl x | sh", "git push && ls", "echo"]
    ),
)
def test_any_rule_order_gives_the_same_decision(
    order: list[tuple[str, Policy]], command: str
) -> None:
    call = bash_call(command)
    expected = policy_kind(ToolPolicyChecker(dict(RULES)), call, bash())
    assert policy_kind(ToolPolicyChecker(dict(order)), call, bash()) is expected


# --- path rules see the file the tool will touch; alias rule keys ----------------------------


def _read_file() -> FakeTool:
    return FakeTool(
        name="read_file",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    )


def _secret_workspace(root: Path) -> Path:
    (root / "secrets").mkdir()
    (root / "secrets" / "key.txt").write_text("k")
    (root / "docs").mkdir()
    os.symlink("../secrets", root / "docs" / "notes")
    return root


def test_path_deny_rule_resolves_against_the_run_workdir(tmp_path: Path) -> None:
    ws = _secret_workspace(tmp_path)
    checker = ToolPolicyChecker({"read_file(path:secrets/*)": "deny"})
    run = RunContext(constraints=Constraints(execution=ExecutionConstraints(workdir=str(ws))))
    for path in (str(ws / "secrets" / "key.txt"), "docs/notes/key.txt", "secrets/key.txt"):
        c = ToolCall(name="read_file", arguments={"path": path})
        assert policy_kind(checker, c, _read_file(), run=run) is DecisionKind.DENY, path
    c = ToolCall(name="read_file", arguments={"path": "docs/other.md"})
    assert policy_kind(checker, c, _read_file(), run=run) is DecisionKind.ALLOW


def test_path_rule_uses_the_checker_workspace_then_current_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _secret_workspace(ws)
    other = tmp_path / "other"
    other.mkdir()
    c = ToolCall(name="read_file", arguments={"path": "docs/notes/key.txt"})
    given = ToolPolicyChecker({"read_file(path:secrets/*)": "deny"}, workspace=ws)
    with use_workspace(other):
        assert policy_kind(given, c, _read_file()) is DecisionKind.DENY
    ambient = ToolPolicyChecker({"read_file(path:secrets/*)": "deny"})
    with use_workspace(other):  # no link there: docs/notes is just a folder name
        assert policy_kind(ambient, c, _read_file()) is DecisionKind.ALLOW
    with use_workspace(ws):
        assert policy_kind(ambient, c, _read_file()) is DecisionKind.DENY


def test_path_allow_rule_does_not_allow_a_link_into_another_area(tmp_path: Path) -> None:
    ws = _secret_workspace(tmp_path)
    checker = ToolPolicyChecker({"write_file(path:docs/*)": "allow"}, default_policy="deny")
    ok = ToolCall(name="write_file", arguments={"path": "docs/a.md", "content": "x"})
    assert policy_kind(checker, ok, write_file(), run=None) is DecisionKind.ALLOW
    checker = ToolPolicyChecker(
        {"write_file(path:docs/*)": "allow"}, default_policy="deny", workspace=ws
    )
    sneaky = ToolCall(name="write_file", arguments={"path": "docs/notes/key.txt", "content": "x"})
    assert policy_kind(checker, sneaky, write_file()) is DecisionKind.DENY


@pytest.mark.parametrize(
    ("rule", "tool"),
    [
        ("file_read", "read_file"),
        ("read_file", "file_read"),
        ("Web_Search", "duckduckgo_search"),
        ("file_read(path:secrets/*)", "read_file"),
    ],
)
def test_rule_written_with_an_alias_covers_the_tool(rule: str, tool: str) -> None:
    checker = ToolPolicyChecker({rule: "deny"})
    c = ToolCall(name=tool, arguments={"path": "secrets/key.txt"})
    assert policy_kind(checker, c, FakeTool(name=tool)) is DecisionKind.DENY
    if "(" not in rule:
        assert checker.hides(tool) and checker.hides(FakeTool(name=tool))
    # other tools are untouched
    assert policy_kind(checker, ToolCall(name="calc"), FakeTool(name="calc")) is DecisionKind.ALLOW


def test_rate_limit_written_with_an_alias() -> None:
    checker = RateLimitChecker(rate_limits={"web_search": 1}, clock=lambda: 100.0)
    c = ToolCall(name="DuckDuckGo_Search")
    assert checker.check(ctx(c, call_times={"duckduckgo_search": [90.0]}), START).denied
    assert checker.check(ctx(c), START) is START


def test_a_checker_decides_hidden_again_when_its_rules_change() -> None:
    checker = ToolPolicyChecker({"bash": "deny"})
    assert checker.hides("bash") and not checker.hides("ls")
    assert checker.hides("drop", user_roles=frozenset()) is False
    assert checker.hides("drop", user_roles={"dev"}) is False  # type: ignore[arg-type]
    checker.rules = ToolPolicyChecker({"ls": "deny"}).rules
    assert checker.hides("ls") and not checker.hides("bash")
