"""`visible_tools`: the one place that decides which tools a model may see."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from jianmu.constraints import Constraints, GuardConstraints
from jianmu.guard.checkers import ToolPolicyChecker
from jianmu.runtime.context import RunContext
from jianmu.tools.base import Tool
from jianmu.tools.registry import ToolSet

__all__ = ("is_denied", "visible_tools")


@lru_cache(maxsize=64)
def _policy(guard_json: str) -> ToolPolicyChecker:
    # one parse of the rules per distinct guard: the model's tools are filtered every turn
    guard = GuardConstraints.model_validate_json(guard_json)
    return ToolPolicyChecker.from_guard_constraints(guard)


def _policy_for(guard: GuardConstraints | None) -> ToolPolicyChecker:
    return _policy((guard or GuardConstraints()).model_dump_json())


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
