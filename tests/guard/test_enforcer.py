"""The chain, batch preflight, events and visibility (jianmu/guard/enforcer.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jianmu.constraints import BudgetConstraints, Constraints, GuardConstraints
from jianmu.errors import ConfigError
from jianmu.guard import (
    Decision,
    GuardContext,
    GuardEnforcer,
    GuardLedger,
    is_denied,
    visible_tools,
)
from jianmu.runtime.context import RunContext
from jianmu.tools import Tool, ToolSet, tool
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
    decisions = enforcer.preflight(calc_calls(4), TOOLS, ledger=GuardLedger(calls_made=2))
    assert kinds(decisions) == ["allow", "allow", "allow", "deny"]  # exactly 5 in all
    assert "max_tool_calls=5" in decisions[3].reason
    # denied calls take no slot: an unknown tool in the middle leaves room for the next
    batch = [ToolCall(name="nope", id="x"), *calc_calls(3)]
    assert kinds(enforcer.preflight(batch, TOOLS, ledger=GuardLedger(calls_made=3))) == [
        "deny",
        "allow",
        "allow",
        "deny",
    ]


def test_counts_from_the_ledger_survive_batches_and_restore() -> None:
    enforcer = GuardEnforcer.from_guard_constraints(GuardConstraints(max_tool_calls=3))
    first = enforcer.preflight(calc_calls(2), TOOLS)
    ran = [c.name for c, d in zip(calc_calls(2), first, strict=True) if d.allowed]
    ledger = GuardLedger().after(ran, 0.0)
    assert ledger.calls_made == 2
    saved = ledger.model_dump_json()

    restored = GuardEnforcer.from_guard_constraints(GuardConstraints(max_tool_calls=3))
    again = GuardLedger.of(json.loads(saved))
    assert kinds(restored.preflight(calc_calls(2), TOOLS, ledger=again)) == ["allow", "deny"]
    assert kinds(restored.preflight(calc_calls(2), TOOLS)) == ["allow", "allow"]  # a new run


def test_rate_limit_over_batches_with_a_fake_clock() -> None:
    now = [100.0]
    guard = GuardConstraints(rate_limits={"calc": 2})
    enforcer = GuardEnforcer.from_guard_constraints(guard, clock=lambda: now[0])
    assert kinds(enforcer.preflight(calc_calls(3), TOOLS)) == ["allow", "allow", "deny"]
    ledger = GuardLedger().after(["calc", "calc"], now[0])
    now[0] = 159.0
    assert kinds(enforcer.preflight(calc_calls(1), TOOLS, ledger=ledger)) == ["deny"]
    now[0] = 160.5
    assert kinds(enforcer.preflight(calc_calls(1), TOOLS, ledger=ledger)) == ["allow"]
    recent = GuardLedger(call_times={"calc": (160, 160)})
    assert kinds(enforcer.preflight(calc_calls(1), TOOLS, ledger=recent)) == ["deny"]


def test_ledger_forgets_old_times() -> None:
    ledger = GuardLedger().after(["A", "b"], at=0.0).after(["a"], at=61.0)
    assert ledger.calls_made == 3 and ledger.call_times == {"a": (61.0,)}
    untimed = ledger.after(["c"], at=62.0, timed=False)
    assert untimed.calls_made == 4 and "c" not in untimed.call_times


def test_bad_constraints_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid tool rule"):
        GuardEnforcer.from_guard_constraints(GuardConstraints(tool_policy={"bash()": "deny"}))


def _real(fake: FakeTool) -> Tool:
    """A real tool with the fake's name, permission and category (visible_tools returns a
    ToolSet, which holds real tools)."""

    def run(**kwargs: Any) -> str:
        return "ok"

    permission = fake.permission if fake.permission != "auto" or fake.category != "dangerous" \
        else "user_confirm"
    return tool(run, name=fake.name, description="A tool.", category=fake.category,  # type: ignore[arg-type]
                permission=permission)  # type: ignore[arg-type]


def test_visible_tools_hide_plain_deny() -> None:
    admin = FakeTool(name="drop", permission="admin_only")
    tools = ToolSet.from_tools(_real(t) for t in (CALC, bash(), write_file(), admin))
    guard = GuardConstraints(tool_policy={"bash": "deny", "write_file(path:/etc/*)": "deny"})
    layer = Constraints(guard=guard)
    assert visible_tools(tools, None, layer).names() == ["calc", "write_file", "drop"]
    dev = RunContext(user_roles=frozenset({"dev"}))
    assert visible_tools(tools, dev, layer).names() == ["calc", "write_file"]
    admin_run = RunContext(user_roles=frozenset({"admin"}), constraints=layer)
    assert visible_tools(tools, admin_run).names() == ["calc", "write_file", "drop"]
    closed = Constraints(guard=GuardConstraints(default_policy="deny",
                                                tool_policy={"calc": "allow"}))
    assert visible_tools(list(tools), None, closed).names() == ["calc"]
    assert is_denied("bash", guard) and not is_denied(CALC, guard)  # type: ignore[arg-type]


def test_public_names() -> None:
    import jianmu.guard as guard
    from jianmu.guard import checkers, enforcer

    for module in (guard, checkers, enforcer):
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
    exported = {n for n in dir(guard) if not n.startswith("_") and n[0].isupper()}
    assert exported <= set(guard.__all__)


def test_visible_tools_and_is_denied_hide_a_tool_denied_by_its_alias() -> None:
    fakes = [FakeTool(name="read_file"), FakeTool(name="duckduckgo_search"), CALC]
    guard = GuardConstraints(tool_policy={"file_read": "deny", "web_search": "deny"})
    tools = [_real(t) for t in fakes]
    assert visible_tools(tools, None, Constraints(guard=guard)).names() == ["calc"]
    assert is_denied("read_file", guard) and is_denied(tools[1], guard)


def test_the_guard_builds_its_own_checkers_as_the_plugin_table_names_them() -> None:
    """The built-in names need no plug-in look-up, yet stand for what `jianmu.plugins` says."""
    from jianmu import plugins
    from jianmu.constraints import DEFAULT_CHECKERS
    from jianmu.guard.enforcer import BUILTIN_CHECKERS, build_chain, builtin_chain

    assert tuple(BUILTIN_CHECKERS) == DEFAULT_CHECKERS == tuple(plugins.BUILTINS["checker"])
    for name, cls in BUILTIN_CHECKERS.items():
        assert plugins.resolve("checker", name) is cls
    chain = build_chain(GuardConstraints())
    assert [type(c) for c in chain] == list(BUILTIN_CHECKERS.values())
    assert builtin_chain(GuardConstraints())
    assert builtin_chain(GuardConstraints(checkers=["policy", "confirm"]))


def test_a_registered_replacement_of_a_built_in_checker_is_built_instead() -> None:
    from jianmu import plugins
    from jianmu.guard import BudgetChecker
    from jianmu.guard.enforcer import build_chain, builtin_chain

    class Stricter(BudgetChecker):
        """Stands in for the built-in budget checker."""

    with plugins.registered("checker", "budget", Stricter):
        assert not builtin_chain(GuardConstraints())
        assert any(type(c) is Stricter for c in build_chain(GuardConstraints()))
        assert plugins.ADDED["checker"]["budget"] is Stricter
    assert "budget" not in plugins.ADDED["checker"]
    assert builtin_chain(GuardConstraints())
    assert not any(type(c) is Stricter for c in build_chain(GuardConstraints()))


def test_a_shared_chain_remembers_a_bounded_number_of_tool_names() -> None:
    # the chain of the runs under the shared defaults lives as long as the process: tools made
    # per request (fresh names each time) and names the model makes up must not pile up in it
    enforcer = GuardEnforcer.from_guard_constraints(GuardConstraints(rate_limits={"search": 5}))
    for i in range(10_000):
        assert not enforcer.rate_limited(f"tool_{i}")
        assert enforcer.rate_limited("search")
    assert len(enforcer._rate_limited) <= 4096
