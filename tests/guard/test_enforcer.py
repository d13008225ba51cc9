"""The chain, batch preflight, events and visibility (jianmu/guard/enforcer.py)."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu.constraints import BudgetConstraints, Constraints, GuardConstraints
from jianmu.errors import ConfigError, InteractionError
from jianmu.guard import (
    Decision,
    DecisionKind,
    GuardContext,
    GuardEnforcer,
    GuardLedger,
    is_denied,
    visible_tools,
)
from jianmu.runtime.context import RunContext
from jianmu.runtime.events import Event
from jianmu.tools.calls import ToolCall
from tests.guard.guard_fakes import FakeTool, bash, write_file

CALC = FakeTool(name="calc")
TOOLS: dict[str, Any] = {"calc": CALC, "bash": bash(), "write_file": write_file()}


def calc_calls(n: int) -> list[ToolCall]:
    return [ToolCall(name="calc", arguments={"x": i}, id=f"c{i}") for i in range(n)]


def kinds(decisions: list[Decision]) -> list[str]:
    return [d.kind.value for d in decisions]


def test_deny_short_circuits_the_chain() -> None:
    seen: list[str] = []

    class Spy:
        name = "Spy"

        def check(self, context: GuardContext, previous: Decision) -> Decision:
            seen.append(previous.kind.value)
            return previous

    class Denier:
        name = "Denier"

        def check(self, context: GuardContext, previous: Decision) -> Decision:
            return Decision.deny("no", checker=self.name)

    enforcer = GuardEnforcer([Spy(), Denier(), Spy()])
    decision = enforcer.check("tool_call", GuardContext(call=ToolCall(name="calc"), tool=CALC))
    assert decision.denied and decision.checker == "Denier"
    assert seen == ["allow"]  # the second spy never ran


def test_confirm_continues_and_a_later_checker_denies() -> None:
    guard = GuardConstraints(
        tool_policy={"calc": "confirm"}, budget=BudgetConstraints(total_tokens=10)
    )
    enforcer = GuardEnforcer.from_guard_constraints(guard)
    run = RunContext()
    [over] = enforcer.preflight(calc_calls(1), TOOLS, run=run, tokens_used=10)
    assert over.denied and over.checker == "BudgetChecker"
    [under] = enforcer.preflight(calc_calls(1), TOOLS, run=run, tokens_used=9)
    assert under.awaiting_approval and under.rule == "calc"


def test_chain_without_confirm_checker_never_returns_confirm() -> None:
    from jianmu.guard import ToolPolicyChecker

    enforcer = GuardEnforcer([ToolPolicyChecker({"calc": "confirm"})])
    decision = enforcer.check("tool_call", GuardContext(call=ToolCall(name="calc"), tool=CALC))
    assert decision.denied and "no checker can ask" in decision.reason


def test_unknown_check_kind() -> None:
    with pytest.raises(ValueError, match="unknown guard check kind 'llm_call'"):
        GuardEnforcer().check("llm_call", GuardContext(call=ToolCall(name="calc")))


def test_max_tool_calls_under_a_parallel_batch() -> None:
    enforcer = GuardEnforcer.from_guard_constraints(GuardConstraints(max_tool_calls=5))
    decisions = enforcer.preflight(calc_calls(4), TOOLS, calls_made=2)
    assert kinds(decisions) == ["allow", "allow", "allow", "deny"]  # exactly 5 in all
    assert "max_tool_calls=5" in decisions[3].reason
    # denied calls take no slot: an unknown tool in the middle leaves room for the next
    batch = [ToolCall(name="nope", id="x"), *calc_calls(3)]
    assert kinds(enforcer.preflight(batch, TOOLS, calls_made=3)) == [
        "deny",
        "allow",
        "allow",
        "deny",
    ]


def test_counts_from_the_ledger_survive_batches_and_restore() -> None:
    enforcer = GuardEnforcer.from_guard_constraints(GuardConstraints(max_tool_calls=3))
    first = enforcer.preflight(calc_calls(2), TOOLS)
    enforcer.record_executed(c for c, d in zip(calc_calls(2), first, strict=True) if d.allowed)
    assert enforcer.ledger.calls_made == 2
    saved = enforcer.ledger.to_dict()

    restored = GuardEnforcer.from_guard_constraints(GuardConstraints(max_tool_calls=3))
    restored.ledger = GuardLedger.from_dict(saved)
    assert kinds(restored.preflight(calc_calls(2), TOOLS)) == ["allow", "deny"]
    restored.reset_for_run()
    assert kinds(restored.preflight(calc_calls(2), TOOLS)) == ["allow", "allow"]


def test_rate_limit_over_batches_with_a_fake_clock() -> None:
    now = [100.0]
    guard = GuardConstraints(rate_limits={"calc": 2})
    enforcer = GuardEnforcer.from_guard_constraints(guard, clock=lambda: now[0])
    assert kinds(enforcer.preflight(calc_calls(3), TOOLS)) == ["allow", "allow", "deny"]
    enforcer.record_executed(["calc", "calc"])
    now[0] = 159.0
    assert kinds(enforcer.preflight(calc_calls(1), TOOLS)) == ["deny"]
    now[0] = 160.5
    assert kinds(enforcer.preflight(calc_calls(1), TOOLS)) == ["allow"]
    # explicit call times win over the ledger
    assert kinds(enforcer.preflight(calc_calls(1), TOOLS, call_times={"calc": [160, 160]})) == [
        "deny"
    ]


def test_ledger_forgets_old_times() -> None:
    ledger = GuardLedger()
    ledger.record(["A", "b"], at=0.0)
    ledger.record(["a"], at=61.0)
    assert ledger.calls_made == 3 and ledger.call_times == {"a": [61.0]}


def test_confirm_suspend_approve_reject_round_trip() -> None:
    enforcer = GuardEnforcer.from_guard_constraints(GuardConstraints())
    run = RunContext()
    assert run.interaction is not None
    calls = [
        ToolCall(name="bash", arguments={"command": "make test"}, id="b1"),
        ToolCall(name="bash", arguments={"command": "rm -rf build"}, id="b2"),
        ToolCall(name="calc", arguments={}, id="k1"),
    ]
    decisions = enforcer.preflight(calls, TOOLS, run=run)
    assert kinds(decisions) == ["pending", "pending", "allow"]
    for call, decision in zip(calls, decisions, strict=True):
        if decision.awaiting_approval:
            run.interaction.suspend(enforcer.approval_request(call, decision, node="/Root/Exec"))
    pending = run.interaction.pending
    assert [r.id for r in pending] == ["b1", "b2"]
    assert pending[0].payload["tool"] == "bash" and pending[0].node == "/Root/Exec"
    assert "make test" in pending[0].summary
    # nothing decided yet: still pending
    assert kinds(enforcer.preflight(calls, TOOLS, run=run)) == ["pending", "pending", "allow"]
    run.interaction.approve("b1")
    run.interaction.reject("b2", "never delete build")
    after = enforcer.preflight(calls, TOOLS, run=run)
    assert kinds(after) == ["allow", "deny", "allow"]
    assert after[1].reason == "rejected by a person: never delete build"
    # the channel refuses an answer for an id nobody asked
    with pytest.raises(InteractionError):
        run.interaction.approve("k1")


def test_confirm_without_interaction_is_denied() -> None:
    enforcer = GuardEnforcer.from_guard_constraints(GuardConstraints())
    calls = [ToolCall(name="bash", arguments={"command": "ls"})]
    [decision] = enforcer.preflight(calls, TOOLS, run=RunContext(interaction=None))
    assert decision.denied and decision.checker == "ConfirmChecker"


def test_pending_calls_take_batch_slots() -> None:
    enforcer = GuardEnforcer.from_guard_constraints(GuardConstraints(max_tool_calls=1))
    calls = [ToolCall(name="bash", arguments={"command": "ls"}), *calc_calls(1)]
    assert kinds(enforcer.preflight(calls, TOOLS, run=RunContext())) == ["pending", "deny"]


def test_every_decision_is_an_event() -> None:
    run = RunContext()
    events: list[Event] = []
    run.events.subscribe("guard.*", events.append)
    enforcer = GuardEnforcer.from_guard_constraints(GuardConstraints(tool_policy={"calc": "deny"}))
    decisions = enforcer.preflight([ToolCall(name="calc", id="k1")], TOOLS, run=run)
    assert [e.name for e in events] == ["guard.decision"]
    assert events[0].fields == {
        "check": "tool_call",
        "tool": "calc",
        "call_id": "k1",
        "decision": "deny",
        "reason": decisions[0].reason,
        "checker": "ToolPolicyChecker",
        "rule": "calc",
    }
    assert decisions[0].span_attributes()["jianmu.guard.decision"] == "deny"
    bound = run.events.bind("/Root/Exec")
    enforcer.preflight([ToolCall(name="calc")], TOOLS, run=run, events=bound)
    assert events[-1].node == "/Root/Exec"


def test_tools_lookup_shapes() -> None:
    enforcer = GuardEnforcer()
    call = [ToolCall(name="calc")]
    assert enforcer.preflight(call, [CALC])[0].allowed
    assert enforcer.preflight(call, {"CALC": CALC})[0].allowed

    class Set:
        def get(self, name: str) -> Any:
            if name == "calc":
                return CALC
            raise KeyError(name)

    assert enforcer.preflight(call, Set())[0].allowed
    assert enforcer.preflight([ToolCall(name="zzz")], Set())[0].denied


def test_skill_layer_allow_cannot_loosen_config_confirm() -> None:
    config = Constraints(guard=GuardConstraints(tool_policy={"write_file": "confirm"}))
    skill = Constraints(guard=GuardConstraints(tool_policy={"write_file": "allow"}))
    merged = Constraints.merge(config, skill)
    enforcer = GuardEnforcer.from_guard_constraints(merged.guard)
    call = ToolCall(name="write_file", arguments={"path": "a", "content": "b"})
    [decision] = enforcer.preflight([call], TOOLS, run=RunContext())
    assert decision.kind is DecisionKind.PENDING
    # a skill's argument rule is tightened by a config default of confirm
    config2 = GuardConstraints(default_policy="confirm")
    skill2 = GuardConstraints(tool_policy={"write_file(path:docs/*)": "allow"})
    merged2 = GuardConstraints.merge(config2, skill2)
    docs = ToolCall(name="write_file", arguments={"path": "docs/a", "content": "b"})
    [decision2] = GuardEnforcer.from_guard_constraints(merged2).preflight(
        [docs], TOOLS, run=RunContext()
    )
    assert decision2.awaiting_approval


def test_bad_constraints_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid tool rule"):
        GuardEnforcer.from_guard_constraints(GuardConstraints(tool_policy={"bash()": "deny"}))


def test_visible_tools_hide_plain_deny() -> None:
    admin = FakeTool(name="drop", permission="admin_only")
    tools = [CALC, bash(), write_file(), admin]
    guard = GuardConstraints(tool_policy={"bash": "deny", "write_file(path:/etc/*)": "deny"})
    assert visible_tools(tools, guard) == ["calc", "write_file", "drop"]
    assert visible_tools(tools, guard, user_roles={"dev"}) == ["calc", "write_file"]
    closed = GuardConstraints(default_policy="deny", tool_policy={"calc": "allow"})
    assert visible_tools({t.name: t for t in tools}, closed) == ["calc"]
    assert is_denied("bash", guard) and not is_denied(CALC, guard)
    enforcer = GuardEnforcer.from_guard_constraints(guard)
    assert enforcer.visible(tools, user_roles=["admin"]) == ["calc", "write_file", "drop"]


def test_public_names() -> None:
    import jianmu.guard as guard
    from jianmu.guard import checkers, decision, enforcer

    for module in (guard, checkers, decision, enforcer):
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
    exported = {n for n in dir(guard) if not n.startswith("_") and n[0].isupper()}
    assert exported <= set(guard.__all__)


def test_visible_tools_and_is_denied_hide_a_tool_denied_by_its_alias() -> None:
    tools = [FakeTool(name="read_file"), FakeTool(name="duckduckgo_search"), CALC]
    guard = GuardConstraints(tool_policy={"file_read": "deny", "web_search": "deny"})
    assert visible_tools(tools, guard) == ["calc"]
    assert is_denied("read_file", guard) and is_denied(tools[1], guard)
    assert GuardEnforcer.from_guard_constraints(guard).visible(tools) == ["calc"]


def test_enforcer_resolves_path_rules_in_the_given_workspace(tmp_path: Any) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes").symlink_to("../secrets")
    guard = GuardConstraints(tool_policy={"write_file(path:secrets/*)": "deny"})
    enforcer = GuardEnforcer.from_guard_constraints(guard, workspace=str(tmp_path))
    paths = [str(tmp_path / "secrets" / "k"), "docs/notes/k", "docs/readme.md"]
    calls = [
        ToolCall(name="write_file", arguments={"path": p, "content": "x"}, id=f"w{i}")
        for i, p in enumerate(paths)
    ]
    assert kinds(enforcer.preflight(calls, TOOLS)) == ["deny", "deny", "allow"]
