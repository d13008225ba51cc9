"""The guard: decides whether each tool call may run, must be confirmed, or is refused."""

from __future__ import annotations

from jianmu.guard._rules import Rule, parse_rule
from jianmu.guard.checkers import (
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
)
from jianmu.guard.enforcer import (
    GuardEnforcer,
    ToolPolicyChecker,
    build_chain,
    is_denied,
    visible_tools,
)

__all__ = (
    "BaseChecker",
    "BudgetChecker",
    "CheckerSetup",
    "ConfirmChecker",
    "Decision",
    "DecisionKind",
    "GuardChecker",
    "GuardContext",
    "GuardEnforcer",
    "GuardLedger",
    "PolicyTarget",
    "RateLimitChecker",
    "Rule",
    "ToolPolicyChecker",
    "build_chain",
    "is_denied",
    "parse_rule",
    "visible_tools",
)
