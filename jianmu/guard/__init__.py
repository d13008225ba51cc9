"""The guard: decides whether each tool call may run, must be confirmed, or is refused."""

from __future__ import annotations

from jianmu.guard._rules import Rule, parse_rule
from jianmu.guard.checker import BaseChecker, CheckerSetup, GuardChecker, build_chain
from jianmu.guard.checkers import BudgetChecker, ConfirmChecker, RateLimitChecker
from jianmu.guard.decision import Decision, DecisionKind, GuardContext, PolicyTarget
from jianmu.guard.enforcer import GuardEnforcer
from jianmu.guard.ledger import GuardLedger
from jianmu.guard.policy import ToolPolicyChecker
from jianmu.guard.visibility import is_denied, visible_tools

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
