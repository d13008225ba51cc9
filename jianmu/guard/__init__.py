"""The guard: decides whether each tool call may run, must be confirmed, or is refused.

Its names load on first use (module ``__getattr__``): importing one imports only the module
that holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu._lazy import lazy_names

if TYPE_CHECKING:
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
    from jianmu.guard.guardrails import Guardrail, PromptInjectionGuardrail, Tripwire

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
    "Guardrail",
    "PolicyTarget",
    "PromptInjectionGuardrail",
    "RateLimitChecker",
    "Rule",
    "ToolPolicyChecker",
    "Tripwire",
    "build_chain",
    "is_denied",
    "parse_rule",
    "visible_tools",
)

_HOLDERS = {
    "jianmu.guard._rules": ("Rule", "parse_rule"),
    "jianmu.guard.checkers": (
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
    ),
    "jianmu.guard.enforcer": (
        "GuardEnforcer",
        "ToolPolicyChecker",
        "build_chain",
        "is_denied",
        "visible_tools",
    ),
    "jianmu.guard.guardrails": ("Guardrail", "PromptInjectionGuardrail", "Tripwire"),
}
__getattr__, __dir__ = lazy_names(__name__, _HOLDERS, __all__)
