"""Redirects a tool is told to follow (`jianmu.execution.runner.redirect_refusal`): each is
checked as the call itself was, so an approval of one URL never lets the call go on to another."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from jianmu.constraints import POLICY_RANK
from jianmu.execution.runner import RedirectCheck
from jianmu.guard import GuardEnforcer
from jianmu.guard.enforcer import ToolPolicyChecker
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolCall

__all__ = ("executor_refusal", "redirect_check")


def redirect_check(enforcer: GuardEnforcer, call: ToolCall, tool: Tool) -> RedirectCheck:
    """What a tool that follows redirects asks (`redirect_refusal`) while ``call`` runs."""
    return functools.partial(_refusal, enforcer, call, tool)


def executor_refusal(
    executor: Any, call: ToolCall, tool: Tool, argument: str, url: str
) -> str | None:
    """`_refusal` under a `ToolExecutor`'s guard, looked up when a tool asks."""
    enforcer = executor._guard(executor.effective_constraints)
    return _refusal(enforcer, call, tool, argument, url)


def _refusal(
    enforcer: GuardEnforcer, call: ToolCall, tool: Tool, argument: str, url: str
) -> str | None:
    """Why the tool policy refuses that ``call`` be sent on to ``url`` (a redirect), if it
    does: the policy for the call with ``argument`` set to ``url`` is stricter than for the
    call as it was admitted (a person who approved one URL did not see the other)."""
    policy = next((c for c in enforcer.checkers if isinstance(c, ToolPolicyChecker)), None)
    if policy is None or not isinstance(call.arguments, dict):
        return None
    moved = dataclasses.replace(call, arguments={**call.arguments, argument: url})
    spec = tool.tool_spec
    admitted, _, _ = policy.resolve(call, spec)
    verdict, reason, _ = policy.resolve(moved, spec)
    return reason if POLICY_RANK[verdict] > POLICY_RANK[admitted] else None
