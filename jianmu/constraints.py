"""Constraints on a run: the guard's rules, the execution sandbox and loop limits, and their merge.

Every field is optional: ``None`` means "this layer does not say". Layers are merged from the
farthest (``configs/jianmu.yaml``) to the nearest (a SKILL.md).

Two kinds of layer. An operator layer (`Constraints`: the config, a node's config, a caller's
layer, all written by whoever runs Jianmu) may set anything; among operator layers a nearer one
only tightens:

- numeric limits take the smallest value set;
- a tool's policy takes the strictest (deny > confirm > allow) over every layer, where a layer
  that does not name the tool contributes its ``default_policy``;
- ``execution.network: false`` anywhere wins, else the nearest layer that sets it;
- ``execution.mode``: the most isolating mode set anywhere wins (its sandbox class's
  ``isolation_rank``: ``docker`` over ``local``; the farthest among equals), and
  ``docker_image`` is the farthest layer's;
- ``guard.checkers``: every checker any layer names runs, farthest layer's first, a nearer
  layer's additions after them; a layer can add checkers but not drop one (a farthest layer
  that names none runs `DEFAULT_CHECKERS`, which a nearer list adds to);
- ``guard.guardrails`` (``input``, ``output``, ``tool_output``): likewise, every guardrail any
  layer names runs, farthest first, none twice; a layer (a skill's too) can add, never drop;
- ``execution.workdir`` may only narrow: a nearer layer's folder must lie inside the farther
  one's (a relative path is taken from it), else `ConfigError`;
- ``execution.read_only_paths``: every path any layer lists is read-only (unset everywhere is
  `DEFAULT_READ_ONLY_PATHS`, and a farthest layer that sets none stands for it, so a nearer
  list adds to it); a skill layer can add paths, never drop one.

A skill layer (`SkillConstraints`: a SKILL.md, a skill's tree) is untrusted and may only
tighten what would really apply, so it is measured against the operator layers below it with
the built-in defaults filling what they leave unset (`SANDBOX_DEFAULTS`, `DEFAULT_IMAGE`,
`DEFAULT_MAX_ITERATIONS`, `DEFAULT_CHECKERS`, the run's working folder, network off): it cannot
turn the network on, raise a limit past the default, choose the image, move to a sandbox that
isolates no more (leave Docker), drop a guard checker, pick a workdir outside the effective
one, allow a tool or set ``default_policy: allow``.

Sandbox modes and guard checkers are plug-ins (`jianmu.plugins`): ``mode`` and ``checkers``
name registered ones, and a plug-in sandbox takes part in the merge through its class's
``isolation_rank`` (its limits default to local's, `SANDBOX_DEFAULTS`).

A team member's layer (`MemberConstraints`, or any layer merged over a `CallerConstraints`: the
own layer of an agent run as another's tool or handed a conversation, its ``Agent`` config's)
is an author's, merged by the operator rules, but it may not loosen its caller's effective
constraints: every call is also decided by the caller's guard alone (`GuardConstraints.floors`:
an ``allow`` of the member's never skips a confirmation the caller would ask for), and its
sandbox keeps the caller's network and the caller's limits (else the defaults) as ceilings.

A merged ``network`` keeps "unset" apart from ``false``: the sandbox treats unset as off, while
in-process network tools (``http_request``) are refused only by an explicit ``false``.
"""

from __future__ import annotations

import copy
import os
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from jianmu import plugins
from jianmu.errors import ConfigError
from jianmu.plugins import DEFAULT_CHECKERS

__all__ = (
    "DEFAULT_CHECKERS",
    "DEFAULT_GUARDRAIL_TIMEOUT_S",
    "DEFAULT_IMAGE",
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_READ_ONLY_PATHS",
    "DEFAULT_TIMEOUT_S",
    "DOCKER_CPUS",
    "DOCKER_MEMORY_MB",
    "DOCKER_PIDS",
    "LOCAL_MEMORY_MB",
    "LOCAL_PIDS",
    "POLICY_RANK",
    "SANDBOX_DEFAULTS",
    "BlankIsUnset",
    "BudgetConstraints",
    "CallerConstraints",
    "Constraints",
    "ExecutionConstraints",
    "GuardConstraints",
    "GuardrailConstraints",
    "MemberConstraints",
    "Policy",
    "SandboxDefaults",
    "SkillConstraints",
    "Switch",
    "is_read_only",
    "lowered",
    "once_per_read_only",
    "read_only",
    "read_only_path",
    "stricter_policy",
)

Policy = Literal["allow", "confirm", "deny"]
"""What the guard does with a tool call: run it, ask first, or refuse it."""

def lowered(value: Any) -> Any:
    """A word of a setting in any case (``Deny``, ``DENY``) as the lower-case one it names;
    a word outside the allowed ones is still refused, with them named."""
    return value.strip().lower() if isinstance(value, str) else value


def _switch(value: Any) -> Any:
    """``true`` or ``false``, as YAML writes them or as text (a ``${VAR}``), and nothing else:
    pydantic's lenient ``"on"``, ``"y"``, ``1`` would turn a safety switch without a word."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("must be true or false")


Switch = Annotated[bool, BeforeValidator(_switch)]
"""A setting that is on or off: ``true`` or ``false`` only (any case)."""

_PolicySetting = Annotated[Policy, BeforeValidator(lowered)]

POLICY_RANK: dict[str, int] = {p: rank for rank, p in enumerate(("allow", "confirm", "deny"))}
"""How strict each policy is; the merge keeps the highest."""

DEFAULT_IMAGE = "jianmu-sandbox:latest"
"""The Docker image when no operator layer names one (what `jianmu sandbox build-image` builds)."""

DEFAULT_TIMEOUT_S = 60.0
"""A sandboxed command's timeout when no layer sets ``execution.timeout_s``."""

DEFAULT_GUARDRAIL_TIMEOUT_S = 60.0
"""Seconds a guardrail may take when no layer sets ``guard.guardrails.timeout_s``; one that
takes longer trips (fail closed)."""

DEFAULT_MAX_ITERATIONS = 10
"""Agent-loop rounds when no layer sets ``max_iterations``."""

DOCKER_MEMORY_MB = 512
"""A container's memory limit (and memory plus swap) when no layer sets one, in MiB."""
DOCKER_CPUS = 1.0
"""A container's CPU share when no layer sets one."""
DOCKER_PIDS = 256
"""A container's process limit when no layer sets one."""
LOCAL_MEMORY_MB = 1024
"""A local sandbox's memory limit when no layer sets one, in MiB (with a memory control group
only: see `LocalSandbox`)."""
LOCAL_PIDS = 256
"""A local sandbox command's process limit when no layer sets one (a fork bomb stops there)."""

DEFAULT_READ_ONLY_PATHS: tuple[str, ...] = (
    ".git", "jianmu.yaml", "configs/jianmu.yaml", "skills", ".venv", ".vscode")
"""Workspace paths sandboxed code sees read-only when no layer sets
``execution.read_only_paths``: what runs on the host, outside any sandbox, once changed. Git
runs hooks and commands named in ``.git/config`` (``core.fsmonitor``, aliases,
``core.hooksPath``); the next run loads the config Jianmu finds in its folder (MCP servers it
starts, the model's address, the guard's rules) and the ``skills/`` it scans (a BT skill's
``tree.py`` is imported in the engine's process); the user sources ``.venv/bin/activate`` and
runs its Python (a ``.pth`` file in it runs at each start); the editor runs what
``.vscode`` names (tasks, the interpreter to use)."""


@dataclass(frozen=True)
class SandboxDefaults:
    """The limits a sandbox applies when no layer sets them (``None``: no limit)."""

    timeout_s: float
    memory_mb: int | None
    cpus: float | None
    pids: int | None


SANDBOX_DEFAULTS: dict[str, SandboxDefaults] = {
    # a local child process is bounded like a container, but shares the host's CPUs
    "local": SandboxDefaults(
        timeout_s=DEFAULT_TIMEOUT_S, memory_mb=LOCAL_MEMORY_MB, cpus=None, pids=LOCAL_PIDS
    ),
    "docker": SandboxDefaults(
        timeout_s=DEFAULT_TIMEOUT_S, memory_mb=DOCKER_MEMORY_MB, cpus=DOCKER_CPUS, pids=DOCKER_PIDS
    ),
}
"""Each execution mode's default limits; `LocalSandbox` and `DockerSandbox` use them too."""

_M = TypeVar("_M", bound=BaseModel)


def _rule_identity(key: str) -> tuple[str, str]:
    """A ``tool_policy`` key as the rule it is: the tool's name in lower case (names compare
    so), and its argument pattern, ``*`` being none."""
    name, paren, rest = key.partition("(")
    inner = rest.rstrip().removesuffix(")").strip() if paren else ""
    return name.strip().lower(), "" if inner == "*" else inner


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


def _isolation_rank(mode: str) -> int:
    """How strongly ``mode``'s sandbox isolates: its class's ``isolation_rank``.

    Raises:
        ConfigError: the mode is not registered, or its rank is not an integer.
    """
    rank = plugins.resolve("sandbox", mode).isolation_rank
    if not isinstance(rank, int) or isinstance(rank, bool):
        raise ConfigError(f"sandbox {mode!r}: isolation_rank is {rank!r}; make it an integer")
    return rank


def _strictest_mode(modes: Iterable[str | None]) -> str | None:
    """The most isolating mode set, the farthest among equals; ``None`` if none is set."""
    given = [m for m in modes if m is not None]
    if len(set(given)) <= 1:
        return _first(given)  # one mode: no sandbox class needs importing
    return max(given, key=_isolation_rank)  # max keeps the first of equals


def _registered(kind: plugins.PluginKind, where: str, value: str) -> str:
    """``value`` if it names a registered plug-in of ``kind``, else a `ConfigError`."""
    if not plugins.is_registered(kind, value):
        raise ConfigError(f"{where}: {plugins.unknown_name_message(kind, value)}")
    return value


def read_only_path(path: str) -> str:
    """``path`` as a normalized path inside the workspace (``execution.read_only_paths``).

    Raises:
        ValueError: an absolute path, one that leaves the workspace (``..``), the
            workspace itself, or one no file can have (a NUL).
    """
    if not isinstance(path, str):
        raise ValueError(f"a read-only path is a string, got {path!r}")
    norm = os.path.normpath(path.replace("\\", "/"))
    if (os.path.isabs(norm) or norm in (".", "..") or norm.startswith("../")
            or "\0" in norm):
        raise ValueError(
            f"read-only path {path!r} must name something inside the workspace, relative to "
            "it (such as .git or .envrc)"
        )
    return norm


def _united(lists: Iterable[list[str] | None]) -> list[str] | None:
    """Every name of the lists set, in first-seen order; ``None`` if no list is set."""
    given = [names for names in lists if names is not None]
    if not given:
        return None
    return list(dict.fromkeys(name for names in given for name in names))


def _chain(lists: list[list[str] | None], default: Iterable[str]) -> list[str] | None:
    """A merged list that layers only add to: a farthest layer that sets none stands for
    ``default`` (a node naming only its own checker, or one more read-only path, must not drop
    the default chain or the default protected paths)."""
    if lists and lists[0] is None and any(names is not None for names in lists):
        lists = [list(default), *lists[1:]]
    return _united(lists)


def _capped(value: Any, own: Any, default: Any = None) -> Any:
    """A skill's ``value`` no looser than ``own`` (a farther layer's), else ``default``.

    Unset stays ``own``; ``None`` as the limit means there is none.
    """
    if value is None:
        return own
    limit = default if own is None else own
    return value if limit is None else min(value, limit)


_IMMUTABLE = (str, int, float, bool, type(None))


def _detached(value: Any) -> Any:
    """A deep copy of a constraints value, as ``copy.deepcopy`` makes one (models keep their
    class and set fields), without its generic walk: every run copies its layers."""
    if isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, BaseModel):
        copied = copy.copy(value)  # the model's own shallow copy: class, set fields, extras
        values = copied.__dict__
        for key, item in values.items():
            if not isinstance(item, _IMMUTABLE):
                values[key] = _detached(item)
        return copied
    if type(value) is dict:
        return {k: _detached(v) for k, v in value.items()}
    if type(value) is list:
        return [_detached(v) for v in value]
    return copy.deepcopy(value)


_READ_ONLY: dict[int, BaseModel] = {}
"""Models made read-only (`read_only`), by id; held here for good, so no id is reused."""
_READ_ONLY_MESSAGE = (
    "this is a shared, read-only default (every run given no configuration or constraints "
    "reads it); pass your own instead, e.g. ReactiveRunner(..., config=AppConfig(...)), or "
    "change a copy: model_copy(deep=True)"
)


class _ReadOnlyDict(dict):  # type: ignore[type-arg]
    """A read-only model's dict: it cannot change; a copy of it is a plain dict."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise ConfigError(_READ_ONLY_MESSAGE)

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class _ReadOnlyList(list):  # type: ignore[type-arg]
    """A read-only model's list: it cannot change; a copy of it is a plain list."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise ConfigError(_READ_ONLY_MESSAGE)

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self) -> Any:
        return (list, (list(self),))


def read_only(model: _M) -> _M:
    """Make ``model``, its nested models and its dicts and lists read-only, and return it.

    For a default that many runs share (`jianmu.config.default_config`, a run's constraints
    when nobody gave any): setting a field of a settings model (`BlankIsUnset`) or changing
    one of its dicts or lists raises `ConfigError`, so no run can change what another reads.
    A copy (``model_copy(deep=True)``, `copy.deepcopy`, `Constraints.merge`) is a plain model
    that may change.
    """
    values = model.__dict__
    for key, value in list(values.items()):
        values[key] = _read_only_value(value)
    _READ_ONLY[id(model)] = model
    return model


def is_read_only(model: BaseModel) -> bool:
    """Whether `read_only` made ``model`` read-only."""
    return id(model) in _READ_ONLY


_T = TypeVar("_T")


def once_per_read_only(model: _M, kept: dict[int, _T], make: Callable[[_M], _T]) -> _T:
    """``make(model)``, worked out once per read-only ``model`` and kept in ``kept`` (a
    read-only model lives for good and never changes, so its id stays its own); any other
    model may change, so its is worked out anew on every call."""
    if not is_read_only(model):
        return make(model)
    found = kept.get(id(model))
    if found is None:
        found = kept[id(model)] = make(model)
    return found


def _read_only_value(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return read_only(value)
    if type(value) is dict:
        return _ReadOnlyDict({k: _read_only_value(v) for k, v in value.items()})
    if type(value) is list:
        return _ReadOnlyList(_read_only_value(v) for v in value)
    return value


class BlankIsUnset(BaseModel):
    """A settings model where a blank string means "not set" for every field that may be left
    out (it has a default, or accepts ``None``).

    ``${VAR:-}`` in a config file gives ``""`` when the variable is unset, and a person may write
    ``key: ""`` for the same: either way the field takes its default, as if it were absent. So
    does ``key:`` with no value (YAML null) for a field that has a default but no ``None``:
    a section whose lines are all commented out, say.
    """

    # Every model of the package defers its validator to its first use (pydantic's
    # ``defer_build``): importing a module that defines models builds none.
    model_config = ConfigDict(defer_build=True)

    def __setattr__(self, name: str, value: Any) -> None:
        if id(self) in _READ_ONLY:  # a shared default (`read_only`): no run may change it
            raise ConfigError(_READ_ONLY_MESSAGE)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if id(self) in _READ_ONLY:
            raise ConfigError(_READ_ONLY_MESSAGE)
        super().__delattr__(name)

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        blank = [
            key for key, value in data.items()
            if key in fields and (
                (isinstance(value, str) and not value.strip()
                 and (not fields[key].is_required() or _admits_none(fields[key].annotation)))
                or (value is None and not fields[key].is_required()
                    and not _admits_none(fields[key].annotation))
            )
        ]
        if not blank:
            return data
        return {k: v for k, v in data.items() if k not in blank}

    @field_validator("*", mode="before")
    @classmethod
    def _no_switch_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads true as 1: 'max_tool_calls: yes' or 'timeout: on' gave 1, unsaid
        field = cls.model_fields.get(info.field_name or "")
        if field is None:
            return value
        args = typing.get_args(field.annotation)
        of_a_dict = typing.get_origin(field.annotation) is dict and bool(args)
        numeric = _is_number(args[-1] if of_a_dict else field.annotation)
        values = list(value.values()) if of_a_dict and isinstance(value, dict) else [value]
        if numeric and any(isinstance(v, bool) for v in values):
            raise ValueError("must be a number, not true or false")
        return value


def _is_number(annotation: Any) -> bool:
    """Whether a field's type is a number (``int``, ``float | None``, an ``Annotated`` one)
    and no switch."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    kinds = set(typing.get_args(annotation) or (annotation,)) - {type(None)}
    return bool(kinds) and kinds <= {int, float}


def _admits_none(annotation: Any) -> bool:
    """Whether a field's type accepts ``None`` (``str | None``, ``Optional[...]``)."""
    return annotation is None or type(None) in typing.get_args(annotation)


class _Strict(BlankIsUnset):
    model_config = ConfigDict(defer_build=True, extra="forbid", validate_assignment=True)


class BudgetConstraints(_Strict):
    """Token budget of a run."""

    total_tokens: int | None = Field(default=None, ge=0)
    """Input plus output tokens the run may spend; the guard denies calls past it."""


class GuardrailConstraints(_Strict):
    """Content guardrails by kind: names of registered ``guardrail`` plug-ins
    (`jianmu.plugins`, `jianmu.guard.guardrails`). Layers only add."""

    input: list[str] | None = None
    """Guardrails of the user's messages since the model's last turn: a trip fails the run."""
    output: list[str] | None = None
    """Guardrails of the final answer (or typed output): a trip fails the run."""
    tool_output: list[str] | None = None
    """Guardrails of each tool result: a trip withholds it from the model."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Seconds each guardrail may take (its own ``timeout_s`` attribute overrides it); one that
    takes longer trips. Unset is `DEFAULT_GUARDRAIL_TIMEOUT_S`; the smallest set wins."""

    @field_validator("input", "output", "tool_output")
    @classmethod
    def _known_guardrails(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return list(dict.fromkeys(
            _registered("guardrail", "guard.guardrails", v) for v in value
        ))

    @classmethod
    def merge(cls, *layers: GuardrailConstraints | None) -> GuardrailConstraints:
        """Every name of every layer, farthest first, none twice; the shortest timeout."""
        present = [g for g in layers if g is not None]
        united: dict[str, Any] = {
            kind: names for kind in ("input", "output", "tool_output")
            if (names := _united(getattr(g, kind) for g in present)) is not None
        }
        if (timeout := _min(g.timeout_s for g in present)) is not None:
            united["timeout_s"] = timeout
        # each layer's names were checked when it was made: no validation again (every run
        # merges its layers)
        return cls.model_construct(**united)


class GuardConstraints(_Strict):
    """The guard's rules: tool policies, call limits and the token budget."""

    tool_policy: dict[str, _PolicySetting] = Field(default_factory=dict)
    """Tool name, or an argument rule such as ``bash(git status*)``, to its policy."""
    default_policy: _PolicySetting | None = None
    """Policy of tools that no rule names; unset means each tool's own permission decides."""
    max_tool_calls: int | None = Field(default=None, ge=0)
    """Tool calls allowed in one run, counted over whole batches."""
    budget: BudgetConstraints = Field(default_factory=BudgetConstraints)
    """The token budget."""
    rate_limits: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    """Tool name to calls allowed per minute."""
    checkers: list[str] | None = None
    """The guard chain, registered checker names in order (`jianmu.plugins`); unset is
    `DEFAULT_CHECKERS` (policy, rate_limit, budget, confirm). Layers only add: see the module
    docstring."""
    guardrails: GuardrailConstraints = Field(default_factory=GuardrailConstraints)
    """Content guardrails by kind (``input``, ``output``, ``tool_output``); layers only add."""
    _floors: tuple[GuardConstraints, ...] = PrivateAttr(default=())

    @property
    def floors(self) -> tuple[GuardConstraints, ...]:
        """The guards of the callers a team member runs under (`CallerConstraints`): each
        decides every call too, alone, and the strictest decision holds."""
        return self._floors

    @field_validator("checkers")
    @classmethod
    def _known_checkers(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return list(dict.fromkeys(_registered("checker", "guard.checkers", v) for v in value))

    def policy_for(self, key: str) -> Policy | None:
        """This layer's policy for a rule key: the explicit rule (written in any case or
        spacing: ``Read_File`` is ``read_file``, ``bash(*)`` is ``bash``), else
        ``default_policy``."""
        found = self.tool_policy.get(key)
        if found is not None:
            return found
        same = _rule_identity(key)
        alike = [p for k, p in self.tool_policy.items() if _rule_identity(k) == same]
        return stricter_policy(*alike) if alike else self.default_policy

    def without_allow(self) -> GuardConstraints:
        """This layer without its ``allow`` rules and ``default_policy: allow``.

        An untrusted layer's ``allow`` never tightens: at best it repeats a farther layer, at
        worst it overrides a tool's own ``user_confirm`` permission.
        """
        policy = {rule: p for rule, p in self.tool_policy.items() if p != "allow"}
        default = None if self.default_policy == "allow" else self.default_policy
        return self.model_copy(update={"tool_policy": policy, "default_policy": default})

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
            checkers=_chain([g.checkers for g in present], DEFAULT_CHECKERS),
            guardrails=GuardrailConstraints.merge(*(g.guardrails for g in present)),
        )._with_floors(*(f for g in present for f in g._floors))

    def _with_floors(self, *floors: GuardConstraints) -> GuardConstraints:
        """This layer with ``floors`` (each kept once) as its `floors`."""
        kept = {id(f): f for f in floors}
        if kept:
            self._floors = tuple(kept.values())
        return self

    def tightened_by(self, nearer: GuardConstraints) -> GuardConstraints:
        """These (effective) rules with an untrusted ``nearer`` layer that may only tighten."""
        effective = self
        if self.checkers is None and nearer.checkers is not None:
            # measured against the chain that would run: the skill can only add to it
            effective = self.model_copy(update={"checkers": list(DEFAULT_CHECKERS)})
        return GuardConstraints.merge(effective, nearer.without_allow())


class ExecutionConstraints(_Strict):
    """Where and under which limits tools that run code execute."""

    mode: str | None = None
    """A registered sandbox mode (`jianmu.plugins`): ``local`` (a child process, bubblewrap
    where installed), ``docker`` or a plug-in; unset is local. The most isolating mode set in
    any layer wins."""
    docker_image: str | None = None
    """Image for docker mode; unset is ``jianmu-sandbox:latest``; the farthest layer's wins."""
    network: Switch | None = None
    """Whether sandboxed code may use the network; unset is off, ``false`` in any layer wins."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Upper bound on one tool call, in seconds."""
    memory_mb: int | None = Field(default=None, gt=0)
    """Memory limit of sandboxed code, in MiB."""
    cpus: float | None = Field(default=None, gt=0)
    """CPU share of sandboxed code."""
    pids: int | None = Field(default=None, gt=0)
    """Process limit of sandboxed code."""
    workdir: str | None = None
    """Workspace root for file tools and sandboxes; unset is the run's working folder. A
    nearer layer may only choose a folder inside the farther one's."""
    read_only_paths: list[str] | None = None
    """Paths relative to the workspace that sandboxed code may read but not change (where
    they exist when the sandbox starts); unset is `DEFAULT_READ_ONLY_PATHS`, ``[]`` none.
    Every layer's paths count together."""

    @field_validator("read_only_paths")
    @classmethod
    def _relative_paths(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [read_only_path(p) for p in value]

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str | None) -> str | None:
        return None if value is None else _registered("sandbox", "execution.mode", value)

    @classmethod
    def merge(cls, *layers: ExecutionConstraints | None) -> ExecutionConstraints:
        """Merge operator layers, farthest first; see the module docstring for the rule."""
        present = [e for e in layers if e is not None]
        networks = [e.network for e in present if e.network is not None]
        return cls(
            mode=_strictest_mode(e.mode for e in present),
            docker_image=_first(e.docker_image for e in present),
            # what is left once no layer says false can only be true
            network=(False if False in networks else (True if networks else None)),
            timeout_s=_min(e.timeout_s for e in present),
            memory_mb=_min(e.memory_mb for e in present),
            cpus=_min(e.cpus for e in present),
            pids=_min(e.pids for e in present),
            workdir=_narrowed_workdir(e.workdir for e in present),
            read_only_paths=_chain([e.read_only_paths for e in present], DEFAULT_READ_ONLY_PATHS),
        )

    def tightened_by(self, nearer: ExecutionConstraints) -> ExecutionConstraints:
        """These (effective) settings with an untrusted ``nearer`` layer that may only tighten.

        Raises:
            ConfigError: ``nearer`` picks another image, a mode that isolates no more than the
                one in force (it leaves Docker), or a workdir outside.
        """
        mode, current = self.mode, self.mode or "local"
        if nearer.mode is not None and nearer.mode != current:
            if _isolation_rank(nearer.mode) <= _isolation_rank(current):
                raise ConfigError(
                    f"execution.mode {nearer.mode!r} in a skill cannot take code out of the "
                    f"{current!r} sandbox that the config or the node chose (it isolates no "
                    "more); drop it from the skill's constraints"
                )
            mode = nearer.mode
        image = self.docker_image or DEFAULT_IMAGE
        if nearer.docker_image is not None and nearer.docker_image != image:
            raise ConfigError(
                f"execution.docker_image {nearer.docker_image!r} in a skill: only the config "
                f"or the node may choose the image (in force: {image!r}); drop it from the "
                "skill's constraints"
            )
        defaults = SANDBOX_DEFAULTS.get(mode or "local", SANDBOX_DEFAULTS["local"])
        workdir = self.workdir
        if nearer.workdir is not None:
            workdir = _narrowed_workdir([self.workdir or os.getcwd(), nearer.workdir])
        return ExecutionConstraints(
            mode=mode,
            docker_image=self.docker_image,
            # on only if an operator turned it on; an explicit false always holds
            network=False if nearer.network is False else self.network,
            timeout_s=_capped(nearer.timeout_s, self.timeout_s, defaults.timeout_s),
            memory_mb=_capped(nearer.memory_mb, self.memory_mb, defaults.memory_mb),
            cpus=_capped(nearer.cpus, self.cpus, defaults.cpus),
            pids=_capped(nearer.pids, self.pids, defaults.pids),
            workdir=workdir,
            # a skill adds read-only paths to those in force, never removes one
            read_only_paths=self.read_only_paths if nearer.read_only_paths is None else
            _united((list(self.read_only_paths if self.read_only_paths is not None
                          else DEFAULT_READ_ONLY_PATHS), nearer.read_only_paths)),
        )


class Constraints(_Strict):
    """Everything that limits a run: guard, execution and loop limits (an operator layer)."""

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

        Operator layers merge by the rules of the module docstring; a `SkillConstraints`
        layer over them may only tighten what they, or the built-in defaults, set. Layers
        that start with a skill layer merge into a `SkillConstraints`, which is measured when
        it is merged over an operator layer.

        Raises:
            ConfigError: a layer picks a workdir outside a farther one's, or a skill layer
                tries to loosen the sandbox (see `ExecutionConstraints.tightened_by`).
        """
        present = [c for c in layers if c is not None]
        if not present:
            return Constraints()
        merged = _detached(present[0])  # never hand back a caller's layer
        for layer in present[1:]:
            if isinstance(merged, SkillConstraints):
                merged = merged._merged_with(layer)
            elif isinstance(layer, SkillConstraints):
                merged = merged._tightened_by(layer)
            elif isinstance(layer, MemberConstraints):
                caller = merged
                if layer.caller is not None:  # the first agent's: itself a member's in a sub-run
                    caller = (caller._sealed_by(layer.caller)
                              if isinstance(caller, CallerConstraints)
                              else caller._merged_with(layer.caller))
                merged = caller._sealed_by(layer)
            elif isinstance(layer, CallerConstraints):
                merged = CallerConstraints.of(merged._merged_with(layer))
            elif isinstance(merged, CallerConstraints):
                merged = merged._sealed_by(layer)
            else:
                merged = merged._merged_with(layer)
        return merged

    def _merged_with(self, nearer: Constraints) -> Constraints:
        """Two layers by the operator rules; the result is of this layer's kind."""
        execution = self.execution
        if isinstance(self, SkillConstraints) and nearer.execution.workdir is not None:
            # skill layers among themselves: the workdir stays relative to the operator's,
            # which measures it when the pair meets an operator layer
            joined = os.path.join(execution.workdir or "", nearer.execution.workdir)
            execution = execution.model_copy(update={"workdir": joined})
            nearer = nearer.model_copy(update={"execution": nearer.execution.model_copy(
                update={"workdir": None})})
        return type(self)(
            guard=GuardConstraints.merge(self.guard, nearer.guard),
            execution=ExecutionConstraints.merge(execution, nearer.execution),
            max_iterations=_min((self.max_iterations, nearer.max_iterations)),
            timeout=_min((self.timeout, nearer.timeout)),
            max_messages=_min((self.max_messages, nearer.max_messages)),
        )

    def _tightened_by(self, nearer: Constraints) -> Constraints:
        """These (effective) constraints with an untrusted layer that may only tighten."""
        return Constraints(
            guard=self.guard.tightened_by(nearer.guard),
            execution=self.execution.tightened_by(nearer.execution),
            max_iterations=_capped(
                nearer.max_iterations, self.max_iterations, DEFAULT_MAX_ITERATIONS
            ),
            timeout=_capped(nearer.timeout, self.timeout),
            max_messages=_capped(nearer.max_messages, self.max_messages),
        )


    def _sealed_by(self, member: Constraints) -> CallerConstraints:
        """These (a caller's effective) constraints with a team member's own layer, which may
        not loosen them: its rules and limits merge, the caller's guard stays a floor
        (`GuardConstraints.floors`), its sandbox may not turn the network on or raise a limit
        past the caller's (else the mode's default), nor its loop ``max_iterations`` (else
        `DEFAULT_MAX_ITERATIONS`)."""
        guard = GuardConstraints.merge(self.guard, member.guard)
        floor = self.guard.model_copy(update={})  # its own floors are the merge's already
        floor._floors = ()
        execution = ExecutionConstraints.merge(self.execution, member.execution)
        own, nearer = self.execution, member.execution
        defaults = SANDBOX_DEFAULTS.get(execution.mode or "local", SANDBOX_DEFAULTS["local"])
        execution = execution.model_copy(update={
            "network": False if nearer.network is False else own.network,
            **{key: _capped(getattr(nearer, key), getattr(own, key), getattr(defaults, key))
               for key in ("timeout_s", "memory_mb", "cpus", "pids")},
        })
        return CallerConstraints(
            guard=guard._with_floors(*guard.floors, floor), execution=execution,
            # set even when neither layer is: the member's own `max_iterations=` may not
            # raise the caller's (else the default's) either
            max_iterations=_min((self.max_iterations or DEFAULT_MAX_ITERATIONS,
                                 member.max_iterations)),
            timeout=_min((self.timeout, member.timeout)),
            max_messages=_min((self.max_messages, member.max_messages)),
        )


class CallerConstraints(Constraints):
    """A caller's effective constraints as a team member's run gets them (an agent tool's
    call): any operator layer merged over them is the member's own and may not loosen them
    (`Constraints._sealed_by`)."""

    @classmethod
    def of(cls, layer: Constraints) -> CallerConstraints:
        """``layer`` marked as a caller's (its guard's floors kept)."""
        if isinstance(layer, CallerConstraints):
            return layer
        # the caller's loop limit is set (else the default's): a member, with a layer of its
        # own or none, may not run more rounds with its own `max_iterations=`
        return cls(guard=layer.guard, execution=layer.execution,
                   max_iterations=layer.max_iterations or DEFAULT_MAX_ITERATIONS,
                   timeout=layer.timeout,
                   max_messages=layer.max_messages)


class MemberConstraints(Constraints):
    """A team member's own layer (a hand-off target's node layer): merged over the run's
    constraints and its caller's layer (``caller``: the first agent's), it may not loosen them
    (`Constraints._sealed_by`)."""

    _caller: Constraints | None = PrivateAttr(default=None)

    @property
    def caller(self) -> Constraints | None:
        """The layer of the agent whose team this member joined, if it has one."""
        return self._caller

    @classmethod
    def of(cls, layer: Constraints, caller: Constraints | None) -> MemberConstraints:
        """``layer`` as a member's, under ``caller``'s layer."""
        member = cls(guard=layer.guard, execution=layer.execution,
                     max_iterations=layer.max_iterations, timeout=layer.timeout,
                     max_messages=layer.max_messages)
        member._caller = caller
        return member


class SkillConstraints(Constraints):
    """An untrusted layer (a SKILL.md, a skill's tree): merged over operator layers, it may
    only tighten what would really apply (see the module docstring)."""

    @classmethod
    def of(cls, layer: Constraints | None) -> SkillConstraints:
        """``layer`` marked as a skill's (an empty layer for ``None``)."""
        if isinstance(layer, SkillConstraints):
            return layer
        return cls.model_validate(layer.model_dump() if layer is not None else {})
