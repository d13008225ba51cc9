"""Plug-ins by name: the LLM providers, sandbox modes, guard checkers and guardrails Jianmu uses.

Each kind is a registry of names to ``"module:Class"`` strings, so the config can name a
plug-in (``llm.provider``, ``execution.mode``, ``guard.checkers``, ``guard.guardrails``) and
be checked without importing anything. A name comes from, in this order of precedence:

1. `register` (a test or an application, undone with `unregister` or by leaving `registered`);
2. the ``jianmu.plugins`` entry points of installed packages, named ``<kind>.<name>``::

       [project.entry-points."jianmu.plugins"]
       "sandbox.toy" = "mypkg.sandboxes:ToySandbox"
       "checker.office_hours" = "mypkg.checks:OfficeHoursChecker"

   read once, on the first look-up of a name that is not built in (`reload_entry_points`
   reads them again);
3. the built-ins, `BUILTINS`. An entry point cannot replace a built-in name.

What each kind's class must provide (checked by `resolve`, see `REQUIRED`):

- ``llm``: ``from_llm_config(llm)`` (a classmethod building it from the ``llm:`` section) and
  the `LLMProvider` methods;
- ``sandbox``: ``isolation_rank`` (an int: how strongly it isolates; constraints merge towards
  the highest and a skill may not move to a lower one) and the `Sandbox` methods; the runner
  builds it as ``cls(workspace, network=..., timeout=..., memory_mb=..., cpus=..., pids=...)``
  (and ``read_only_paths=...`` when the config sets them)
  (limits only when set), plus ``image=`` when the class sets ``takes_image = True``;
- ``checker``: ``from_setup(setup)`` (a classmethod given a `jianmu.guard.checkers.CheckerSetup`:
  the merged guard constraints, the clock, the workspace) and ``check(context, previous)``;
  `jianmu.guard.checkers.BaseChecker` supplies the first;
- ``guardrail``: made with no arguments, its instance is called ``(ctx, value)`` and returns
  ``None`` or a `jianmu.Tripwire` (`jianmu.guard.guardrails`).

This module sits at the bottom layer: it imports nothing of Jianmu but the errors, and the
classes it names are imported only when resolved.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Literal, get_args

from jianmu.errors import ConfigError, MissingExtraError, failure_text

__all__ = (
    "ADDED",
    "BUILTINS",
    "DEFAULT_CHECKERS",
    "ENTRY_POINT_GROUP",
    "REQUIRED",
    "PluginKind",
    "is_registered",
    "names",
    "register",
    "registered",
    "reload_entry_points",
    "resolve",
    "unknown_name_message",
    "unregister",
)

PluginKind = Literal["llm", "sandbox", "checker", "guardrail"]
"""The four kinds of plug-in."""

ENTRY_POINT_GROUP = "jianmu.plugins"
"""The entry-point group read for plug-ins; entry names are ``<kind>.<name>``."""

BUILTINS: Mapping[str, Mapping[str, str]] = {
    "llm": {
        "openai": "jianmu.llm.openai:OpenAIProvider",
        "anthropic": "jianmu.llm.anthropic:AnthropicProvider",
        "scripted": "jianmu.llm.scripted:ScriptedLLM",
        # not named in llm.provider: built when llm.fallback lists models to fall back on
        "fallback": "jianmu.llm.fallback:FallbackLLM",
    },
    "sandbox": {
        "local": "jianmu.execution.local_sandbox:LocalSandbox",
        "docker": "jianmu.execution.docker_sandbox:DockerSandbox",
    },
    # in the order of the default chain
    "checker": {
        "policy": "jianmu.guard.enforcer:ToolPolicyChecker",
        "rate_limit": "jianmu.guard.checkers:RateLimitChecker",
        "budget": "jianmu.guard.checkers:BudgetChecker",
        "confirm": "jianmu.guard.checkers:ConfirmChecker",
    },
    "guardrail": {
        "prompt_injection": "jianmu.guard.guardrails:PromptInjectionGuardrail",
    },
}
"""The built-in plug-ins of each kind, name -> ``"module:Class"``."""

DEFAULT_CHECKERS: tuple[str, ...] = tuple(BUILTINS["checker"])
"""The guard chain when no layer sets ``guard.checkers``: policy, rate_limit, budget, confirm."""

REQUIRED: Mapping[str, tuple[str, ...]] = {
    "llm": ("from_llm_config", "complete"),
    "sandbox": ("isolation_rank", "exec"),
    "checker": ("from_setup", "check"),
    "guardrail": ("__call__",),
}
"""The attributes a class of each kind must have; `resolve` refuses one that lacks any."""

_EXTRAS: Mapping[tuple[str, str], str] = {
    ("llm", "openai"): "openai",
    ("llm", "anthropic"): "anthropic",
    ("sandbox", "docker"): "docker",
}
"""The pip extra a built-in needs, named when its import fails for a missing package."""

Target = str | type[Any]
"""What a name stands for: a ``"module:Class"`` string or the class itself."""

_added: dict[str, dict[str, Target]] = {kind: {} for kind in BUILTINS}
ADDED: Mapping[str, Mapping[str, Target]] = MappingProxyType(
    {kind: MappingProxyType(added) for kind, added in _added.items()}
)
"""What `register` added, by kind and name, read-only and live: a built-in name found here
was replaced. A kind's own code (the guard's checkers) may use its built-in classes directly
when their names are not here, without a look-up."""
_entry_points: dict[str, dict[str, str]] | None = None


_KINDS = frozenset(get_args(PluginKind))


def _check_kind(kind: str) -> None:
    if kind not in _KINDS:
        raise ConfigError(
            f"unknown plug-in kind {kind!r}; use one of {', '.join(get_args(PluginKind))}"
        )


def _read_entry_points() -> dict[str, dict[str, str]]:
    """The ``jianmu.plugins`` entry points by kind and name (read once, see module docstring)."""
    global _entry_points
    if _entry_points is None:
        found: dict[str, dict[str, str]] = {kind: {} for kind in BUILTINS}
        import importlib.metadata  # here: it costs more than the rest of the module

        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            kind, _, name = entry.name.partition(".")
            if kind not in found or not name:
                warnings.warn(
                    f"entry point {entry.name!r} in group {ENTRY_POINT_GROUP!r} is skipped: "
                    f"name it '<kind>.<name>' with kind one of {', '.join(found)}",
                    stacklevel=2,
                )
            elif name in BUILTINS[kind]:
                warnings.warn(
                    f"entry point {entry.name!r} ({entry.value}) is skipped: {name!r} is a "
                    f"built-in {kind} and cannot be replaced; choose another name",
                    stacklevel=2,
                )
            else:
                found[kind][name] = entry.value
        _entry_points = found
    return _entry_points


def reload_entry_points() -> None:
    """Forget the entry points read so far; the next look-up reads them again."""
    global _entry_points
    _entry_points = None


def _target(kind: str, name: str) -> Target | None:
    _check_kind(kind)
    if name in _added[kind]:
        return _added[kind][name]
    if name in BUILTINS[kind]:
        return BUILTINS[kind][name]
    return _read_entry_points()[kind].get(name)


def names(kind: PluginKind) -> tuple[str, ...]:
    """Every name of ``kind``: built-ins first, then entry points and registered ones, sorted."""
    _check_kind(kind)
    extra = set(_read_entry_points()[kind]) | set(_added[kind])
    return (*BUILTINS[kind], *sorted(extra - set(BUILTINS[kind])))


def is_registered(kind: PluginKind, name: str) -> bool:
    """Whether ``name`` is a plug-in of ``kind`` (nothing is imported)."""
    return _target(kind, name) is not None


def is_builtin(kind: PluginKind, name: str) -> bool:
    """Whether ``name`` stands for the built-in plug-in of ``kind`` (not one `register`
    put in its place)."""
    _check_kind(kind)
    return name in BUILTINS[kind] and name not in _added[kind]


def unknown_name_message(kind: PluginKind, name: object) -> str:
    """The error text for a name that is not registered: it lists the names that are."""
    import difflib  # only on this error's path: it costs an import otherwise saved

    known = names(kind)
    close = difflib.get_close_matches(str(name).lower(), known, n=1) if isinstance(name, str) \
        else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"{name!r} is not a registered {kind}{hint}; registered: {', '.join(known)}. Register "
        f"one with jianmu.plugins.register({kind!r}, name, 'module:Class') or an entry point "
        f"'{kind}.<name>' in the {ENTRY_POINT_GROUP!r} group"
    )


def register(kind: PluginKind, name: str, target: Target, *, replace: bool = False) -> None:
    """Add the plug-in ``name`` of ``kind``: a ``"module:Class"`` string or the class.

    Raises:
        ConfigError: the kind is unknown, the name is empty or has a dot, or it is already
            registered (pass ``replace=True`` to replace it: built-ins included).
    """
    _check_kind(kind)
    if not isinstance(name, str) or not name or "." in name:
        raise ConfigError(f"plug-in name {name!r} must be a non-empty string without '.'")
    if not isinstance(target, type) and (not isinstance(target, str) or ":" not in target):
        raise ConfigError(
            f"{kind} {name!r}: the target {target!r} must be a class or a 'module:Class' string"
        )
    if not replace and _target(kind, name) is not None:
        raise ConfigError(
            f"{kind} {name!r} is already registered; unregister it first or pass replace=True"
        )
    _added[kind][name] = target


def unregister(kind: PluginKind, name: str) -> None:
    """Remove a plug-in added by `register` (built-ins and entry points stay), if present."""
    _check_kind(kind)
    _added[kind].pop(name, None)


@contextmanager
def registered(kind: PluginKind, name: str, target: Target) -> Iterator[None]:
    """`register` for the duration of a ``with`` block, then restore what was there."""
    _check_kind(kind)
    before = _added[kind].get(name)
    register(kind, name, target, replace=True)
    try:
        yield
    finally:
        if before is None:
            _added[kind].pop(name, None)
        else:
            _added[kind][name] = before


def _import(kind: str, name: str, path: str) -> Any:
    """The object that ``"module:attr"`` names."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{kind} {name!r} -> {path!r}: write the target as 'module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get((kind, name))
        if exc.name != module_name and extra is not None:
            raise MissingExtraError(exc.name or module_name, extra) from exc
        raise ConfigError(
            f"{kind} {name!r} -> {path!r}: module {exc.name!r} cannot be imported ({exc}); "
            "install the package that provides it or fix the path"
        ) from exc
    except (Exception, SystemExit) as exc:  # its own error (a traceback), or the process's end
        raise ConfigError(
            f"{kind} {name!r} -> {path!r}: importing module {module_name!r} "
            f"{failure_text(exc)}"
        ) from exc
    found: Any = module
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ConfigError(
                f"{kind} {name!r} -> {path!r}: module {module_name!r} has no {attr!r}; "
                "fix the class name"
            ) from None
    return found


def resolve(kind: PluginKind, name: str) -> type[Any]:
    """The class registered as ``name`` of ``kind``, imported now.

    Raises:
        ConfigError: the name is not registered (the message lists the registered names), the
            target cannot be imported, is not a class, or lacks what the kind requires.
        MissingExtraError: a built-in needs an extra that is not installed.
    """
    target = _target(kind, name)
    if target is None:
        raise ConfigError(unknown_name_message(kind, name))
    # by what is registered under the name now: registering another target misses this
    key = (kind, name, target)
    known = _resolved.get(key)
    if known is not None:
        return known
    found = _import(kind, name, target) if isinstance(target, str) else target
    where = f"{kind} {name!r}" + (f" -> {target!r}" if isinstance(target, str) else "")
    if not isinstance(found, type):
        raise ConfigError(f"{where} is {found!r}, not a class")
    missing = [attr for attr in REQUIRED[kind] if not hasattr(found, attr)]
    if missing:
        raise ConfigError(
            f"{where}: {found.__qualname__} is not a {kind}: it lacks {', '.join(missing)} "
            f"(see jianmu.plugins for what a {kind} provides)"
        )
    _resolved[key] = found
    return found


_resolved: dict[tuple[str, str, Target], type[Any]] = {}
"""Classes found by `resolve`, by kind, name and target: a run resolves its sandbox and each
checker of its chain, and importing by name costs more than the lookup."""
