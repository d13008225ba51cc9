"""Constraints on a run: the guard's rules, the execution sandbox and loop limits, and their merge.

Every field is optional: ``None`` means "this layer does not say". Layers are merged from the
farthest (``configs/jianmu.yaml``) to the nearest (a SKILL.md). A nearer layer may tighten a
safety field and never loosen it (DESIGN.md, "Constraints"):

- numeric limits take the smallest value set;
- a tool's policy takes the strictest (deny > confirm > allow) over every layer, where a layer
  that does not name the tool contributes its ``default_policy``;
- ``execution.network: false`` anywhere wins;
- ``execution.mode: docker`` anywhere wins (a layer cannot move code out of the container),
  and ``docker_image`` is the farthest layer's that sets one (a skill cannot swap the image);
- ``execution.workdir`` may only narrow: a nearer layer's folder must lie inside the farther
  one's (a relative path is taken from it), else `ConfigError`.

DESIGN.md calls ``mode`` and ``docker_image`` non-safety fields; they are held here too, since
a SKILL.md that could switch docker to local, or pick another image, would loosen isolation.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jianmu.errors import ConfigError

__all__ = (
    "POLICY_RANK",
    "BudgetConstraints",
    "Constraints",
    "ExecutionConstraints",
    "GuardConstraints",
    "Policy",
    "stricter_policy",
)

Policy = Literal["allow", "confirm", "deny"]
"""What the guard does with a tool call: run it, ask first, or refuse it."""

POLICY_RANK: dict[str, int] = {"allow": 0, "confirm": 1, "deny": 2}
"""How strict each policy is; the merge keeps the highest."""

_M = TypeVar("_M", bound=BaseModel)


def stricter_policy(*policies: Policy | None) -> Policy | None:
    """Return the strictest of the given policies, ignoring ``None``."""
    given = [p for p in policies if p is not None]
    if not given:
        return None
    return max(given, key=POLICY_RANK.__getitem__)


def _min(values: Iterable[Any]) -> Any:
    given = [v for v in values if v is not None]
    return min(given) if given else None


def _first(values: Iterable[Any]) -> Any:
    return next((v for v in values if v is not None), None)


def _narrowed_workdir(values: Iterable[str | None]) -> str | None:
    """The nearest workdir, each layer's inside the farther one's (relative ones joined)."""
    result: str | None = None
    for value in values:
        if value is None:
            continue
        if result is None:
            result = value
            continue
        outer = os.path.realpath(result)
        inner = os.path.realpath(os.path.join(outer, os.path.expanduser(value)))
        if os.path.commonpath([outer, inner]) != outer:
            raise ConfigError(
                f"execution.workdir {value!r} is outside the workspace {result!r} that an "
                "outer layer (the config or the node) set; a nearer layer may only pick a "
                "folder inside it"
            )
        result = inner
    return result


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class BudgetConstraints(_Strict):
    """Token budget of a run."""

    total_tokens: int | None = Field(default=None, ge=0)
    """Input plus output tokens the run may spend; the guard denies calls past it."""


class GuardConstraints(_Strict):
    """The guard's rules: tool policies, call limits and the token budget."""

    tool_policy: dict[str, Policy] = Field(default_factory=dict)
    """Tool name, or an argument rule such as ``bash(git status*)``, to its policy."""
    default_policy: Policy | None = None
    """Policy of tools that no rule names; unset means each tool's own permission decides."""
    max_tool_calls: int | None = Field(default=None, ge=0)
    """Tool calls allowed in one run, counted over whole batches."""
    budget: BudgetConstraints = Field(default_factory=BudgetConstraints)
    """The token budget."""
    rate_limits: dict[str, int] = Field(default_factory=dict)
    """Tool name to calls allowed per minute."""

    @field_validator("tool_policy", mode="before")
    @classmethod
    def _lower_policies(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: v.lower() if isinstance(v, str) else v for k, v in value.items()}
        return value

    def policy_for(self, key: str) -> Policy | None:
        """This layer's policy for a rule key: the explicit rule, else ``default_policy``."""
        return self.tool_policy.get(key, self.default_policy)

    @classmethod
    def merge(cls, *layers: GuardConstraints | None) -> GuardConstraints:
        """Merge layers, farthest first; see the module docstring for the rule."""
        present = [g for g in layers if g is not None]
        keys: list[str] = []
        for g in present:
            keys.extend(k for k in g.tool_policy if k not in keys)
        policies = {
            k: p for k in keys if (p := stricter_policy(*(g.policy_for(k) for g in present)))
        }
        rate_keys = {k for g in present for k in g.rate_limits}
        return cls(
            tool_policy=policies,
            default_policy=stricter_policy(*(g.default_policy for g in present)),
            max_tool_calls=_min(g.max_tool_calls for g in present),
            budget=BudgetConstraints(
                total_tokens=_min(g.budget.total_tokens for g in present)
            ),
            rate_limits={
                k: _min(g.rate_limits.get(k) for g in present) for k in sorted(rate_keys)
            },
        )


class ExecutionConstraints(_Strict):
    """Where and under which limits tools that run code execute."""

    mode: Literal["local", "docker"] | None = None
    """``local`` (a child process, bubblewrap where installed) or ``docker``; unset is local.
    ``docker`` in any layer wins."""
    docker_image: str | None = None
    """Image for docker mode; unset is ``jianmu-sandbox:latest``; the farthest layer's wins."""
    network: bool | None = None
    """Whether sandboxed code may use the network; ``false`` in any layer wins."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Upper bound on one tool call, in seconds."""
    memory_mb: int | None = Field(default=None, gt=0)
    """Memory limit of sandboxed code, in MiB."""
    cpus: float | None = Field(default=None, gt=0)
    """CPU share of sandboxed code."""
    pids: int | None = Field(default=None, gt=0)
    """Process limit of sandboxed code."""
    workdir: str | None = None
    """Workspace root for file tools and sandboxes; unset is the current folder. A nearer
    layer may only choose a folder inside the farther one's."""

    @classmethod
    def merge(cls, *layers: ExecutionConstraints | None) -> ExecutionConstraints:
        """Merge layers, farthest first; see the module docstring for the rule."""
        present = [e for e in layers if e is not None]
        networks = [e.network for e in present if e.network is not None]
        modes = [e.mode for e in present if e.mode is not None]
        return cls(
            mode="docker" if "docker" in modes else _first(modes),
            docker_image=_first(e.docker_image for e in present),
            network=(False if False in networks else (networks[-1] if networks else None)),
            timeout_s=_min(e.timeout_s for e in present),
            memory_mb=_min(e.memory_mb for e in present),
            cpus=_min(e.cpus for e in present),
            pids=_min(e.pids for e in present),
            workdir=_narrowed_workdir(e.workdir for e in present),
        )


class Constraints(_Strict):
    """Everything that limits a run: guard, execution and loop limits."""

    guard: GuardConstraints = Field(default_factory=GuardConstraints)
    """The guard's rules."""
    execution: ExecutionConstraints = Field(default_factory=ExecutionConstraints)
    """The sandbox and its limits."""
    max_iterations: int | None = Field(default=None, ge=1)
    """Rounds of model → tools an agent loop may take."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds a whole run or skill may take."""
    max_messages: int | None = Field(default=None, ge=1)
    """Most recent messages sent to the model."""

    @classmethod
    def merge(cls, *layers: Constraints | None) -> Constraints:
        """Merge layers, farthest (config) first, nearest (SKILL.md) last.

        A nearer layer may tighten a safety field, never loosen it.
        """
        present = [c for c in layers if c is not None]
        return cls(
            guard=GuardConstraints.merge(*(c.guard for c in present)),
            execution=ExecutionConstraints.merge(*(c.execution for c in present)),
            max_iterations=_min(c.max_iterations for c in present),
            timeout=_min(c.timeout for c in present),
            max_messages=_min(c.max_messages for c in present),
        )
