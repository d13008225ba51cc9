"""The one registry of tools: `ToolRegistry` (mutable, validated at registration) and
`ToolSet`, the immutable view of one that runs use.

A name is looked up in O(1) by the rules of `resolve_tool` (exact, then ASCII
case-insensitive, then an alias; nothing else is folded); the last registration of a name wins
but keeps the position of the first. Every `ToolSet` factory and method returns a new set;
its exports are computed once per set. Assemble tools in a registry (``@registry.tool``,
``register``, ``deprecate``, ``remove``), then take ``registry.toolset()`` for a run; a
`ToolExecutor` holds a `ToolSet`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, cast, overload

from jianmu.errors import ToolDefinitionError, ToolError, ToolNotFoundError, ToolValidationError
from jianmu.tools._definitions import openai_function
from jianmu.tools._given import as_tool_items, name_clash, not_a_tool
from jianmu.tools._hints import callable_name
from jianmu.tools.base import (
    FunctionTool,
    Tool,
    ToolMetadata,
    _from_function,
)
from jianmu.tools.calls import (
    MAX_ARGUMENT_NESTING,
    TOO_DEEP,
    ToolCall,
    ToolResult,
    builtin_aliases,
    check_tool_name,
    decode_arguments,
    name_key,
    nests_within,
    not_json_message,
    shown_name,
    unknown_tool_text,
)

if TYPE_CHECKING:
    from jianmu.execution.runner import ToolRunner
    from jianmu.tools.providers import BuiltinToolProvider, ToolProvider

__all__ = (
    "ToolContainer",
    "ToolLookup",
    "ToolRegistry",
    "ToolSet",
    "as_tools",
    "canonical_call",
    "lookup_keyed",
    "received_call",
    "resolve_tool",
)

_T = TypeVar("_T")


# -- name resolution ------------------------------------------------------------------------


class ToolContainer(Protocol):
    """A `ToolSet` or `ToolRegistry`: its ``get`` resolves names as `resolve_tool` does."""

    resolves_names: ClassVar[bool]

    def get(self, name: str) -> Any:
        """The tool ``name`` means, or ``None``."""


ToolLookup = ToolContainer | Mapping[str, Any] | Iterable[Any]
"""Where a name is looked up: a tool container, a mapping of name to tool, or tools."""


def lookup_keyed(index: Mapping[str, _T], name: object) -> _T | None:
    """The tool ``name`` means in an index keyed by `name_key`: exact/ASCII case, then alias."""
    key = name_key(name) if isinstance(name, str) else None
    if key is None:
        return None
    found = index.get(key)
    if found is None:
        target = builtin_aliases().get(key)
        found = index.get(target) if target is not None else None
    return found


def _tool_name(tool: Any, key: Any) -> str:
    found = getattr(tool, "name", None)
    return found if isinstance(found, str) else str(key)


def _entries(tools: Any) -> Iterable[tuple[str, Any]]:
    """(name, tool) pairs of a mapping or an iterable of tools."""
    if isinstance(tools, Mapping):
        return ((str(k), v) for k, v in tools.items())
    return ((_tool_name(t, ""), t) for t in tools)


def resolve_tool(
    tools: ToolLookup | None, name: object, *, aliases: Mapping[str, str] | None = None
) -> Any | None:
    """The one tool of ``tools`` that ``name`` means, or ``None`` (an unknown tool).

    Args:
        tools: A `ToolSet` or `ToolRegistry` (their own ``get`` applies these same rules), a
            mapping of name to tool, or an iterable of tools.
        name: The requested name.
        aliases: Alias -> tool name; default the built-in aliases.
    """
    if tools is None or not isinstance(name, str):
        return None
    # ToolSet and ToolRegistry say so: their own ``get`` applies these same rules
    if getattr(type(tools), "resolves_names", False) and aliases is None:
        return cast(ToolContainer, tools).get(name)
    if not isinstance(tools, Mapping) and callable(getattr(tools, "get", None)):
        return _resolve_with_getter(tools, name, aliases)
    entries = list(_entries(tools))
    for key, tool in entries:  # an exact match
        if key == name:
            return tool
    wanted = name_key(name)
    if wanted is None:  # not ASCII, or not a name at all: never folded
        return None
    for key, tool in entries:
        if name_key(key) == wanted:
            return tool
    target = (builtin_aliases() if aliases is None else aliases).get(wanted)
    if target is None or target == wanted:
        return None
    return resolve_tool(dict(entries), target, aliases={})


def _resolve_with_getter(
    tools: Any, name: str, aliases: Mapping[str, str] | None
) -> Any | None:
    """Ask a foreign container's ``get``, but only for a valid name, and keep its answer only
    when it is the tool the name means (its own lookup may fold more than ours)."""
    wanted = name_key(name)
    if wanted is None:
        return None
    target = (builtin_aliases() if aliases is None else aliases).get(wanted)
    accepted = {wanted} if target is None else {wanted, target.lower()}
    for asked in dict.fromkeys([name, wanted, *([target] if target else [])]):
        try:
            found = tools.get(asked)
        except LookupError:  # ToolNotFoundError is a KeyError
            continue
        if found is not None and name_key(_tool_name(found, asked)) in accepted:
            return found
    return None


def canonical_call(call: ToolCall, tools: ToolLookup) -> tuple[ToolCall, Any | None]:
    """``call`` named by the tool it resolves to, and that tool; ``(call, None)`` if unknown.

    The canonical name is the registered tool's own name, so the guard, the rate limits, the
    ledger, the span and the observation all see one name for one tool.
    """
    tool = resolve_tool(tools, call.name)
    if tool is None:
        return call, None
    canonical = _tool_name(tool, call.name)
    if canonical != call.name:
        call = dataclasses.replace(call, name=canonical)
    return call, tool


def _one_number(value: Any) -> Any:
    """``value``, an integral float as the integer it equals: JSON has one number 10000, which
    ``10000.0`` spells too (JSON Schema's ``integer`` takes it, a server reads it as 10000)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def received_call(call: ToolCall, tool: Any) -> ToolCall | None:
    """``call`` with the arguments the model sent as ``tool`` receives them (validated and
    coerced by its schema, as JSON, a whole number as an integer: ``"+10000"`` for an ``int``
    is ``10000``, and ``10000.0`` is for every tool; ``"yes"`` for a ``bool`` is ``true``; a
    bare value for a tool whose input is not an object is its ``input``), when that differs
    from how they were sent; else None (the same, or not fitting: the executor refuses such a
    call).

    Only the arguments the model gave are kept: a default the tool fills in is not a value
    the call sent (a rule on a missing argument already reads the schema's default).
    """
    validate = getattr(tool, "validate_args", None)
    sent = call.arguments
    # as `Tool.bind_args` wraps it: a rule on `input` reads the value sent bare
    wrapped = bool(getattr(tool, "wraps_input", False)) and not isinstance(sent, dict)
    if wrapped:
        sent = {"input": sent} if sent is not None else {}
    if validate is None or not isinstance(sent, dict) or not sent:
        return None
    try:
        values = validate(sent)
    except ToolError:  # refused before it runs, as the model's own spelling
        return None
    if not isinstance(values, dict):
        return None
    from pydantic_core import to_jsonable_python  # only when a rule reads an argument

    received = {
        key: _one_number(to_jsonable_python(values[key], fallback=str))
        for key in sent if key in values
    }
    # compared as JSON: 10000.0 == 10000 and True == 1 in Python, not in a rule's text
    same = not wrapped and json.dumps(received, sort_keys=True, default=str) == json.dumps(
        {key: sent[key] for key in received}, sort_keys=True, default=str)
    return None if same else dataclasses.replace(call, arguments=received)


# -- the registry ----------------------------------------------------------------------------


def _key(tool: Tool) -> str:
    """The index key of a tool: its name in ASCII lower case; other names are refused."""
    key = name_key(tool.name) if isinstance(tool.name, str) else None
    if key is None:
        problem = check_tool_name(tool.name)
        raise ToolValidationError(str(tool.name), [problem or "invalid name"])
    return key


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, ToolError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _refuse_text_arguments(found: Tool, args: Any) -> str | None:
    """Why the arguments are refused, as the executor refuses a model's (``None`` if they are
    not): text that is not a JSON object, or arguments nesting past `MAX_ARGUMENT_NESTING`."""
    if isinstance(args, dict | list):
        decoded: Any = args
    elif not isinstance(args, (str, bytes)) or found.wraps_input:
        return None
    else:
        text = args.decode(errors="replace") if isinstance(args, bytes) else args
        if not text.strip():
            return None  # no arguments
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
            decoded = None
        if not isinstance(decoded, dict):
            return not_json_message(found.name, found.parameters, text)
    if nests_within(decoded, MAX_ARGUMENT_NESTING):
        return None
    return not_json_message(found.name, found.parameters, TOO_DEEP)


def _export_openai(tools: list[Tool], strict: bool) -> list[dict[str, Any]]:
    """``to_openai`` of each tool; the tools that cannot be exported are named all at once.

    Raises:
        ToolValidationError: naming every tool that strict mode cannot express.
    """
    out: list[dict[str, Any]] = []
    failed: list[ToolValidationError] = []
    for t in tools:
        try:
            out.append(t.to_openai(strict=strict))
        except ToolValidationError as exc:
            failed.append(exc)
    if len(failed) == 1:
        raise failed[0]
    if failed:
        names = ", ".join(repr(e.tool) for e in failed)
        raise ToolValidationError(
            ", ".join(e.tool for e in failed),
            [f"tool {e.tool!r}: {p}" for e in failed for p in e.problems]
            + [f"{len(failed)} tools cannot be exported in strict mode ({names}); remove "
               "them with ToolSet.remove(name) or export with strict=False"],
        )
    return out


def as_tools(tools: Any) -> Any:
    """``tools`` (a list, or a `ToolSet` or None as they are) with each function in it (a
    bound method, a builtin, a partial too) made a tool as ``@tool`` makes one, as LangGraph's
    and pydantic-ai's agents take them.

    Raises:
        TypeError: ``tools`` is one tool, a name or a dict, not a list of them.
        ToolValidationError: two different tools share a name.
    """
    if tools is None or isinstance(tools, ToolSet):
        return tools
    if isinstance(tools, (str, Mapping, Tool)) or not isinstance(tools, Iterable):
        raise TypeError(f"tools= is a list of tools, got {type(tools).__name__} {tools!r}: "
                        f"write tools=[...] around it")
    items = tools if isinstance(tools, list) else list(tools)
    made = as_tool_items(items)
    return items if all(a is b for a, b in zip(made, items, strict=True)) else made


def _indexed(tools: Iterable[Tool], *, replace: bool) -> ToolRegistry:
    """A registry of ``tools``; a tool of a name already held replaces it, or is refused
    unless ``replace`` (the same tool again is kept once either way)."""
    registry = ToolRegistry()
    for t in tools:
        if isinstance(t, str):
            raise TypeError(
                f"ToolSet holds Tool instances, got the name {t!r}; built-in tools by name "
                f"are ToolSet.resolve([{t!r}]) (its .tools joins a list of your own)"
            )
        if not isinstance(t, Tool):
            raise TypeError(f"ToolSet holds Tool instances: {not_a_tool(t)}")
        registry._put(t, replace=replace)
    return registry


class ToolSet:
    """An immutable collection of tools with lookup, export and execution."""

    resolves_names: ClassVar[bool] = True
    """`get` resolves a name as `resolve_tool` does."""

    __slots__ = ("__weakref__", "_cache", "_exact", "_index", "_registry")

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        """A set of ``tools``; the same tool given twice is one.

        Raises:
            ToolValidationError: two different tools share a name (in any ASCII case): the
                model could reach only one of them (`with_tools` replaces one on purpose).
        """
        self._bind(_indexed(tools, replace=False))

    @classmethod
    def _replacing(cls, tools: Iterable[Tool]) -> ToolSet:
        """A set of ``tools`` where a later tool of a name replaces the earlier one."""
        made = cls.__new__(cls)
        made._bind(_indexed(tools, replace=True))
        return made

    def _bind(self, registry: ToolRegistry) -> None:
        self._registry = registry
        # the registry's own maps, read directly on the hot path (a set never changes them)
        self._index = registry._tools
        self._exact = registry._exact
        self._cache: dict[Any, Any] = {}

    @classmethod
    def view(cls, registry: ToolRegistry) -> ToolSet:
        """A set over ``registry``, which must not change afterwards (`ToolRegistry.toolset`
        hands it a copy)."""
        made = cls.__new__(cls)
        made._bind(registry)
        return made

    @property
    def registry(self) -> ToolRegistry:
        """The set's tools as a registry of their own (a copy: the set stays as it is)."""
        return self._registry.copy()

    # -- factories ------------------------------------------------------------------------

    @classmethod
    def from_tools(cls, tools: Iterable[Tool]) -> ToolSet:
        """A set of the given tool instances (two different tools of one name are refused)."""
        return cls(tools)

    @classmethod
    def from_openai(
        cls,
        definitions: Iterable[Mapping[str, Any]],
        functions: Mapping[str, Callable[..., Any]] | Iterable[Callable[..., Any]],
        *,
        metadata: Mapping[str, ToolMetadata] | None = None,
    ) -> ToolSet:
        """Tools from OpenAI function definitions, each calling the function of its name.

        ``functions`` maps each definition's name to its function, or lists functions whose
        ``__name__`` is that name; ``metadata`` gives a tool's `ToolMetadata` by name
        (``{"cancel_order": {"confirm": True}}``). See `Tool.from_openai`.

        Raises:
            ToolDefinitionError: a definition without a function, a function without a
                definition, two definitions of one name (in any ASCII case), or definitions
                that are not valid (each one named with its problems, in one error).
        """
        if isinstance(functions, Mapping):
            by_name = dict(functions)
        else:
            by_name = {callable_name(f): f for f in functions}
        chosen = dict(metadata or {})
        tools: list[Tool] = []
        named: set[str] = set()
        missing: list[str] = []
        first: dict[str, str] = {}  # each definition's name by its key (ASCII lower case)
        refused: list[ToolDefinitionError] = []  # every invalid definition, named at once
        for definition in definitions:
            inner = openai_function(definition)
            name = inner.get("name")
            key = name_key(name) if isinstance(name, str) else None
            if key is not None and key in first:
                # one index key is one tool: the later definition replaced the earlier, and
                # a call by the earlier's name ran the later's function
                missing.append(
                    f"definition {name!r} is given twice" if first[key] == name else
                    f"definitions {first[key]!r} and {name!r} name one tool (names match "
                    "without ASCII case); rename one"
                )
                named.add(name)  # type: ignore[arg-type]  # its function is not unnamed
                continue
            if key is not None:
                first[key] = name  # type: ignore[assignment]
            fn = by_name.get(name) if isinstance(name, str) else None
            if fn is None:
                missing.append(f"definition {name!r} has no function")
                continue
            named.add(name)  # type: ignore[arg-type]
            try:  # the inner definition, found once (Tool.from_openai would look again)
                tools.append(_from_function(inner, fn, {**chosen.pop(name, {})}))  # type: ignore[arg-type]
            except ToolDefinitionError as exc:
                refused.append(exc)
        missing += [f"function {n!r} has no definition" for n in by_name if n not in named]
        missing += [f"metadata for {n!r} names no definition" for n in chosen]
        if len(refused) == 1 and not missing:
            raise refused[0]
        if refused:  # each invalid definition named with its problems, not the first alone
            raise ToolDefinitionError(", ".join(exc.tool for exc in refused), [
                *(f"{exc.tool}: {problem}" for exc in refused for problem in exc.problems),
                *missing,
            ])
        if missing:
            raise ToolDefinitionError(", ".join(sorted(set(by_name) - named)) or "toolset", [
                *missing, f"definitions: {', '.join(sorted(named)) or 'none'}"
            ])
        return cls(tools)

    @classmethod
    def resolve(
        cls,
        names: Iterable[str] = (),
        custom: Iterable[Tool] | None = None,
        *,
        strict: bool = False,
        provider: BuiltinToolProvider | None = None,
    ) -> ToolSet:
        """Built-in tools by name, plus ``custom`` tools (which win over built-ins of a name).

        A built-in that cannot be loaded is skipped with a `ToolUnavailableWarning` naming the
        missing extra; ``strict=True`` raises instead.
        """
        from jianmu.tools.providers import BuiltinToolProvider

        if isinstance(names, str):  # one name, not its letters each a name
            names = [names]
        names = list(names)
        for name in names:
            if not isinstance(name, str):
                what = getattr(name, "name", None)
                raise TypeError(
                    f"ToolSet.resolve takes built-in tools' names, got {type(name).__name__}"
                    + (f" {what!r}" if isinstance(what, str) else "")
                    + "; give your own tools as custom=[...] (or ToolSet([...]))"
                )
        source = provider if provider is not None else BuiltinToolProvider.default()
        custom_list = list(custom or ())
        named = source.resolve_named_tools(names, custom_list, strict=strict)
        return cls._replacing([*named, *custom_list]) if custom_list else cls(named)

    @classmethod
    async def from_providers(cls, providers: Iterable[ToolProvider], **kwargs: Any) -> ToolSet:
        """Initialise each provider and gather its tools (providers stay open).

        Raises:
            ToolValidationError: two providers give tools of one name (ignoring ASCII case),
                such as two MCP servers of one name: one would answer for the other.
        """
        tools: dict[str, tuple[Tool, Any]] = {}
        for provider in providers:
            await provider.initialize()
            for made in provider.get_tools(**kwargs):
                key = _key(made)
                taken = tools.setdefault(key, (made, provider))
                if taken[0] is not made:
                    raise ToolValidationError(made.name, [
                        f"{taken[1]!r} and {provider!r} both give a tool of this name; "
                        "rename one (an MCP server's name starts its tools' names)"
                    ])
        return cls(t for t, _ in tools.values())

    @staticmethod
    def list_builtin_names() -> list[str]:
        """Names of the built-in tools that `resolve` knows."""
        from jianmu.tools.providers import BuiltinToolProvider

        return BuiltinToolProvider.default().list_builtin_names()

    def merge(self, *others: ToolSet | Iterable[Tool]) -> ToolSet:
        """A new set with the tools of ``others`` added; later ones win."""
        tools = list(self._index.values())
        for other in others:
            tools.extend(other)
        return ToolSet._replacing(tools)

    def with_tools(self, tools: Iterable[Tool]) -> ToolSet:
        """A new set with ``tools`` added or replacing tools of the same name."""
        return ToolSet._replacing([*self._index.values(), *tools])

    # -- lookup ---------------------------------------------------------------------------

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools, in insertion order."""
        return tuple(self._index.values())

    def get(self, name: str) -> Tool | None:
        """The one tool ``name`` means, or ``None``: exact, ASCII case-insensitive, alias.

        A name that is not ASCII ``[A-Za-z0-9_-]{1,64}`` is never folded: it is unknown.
        """
        found = self._exact.get(name) if type(name) is str else None
        return found if found is not None else lookup_keyed(self._index, name)

    def canonical(self, call: ToolCall) -> tuple[ToolCall, Tool | None]:
        """``call`` renamed to the tool it means, and that tool; ``(call, None)`` if unknown."""
        found = self.get(call.name)
        if found is None:
            return call, None
        if found.name != call.name:
            call = dataclasses.replace(call, name=found.name)
        return call, found

    def __getitem__(self, name: str) -> Tool:
        found = self.get(name)
        if found is None:
            raise ToolNotFoundError(
                f"no tool named {name!r}; known tools: {', '.join(self.names()) or 'none'}"
            )
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._index.values())

    def __len__(self) -> int:
        return len(self._index)

    def __bool__(self) -> bool:
        return bool(self._index)

    def __repr__(self) -> str:
        return f"ToolSet({self.names()!r})"

    def names(self) -> list[str]:
        """Tool names in insertion order."""
        return [t.name for t in self._index.values()]

    def describe(self) -> str:
        """A bullet list ``- name: first line of the description`` for prompts."""
        lines = []
        for t in self._index.values():
            text = t.get_description().strip().splitlines()
            lines.append(f"- {t.name}: {text[0] if text else ''}".rstrip(": ").rstrip())
        return "\n".join(lines)

    def is_parallel_safe(self, names: Iterable[str] | None = None) -> bool:
        """Whether every named tool (default: all) is parallel-safe; unknown names are not."""
        chosen = self.names() if names is None else list(names)
        for name in chosen:
            found = self.get(name)
            if found is None or not found.parallel_safe:
                return False
        return True

    # -- lifecycle and selection -------------------------------------------------------

    def deprecate(self, name: str, reason: str = "") -> ToolSet:
        """A new set where ``name`` is marked deprecated (kept, but left out of schemas).

        Raises:
            ToolNotFoundError: no tool of that name.
        """
        original = self[name]
        marked = copy.copy(original)
        marked.__dict__.pop("_jm_params", None)
        marked.deprecated = True
        marked.metadata = {**dict(original.metadata), "deprecation_reason": reason}
        return ToolSet(marked if t is original else t for t in self._index.values())

    def remove(self, name: str) -> ToolSet:
        """A new set without ``name``.

        Raises:
            ToolNotFoundError: no tool of that name.
        """
        gone = self[name]
        return ToolSet(t for t in self._index.values() if t is not gone)

    def active(self) -> ToolSet:
        """The tools that are not deprecated."""
        return ToolSet(t for t in self._index.values() if not t.deprecated)

    def by_category(self, category: str | Enum) -> ToolSet:
        """Active tools of ``category`` (read, write, execute, communicate, dangerous)."""
        wanted = getattr(category, "value", category)
        return ToolSet(
            t for t in self._index.values() if t.category == wanted and not t.deprecated
        )

    def by_tag(self, tag: str) -> ToolSet:
        """Active tools carrying ``tag``."""
        return ToolSet(t for t in self._index.values() if tag in t.tags and not t.deprecated)

    # -- export ---------------------------------------------------------------------------

    def _chosen(self, include_deprecated: bool) -> list[Tool]:
        return [t for t in self._index.values() if include_deprecated or not t.deprecated]

    def _cached(self, key: Any, build: Any) -> list[dict[str, Any]]:
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = build()
        return list(found)

    def schemas(self, *, include_deprecated: bool = False) -> list[dict[str, Any]]:
        """``to_schema()`` of each active tool (all with ``include_deprecated``); cached."""
        return self._cached(
            ("schema", include_deprecated),
            lambda: [t.to_schema() for t in self._chosen(include_deprecated)],
        )

    def specs(self, *, include_deprecated: bool = False) -> list[dict[str, Any]]:
        """``spec()`` of each active tool; cached."""
        return self._cached(
            ("spec", include_deprecated),
            lambda: [t.spec() for t in self._chosen(include_deprecated)],
        )

    def to_openai(self, *, strict: bool = False, include_deprecated: bool = False) -> list[
        dict[str, Any]
    ]:
        """OpenAI tool definitions of the active tools; cached."""
        return self._cached(
            ("openai", strict, include_deprecated),
            lambda: _export_openai(self._chosen(include_deprecated), strict),
        )

    def to_anthropic(self, *, include_deprecated: bool = False) -> list[dict[str, Any]]:
        """Anthropic tool definitions of the active tools; cached."""
        return self._cached(
            ("anthropic", include_deprecated),
            lambda: [t.to_anthropic() for t in self._chosen(include_deprecated)],
        )

    def to_mcp(self, *, include_deprecated: bool = False) -> list[dict[str, Any]]:
        """MCP tool definitions of the active tools; cached."""
        return self._cached(
            ("mcp", include_deprecated),
            lambda: [t.to_mcp() for t in self._chosen(include_deprecated)],
        )

    # -- lifecycle ------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close what the tools hold (an MCP server's connection and process); idempotent."""
        for t in self._index.values():
            await t.aclose()

    async def __aenter__(self) -> ToolSet:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- execution ------------------------------------------------------------------------

    async def execute(
        self,
        name: str,
        args: Any = None,
        *,
        injected: Mapping[str, Any] | None = None,
        runner: ToolRunner | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """Run ``name`` and return a `ToolResult`; never raises for the tool's failures.

        An unknown name, bad arguments, a timeout or any exception from the tool becomes
        ``ok=False`` with the reason; output is cut to the tool's ``max_result_length``.
        """
        found = self.get(name)
        if found is None:
            return ToolResult(
                tool=shown_name(name), ok=False, call_id=call_id, duration_ms=0.0,
                error=unknown_tool_text(name, self.names()),
            )
        if isinstance(args, str) and not found.wraps_input:
            decoded = decode_arguments(args)  # as a model's call is read (`ToolCall`): an
            if type(decoded) is dict:  # object encoded twice, as a JSON string, is the object
                args = decoded
        refused = _refuse_text_arguments(found, args)
        if refused is not None:  # as the executor does: the model must send a JSON object
            return ToolResult(
                tool=found.name, ok=False, error=refused, call_id=call_id, duration_ms=0.0
            )
        start = time.perf_counter()
        try:
            raw = await found.execute(args, injected=injected, runner=runner)
        except Exception as exc:  # the agent loop sees an observation, never a crash
            return ToolResult(
                tool=found.name, ok=False, error=_error_text(exc), call_id=call_id,
                duration_ms=(time.perf_counter() - start) * 1000,
            ).truncate(found.max_result_length)
        elapsed = (time.perf_counter() - start) * 1000
        result = ToolResult.from_raw(found.name, raw, call_id=call_id, duration_ms=elapsed)
        return result.truncate(found.max_result_length)


class ToolRegistry:
    """A mutable, validated, name-keyed collection of tools (O(1); names as in `ToolSet`)."""

    resolves_names: ClassVar[bool] = True
    """`get` resolves a name as `resolve_tool` does."""

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
        """The tools by `name_key` (ASCII lower case), in registration order."""
        self._exact: dict[str, Tool] = {}
        """The tools by their own name: the common lookup is one dict get."""
        self.require_parameter_descriptions = require_parameter_descriptions
        self.timeout_seconds = timeout_seconds
        self.max_result_length = max_result_length
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> Tool:
        """Validate and add ``tool``; a tool of the same name is replaced.

        Raises:
            ToolValidationError: listing every problem of the definition.
        """
        if not isinstance(tool, Tool):
            raise TypeError(f"register() takes a Tool, got {tool!r}; wrap functions with @tool")
        tool.check_definition(require_parameter_descriptions=self.require_parameter_descriptions)
        self._put(tool)
        return tool

    def _put(self, tool: Tool, *, replace: bool = True) -> None:
        """Index ``tool`` (the one place a tool enters a registry or a `ToolSet`); a tool
        of a name already held replaces it, or is refused unless ``replace`` (the same tool
        again is kept once either way).

        Raises:
            ToolValidationError: the name is not a valid tool name, or another tool holds it
                and not ``replace``.
            ToolDefinitionError: an injected parameter shadows a schema property, or the tool
                is a method read from its class (no call would give its ``self``).
        """
        tool.injection()  # an injected parameter may not shadow a schema property
        if isinstance(tool, FunctionTool) and (problem := tool.unbound_problem()) is not None:
            raise ToolDefinitionError(tool.name, [problem])
        key = _key(tool)
        old = self._tools.get(key)
        if not replace and old is not None and old is not tool:
            raise name_clash(old, tool)
        if old is not None and old.name != tool.name:
            self._exact.pop(old.name, None)
        self._tools[key] = tool  # a name registered again keeps its first position
        self._exact[tool.name] = tool

    def _drop(self, key: str) -> Tool:
        gone = self._tools.pop(key)
        self._exact.pop(gone.name, None)
        return gone

    def copy(self) -> ToolRegistry:
        """A registry with the same tools and settings, changed apart from this one."""
        twin = ToolRegistry(
            require_parameter_descriptions=self.require_parameter_descriptions,
            timeout_seconds=self.timeout_seconds, max_result_length=self.max_result_length,
        )
        twin._tools = dict(self._tools)
        twin._exact = dict(self._exact)
        return twin

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
        """The one tool ``name`` means (exact, ASCII case-insensitive, alias), or ``None``.

        A name that is not ASCII ``[A-Za-z0-9_-]{1,64}`` is never folded: it is unknown.
        """
        found = self._exact.get(name) if type(name) is str else None
        return found if found is not None else lookup_keyed(self._tools, name)

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
        """OpenAI tool definitions of the active tools."""
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
        self._exact[marked.name] = marked

    def remove(self, name: str) -> Tool:
        """Remove ``name`` and return it.

        Raises:
            ToolNotFoundError: no tool of that name.
        """
        return self._drop(self._require(name))

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
        """An immutable `ToolSet` view of every registered tool (deprecation flags kept); later
        changes to this registry do not reach it."""
        return ToolSet.view(self.copy())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()!r})"
