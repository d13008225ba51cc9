"""`ToolRegistry`: the mutable registry of seeds 001 and 002, validated at registration.

Use it while assembling tools (``@registry.tool(...)``, ``register``, ``deprecate``,
``remove``), then take an immutable `ToolSet` with ``registry.toolset()`` for a run.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterable, Iterator
from enum import Enum
from typing import Any, ClassVar, overload

from jianmu.errors import ToolNotFoundError
from jianmu.tools.base import FunctionTool, Tool
from jianmu.tools.names import lookup_keyed, name_key
from jianmu.tools.toolset import ToolSet

__all__ = ("ToolRegistry",)


class ToolRegistry:
    """A mutable, validated, name-keyed collection of tools (O(1); names as in `ToolSet`)."""

    resolves_names: ClassVar[bool] = True
    """`get` resolves a name as `jianmu.tools.names.resolve_tool` does."""

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        require_parameter_descriptions: bool = False,
        timeout_seconds: float | None = None,
        max_result_length: int | None = None,
    ) -> None:
        """Args:
        tools: Tools to register at once.
        require_parameter_descriptions: Make a parameter without a description an error
            rather than a `ToolDefinitionWarning`.
        timeout_seconds: Default timeout for tools made by ``registry.tool``.
        max_result_length: Default output cut for tools made by ``registry.tool``.
        """
        self._tools: dict[str, Tool] = {}
        self.require_parameter_descriptions = require_parameter_descriptions
        self.timeout_seconds = timeout_seconds
        self.max_result_length = max_result_length
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> Tool:
        """Validate and add ``tool``; a tool of the same name is replaced.

        Raises:
            ToolValidationError: listing every problem of the definition (seed 002).
        """
        if not isinstance(tool, Tool):
            raise TypeError(f"register() takes a Tool, got {tool!r}; wrap functions with @tool")
        tool.check_definition(require_parameter_descriptions=self.require_parameter_descriptions)
        tool.injection()  # an injected parameter may not shadow a schema property
        key = name_key(tool.name)
        assert key is not None  # check_definition refused any other name
        self._tools[key] = tool
        return tool

    @overload
    def tool(self, fn: Callable[..., Any], /) -> FunctionTool: ...

    @overload
    def tool(self, fn: None = None, /, **options: Any) -> Callable[
        [Callable[..., Any]], FunctionTool
    ]: ...

    def tool(
        self, fn: Callable[..., Any] | None = None, /, **options: Any
    ) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
        """Decorator: make a `FunctionTool` (options as for `@tool`) and register it.

        The returned tool is still callable like the function.
        """
        frame = sys._getframe(1)  # resolve string annotations of local classes, as @tool does
        if frame.f_locals is not frame.f_globals:
            options.setdefault("namespace", frame.f_locals)
        del frame
        if self.timeout_seconds is not None:
            options.setdefault("timeout_seconds", self.timeout_seconds)
        if self.max_result_length is not None:
            options.setdefault("max_result_length", self.max_result_length)

        def decorate(func: Callable[..., Any]) -> FunctionTool:
            made = FunctionTool(func, **options)
            self.register(made)
            return made

        return decorate(fn) if fn is not None else decorate

    def get(self, name: str) -> Tool | None:
        """The one tool ``name`` means (exact, ASCII case-insensitive, alias), or ``None``."""
        return lookup_keyed(self._tools, name)

    def _require(self, name: str) -> str:
        key = name_key(name) if isinstance(name, str) else None
        if key is None or key not in self._tools:
            raise ToolNotFoundError(
                f"no tool named {name!r}; registered: {', '.join(self.names()) or 'none'}"
            )
        return key

    def names(self) -> list[str]:
        """Registered names in registration order."""
        return [t.name for t in self._tools.values()]

    def list_tools(self) -> list[Tool]:
        """Every registered tool, deprecated ones included."""
        return list(self._tools.values())

    def get_tool_definitions(self) -> list[dict[str, Any]]:
        """OpenAI tool definitions of the active tools (seed 001)."""
        return [t.to_openai() for t in self.get_active_tools()]

    def deprecate(self, name: str, reason: str = "") -> None:
        """Mark ``name`` deprecated: kept and callable, but out of schemas and selections.

        The registry keeps a marked copy, so a tool shared with other registries is untouched.

        Raises:
            ToolNotFoundError: no tool of that name.
        """
        key = self._require(name)
        original = self._tools[key]
        marked = copy.copy(original)
        marked.__dict__.pop("_jm_params", None)
        marked.deprecated = True
        marked.metadata = {**dict(original.metadata), "deprecation_reason": reason}
        self._tools[key] = marked

    def remove(self, name: str) -> Tool:
        """Remove ``name`` and return it.

        Raises:
            ToolNotFoundError: no tool of that name.
        """
        return self._tools.pop(self._require(name))

    def get_active_tools(self) -> list[Tool]:
        """The tools that are not deprecated."""
        return [t for t in self._tools.values() if not t.deprecated]

    def get_tools_by_category(self, category: str | Enum) -> list[Tool]:
        """Active tools of ``category`` (a string, or an enum with that value)."""
        wanted = getattr(category, "value", category)
        return [t for t in self.get_active_tools() if t.category == wanted]

    def get_tools_by_tag(self, tag: str) -> list[Tool]:
        """Active tools carrying ``tag``."""
        return [t for t in self.get_active_tools() if tag in t.tags]

    def get_schemas(self, only_active: bool = True) -> list[dict[str, Any]]:
        """OpenAI tool definitions, active tools only unless ``only_active=False``."""
        chosen = self.get_active_tools() if only_active else self.list_tools()
        return [t.to_openai() for t in chosen]

    def toolset(self) -> ToolSet:
        """An immutable `ToolSet` of every registered tool (deprecation flags kept)."""
        return ToolSet(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()!r})"
