"""Tool providers: where tools come from (built-ins, MCP servers, your own sources).

`BuiltinToolProvider` holds a lazy registry of ``"module:Class"`` strings: a built-in is
imported only when a name asks for it, so a missing optional extra affects only the tools
that need it. Each provider instance has its own registry (copied from the defaults);
`BuiltinToolProvider.default()` is the shared instance that class-level calls use, and
`BuiltinToolProvider.reset_default()` restores it, so tests never leak registrations.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from jianmu.errors import MissingExtraError, ToolNotFoundError, ToolUnavailableWarning
from jianmu.tools.base import Tool
from jianmu.tools.calls import (
    DEFAULT_ALIASES,
    check_tool_name,
    name_key,
    reset_shared_aliases,
    shared_aliases,
)

__all__ = (
    "DEFAULT_ALIASES",
    "DEFAULT_BUILTINS",
    "BaseToolProvider",
    "BuiltinToolProvider",
    "ToolProvider",
)

DEFAULT_BUILTINS: dict[str, str] = {
    "read_file": "jianmu.tools.builtin.files:ReadFileTool",
    "write_file": "jianmu.tools.builtin.files:WriteFileTool",
    "list_dir": "jianmu.tools.builtin.files:ListDirTool",
    "file_info": "jianmu.tools.builtin.files:FileInfoTool",
    "str_replace": "jianmu.tools.builtin.files:StrReplaceTool",
    "glob_search": "jianmu.tools.builtin.search:GlobSearchTool",
    "grep_search": "jianmu.tools.builtin.search:GrepSearchTool",
    "python_repl": "jianmu.tools.builtin.python_repl:PythonREPLTool",
    "calculator": "jianmu.tools.builtin.calculator:CalculatorTool",
    "bash": "jianmu.tools.builtin.bash:BashTool",
    "http_request": "jianmu.tools.builtin.http:HTTPTool",
    "duckduckgo_search": "jianmu.tools.builtin.web_search:DuckDuckGoSearchTool",
    "ask_user": "jianmu.tools.builtin.ask:AskUserTool",
}
"""The built-in tools, by name, as ``"module:attr"`` naming a Tool class or a factory of one
(imported on first use)."""

# Top-level import names of optional dependencies and the pip extra that installs them.
_EXTRAS: dict[str, str] = {
    "ddgs": "search",
    "duckduckgo_search": "search",
    "docker": "docker",
    "mcp": "mcp",
    "openai": "openai",
}

ToolSource = type[Tool] | str | Callable[[], Tool]
"""What `register_tool` accepts: a Tool class, ``"module:Class"``, or a factory."""


@runtime_checkable
class ToolProvider(Protocol):
    """A source of tools with a lifecycle: ``initialize``, then ``get_tools``, then ``close``."""

    async def initialize(self) -> None:
        """Connect or load (e.g. start an MCP session); called once before ``get_tools``."""
        ...

    def get_tools(self, **kwargs: Any) -> list[Tool]:
        """The tools available now."""
        ...

    async def close(self) -> None:
        """Release what ``initialize`` acquired; idempotent."""
        ...


class BaseToolProvider:
    """A `ToolProvider` with no-op lifecycle methods and async-context-manager support."""

    async def initialize(self) -> None:
        """Nothing to prepare by default."""

    def get_tools(self, **kwargs: Any) -> list[Tool]:
        """No tools by default."""
        return []

    async def close(self) -> None:
        """Nothing to release by default."""

    async def __aenter__(self) -> BaseToolProvider:
        await self.initialize()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()




def _missing_extra(exc: ImportError) -> MissingExtraError | None:
    if isinstance(exc, MissingExtraError):
        return exc
    top = (exc.name or "").split(".")[0]
    if top in _EXTRAS:
        return MissingExtraError(top, _EXTRAS[top])
    return None


class BuiltinToolProvider(BaseToolProvider):
    """The registry of built-in tools, loaded lazily by name."""

    _default: BuiltinToolProvider | None = None

    def __init__(
        self,
        names: Iterable[str] | None = None,
        *,
        builtins: dict[str, ToolSource] | None = None,
        aliases: dict[str, str] | None = None,
        strict: bool = False,
        _shared: bool = False,
    ) -> None:
        """Args:
        names: The tools ``get_tools()`` returns; all built-ins when ``None``.
        builtins: The registry to start from (default: a copy of `DEFAULT_BUILTINS`).
        aliases: The aliases to start from (default: a copy of `DEFAULT_ALIASES`).
        strict: Raise instead of skipping tools that cannot be loaded.
        """
        self._builtins: dict[str, ToolSource] = dict(
            DEFAULT_BUILTINS if builtins is None else builtins
        )
        # the shared provider registers into the one table that name resolution reads
        self._aliases: dict[str, str] = (
            shared_aliases() if _shared else dict(DEFAULT_ALIASES if aliases is None else aliases)
        )
        self._classes: dict[str, Callable[[], Tool]] = {}
        self._names = list(names) if names is not None else None
        self.strict = strict

    @classmethod
    def default(cls) -> BuiltinToolProvider:
        """The shared provider that `ToolSet.resolve` uses unless given another."""
        if BuiltinToolProvider._default is None:
            BuiltinToolProvider._default = BuiltinToolProvider(_shared=True)
        return BuiltinToolProvider._default

    @classmethod
    def reset_default(cls) -> None:
        """Forget registrations made on the shared provider (for tests)."""
        BuiltinToolProvider._default = None
        reset_shared_aliases()

    # -- registration ---------------------------------------------------------------------

    def register_tool(self, name: str, source: ToolSource) -> None:
        """Register a built-in: a `Tool` class, a ``"module:Class"`` string or a factory.

        Raises:
            ValueError: ``source`` is a string without ``module:Class`` form.
            TypeError: ``source`` is neither a string nor callable.
        """
        if isinstance(source, str):
            if source.count(":") != 1 or not all(source.split(":")):
                raise ValueError(
                    f"built-in {name!r}: {source!r} must look like 'package.module:ClassName'"
                )
        elif isinstance(source, Tool) or not callable(source):
            raise TypeError(
                f"built-in {name!r}: register a Tool class, 'module:Class' or a factory, "
                f"not {source!r}"
            )
        key = _valid_key(name, "built-in")
        self._builtins[key] = source
        self._classes.pop(key, None)

    def register_alias(self, alias: str, target: str) -> None:
        """Let ``alias`` resolve to the built-in ``target``.

        Raises:
            ToolNotFoundError: ``target`` is not a registered built-in.
        """
        canonical = self.canonical_name(target)
        if canonical not in self._builtins:
            raise ToolNotFoundError(
                f"cannot alias {alias!r} to unknown built-in {target!r}; known: "
                f"{', '.join(self._builtins)}"
            )
        self._aliases[_valid_key(alias, "alias")] = canonical

    def list_builtin_names(self) -> list[str]:
        """Names of the registered built-ins (aliases not included)."""
        return list(self._builtins)

    def aliases(self) -> dict[str, str]:
        """Alias -> built-in name."""
        return dict(self._aliases)

    def canonical_name(self, name: str) -> str:
        """``name`` in ASCII lower case with aliases resolved; any other name as it is.

        Only a valid tool name is lower-cased (see `jianmu.tools.calls`): ``lower()`` maps some
        non-ASCII letters to ASCII ones, and a look-alike must stay unknown.
        """
        key = name_key(name.strip())
        if key is None:
            return name
        return self._aliases.get(key, key)

    # -- loading --------------------------------------------------------------------------

    def _factory(self, name: str) -> Callable[[], Tool]:
        factory = self._classes.get(name)
        if factory is not None:
            return factory
        source = self._builtins[name]
        if isinstance(source, str):
            module_name, _, attr = source.partition(":")
            module = importlib.import_module(module_name)
            try:
                factory = getattr(module, attr)
            except AttributeError:
                raise ImportError(
                    f"built-in {name!r}: module {module_name!r} has no {attr!r}"
                ) from None
        else:
            factory = source
        self._classes[name] = factory
        return factory

    def load(self, name: str) -> Tool:
        """Import and construct the built-in ``name`` (aliases accepted).

        Raises:
            ToolNotFoundError: no built-in of that name.
            MissingExtraError: its optional dependency is not installed.
            Exception: whatever importing or constructing it raised.
        """
        canonical = self.canonical_name(name)
        if canonical not in self._builtins:
            import difflib  # only on this error's path

            close = difflib.get_close_matches(canonical.lower(), list(self._builtins), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ToolNotFoundError(
                f"no built-in tool named {name!r}{hint}; built-ins: {', '.join(self._builtins)}"
            )
        try:
            made = self._factory(canonical)()
        except ImportError as exc:
            missing = _missing_extra(exc)
            if missing is not None:
                raise missing from exc
            raise
        if not isinstance(made, Tool):
            raise TypeError(f"built-in {canonical!r} built {made!r}, which is not a Tool")
        return made

    def resolve_named_tools(
        self,
        names: Iterable[str],
        custom: Iterable[Tool] | None = None,
        *,
        strict: bool | None = None,
    ) -> list[Tool]:
        """Tools for ``names``: a custom tool of that name wins over the built-in.

        A name that is unknown or fails to load is skipped with a `ToolUnavailableWarning`
        (naming the missing extra); with ``strict`` the error is raised instead.
        """
        strict = self.strict if strict is None else strict
        by_name = {t.name.lower(): t for t in custom or ()}
        out: list[Tool] = []
        seen: set[str] = set()
        for raw in names:
            key = name_key(raw.strip())
            chosen = by_name.get(key) if key is not None else None
            chosen = chosen or by_name.get(self.canonical_name(raw))
            if chosen is None:
                try:
                    chosen = self.load(raw)
                except Exception as exc:
                    if strict:
                        raise
                    warnings.warn(_skip_message(raw, exc), ToolUnavailableWarning, stacklevel=3)
                    continue
            if chosen.name.lower() not in seen:
                seen.add(chosen.name.lower())
                out.append(chosen)
        return out

    def get_tools(self, **kwargs: Any) -> list[Tool]:
        """The tools named at construction (all built-ins by default)."""
        names = self._names if self._names is not None else self.list_builtin_names()
        return self.resolve_named_tools(names)


def _valid_key(name: str, what: str) -> str:
    """The lower-case key of a name being registered; refuse what no tool can be called."""
    key = name_key(name.strip()) if isinstance(name, str) else None
    if key is None:
        raise ValueError(f"{what} {name!r}: {check_tool_name(name)}")
    return key


def _skip_message(name: str, exc: BaseException) -> str:
    if isinstance(exc, MissingExtraError):
        return (
            f"tool {name!r} skipped: {exc.package!r} is not installed; "
            f"install it with: pip install 'jianmu[{exc.extra}]'"
        )
    if isinstance(exc, ToolNotFoundError):
        return f"tool {name!r} skipped: {exc}"
    return f"tool {name!r} skipped: it could not be loaded ({type(exc).__name__}: {exc})"
