"""What a guard checker is: the `GuardChecker` protocol, `BaseChecker`, `CheckerSetup`, and
`build_chain`, which builds the chain that ``guard.checkers`` names through `jianmu.plugins`.

A checker receives the `GuardContext` of one call and the decision of the checkers before it,
and returns the new decision: ``previous`` when it has nothing to add. `GuardEnforcer` runs
the chain in order: DENY ends it, CONFIRM goes on (a later checker may still deny; the
``confirm`` checker asks a person), and PENDING suspends the run once the batch is checked.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, Self, runtime_checkable

from jianmu import plugins
from jianmu.constraints import DEFAULT_CHECKERS, GuardConstraints
from jianmu.errors import ConfigError
from jianmu.guard.decision import Decision, GuardContext, PolicyTarget
from jianmu.tools.names import builtin_aliases, is_tool_name, shown_name

__all__ = ("BaseChecker", "CheckerSetup", "GuardChecker", "build_chain", "tool_permission")


@runtime_checkable
class GuardChecker(Protocol):
    """One link of the guard chain."""

    name: str
    """Shown as `Decision.checker`."""

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Return the decision after this checker: ``previous`` when it has nothing to add."""
        ...


@dataclass(frozen=True, kw_only=True)
class CheckerSetup:
    """What a checker is built from for a run; its class's ``from_setup`` receives it."""

    guard: GuardConstraints
    """The run's merged guard constraints."""
    clock: Callable[[], float] | None = None
    """The time source of rate limits; `time.time` when ``None``."""
    workspace: str | os.PathLike[str] | None = None
    """The workspace root that path arguments resolve against, if the caller knows it."""


class BaseChecker:
    """A base for checkers: ``name`` defaults to the class name and `from_setup` builds one
    with no arguments. Subclasses implement `check`; one that reads the guard's settings
    overrides `from_setup`.
    """

    name: str = "BaseChecker"
    """Shown as `Decision.checker`; the class name unless a subclass sets it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__

    @classmethod
    def from_setup(cls, setup: CheckerSetup) -> Self:
        """Build the checker for a run (`build_chain` calls it); by default ``cls()``."""
        return cls()

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        """Return the decision after this checker: ``previous`` when it has nothing to add."""
        raise NotImplementedError(f"{type(self).__name__} must implement check()")


def build_chain(
    guard: GuardConstraints,
    *,
    clock: Callable[[], float] | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> tuple[GuardChecker, ...]:
    """The checkers that ``guard.checkers`` names (default `DEFAULT_CHECKERS`), in order.

    Each name is resolved through `jianmu.plugins` and built by its class's
    ``from_setup(CheckerSetup(guard=..., clock=..., workspace=...))``.

    Raises:
        ConfigError: a name is not registered, its class cannot be imported, or it does not
            build a `GuardChecker`; a checker refuses its settings.
    """
    setup = CheckerSetup(guard=guard, clock=clock, workspace=workspace)
    chain: list[GuardChecker] = []
    for name in guard.checkers if guard.checkers is not None else DEFAULT_CHECKERS:
        checker = plugins.resolve("checker", name).from_setup(setup)
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


def tool_permission(tool: PolicyTarget | None) -> str:
    """The tool's ``permission`` as a lower-case string (enum values too); ``auto`` if unset."""
    value: object = tool.permission if tool is not None else None
    value = getattr(value, "value", value)  # an enum's value
    return str(value).lower() if value else "auto"


def _alias_groups() -> dict[str, frozenset[str]]:
    """Each built-in name and alias -> every name of that tool (``file_read``, ``read_file``)."""
    groups: dict[str, set[str]] = {}
    for alias, target in builtin_aliases().items():
        groups.setdefault(target, {target}).add(alias)
    return {name: frozenset(group) for group in groups.values() for name in group}


def _check_rule_name(where: str, key: str, name: str) -> None:
    """Refuse a rule for a name no tool can have: it would match nothing, silently."""
    if not is_tool_name(name):
        raise ConfigError(
            f"{where}[{key!r}] names tool {shown_name(name)!r}, which is not a tool name: tool "
            "names are ASCII letters, digits, '_' and '-' (at most 64); write the tool's name "
            "as it is registered"
        )

