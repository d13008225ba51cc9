"""Tool names: the one way a name a model (or a client) sent resolves to a registered tool.

A tool's name is ASCII, ``^[A-Za-z0-9_-]{1,64}$``. A requested name resolves to exactly one
tool by, in order: an exact match; an ASCII case-insensitive match (only for a name that is
itself a valid tool name); an alias (``file_read`` is ``read_file``). Anything else is an
unknown tool. Nothing here folds Unicode (no ``casefold()``, no normalisation): ``baſh`` (long
s), ``write_ﬁle`` (a ligature) or fullwidth letters are unknown tools, never ``bash`` or
``write_file`` — otherwise a look-alike name could reach a tool that a rule written for its
real name denies.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from jianmu.tools.calls import ToolCall

__all__ = (
    "DEFAULT_ALIASES",
    "MAX_TOOL_NAME_LENGTH",
    "TOOL_NAME_PATTERN",
    "ToolContainer",
    "ToolLookup",
    "builtin_aliases",
    "canonical_call",
    "check_tool_name",
    "is_tool_name",
    "lookup_keyed",
    "name_key",
    "reset_shared_aliases",
    "resolve_tool",
    "shared_aliases",
    "shown_name",
)

DEFAULT_ALIASES: dict[str, str] = {
    "file_read": "read_file",
    "web_search": "duckduckgo_search",
}
"""Older names that resolve to a built-in."""

_shared: dict[str, str] = dict(DEFAULT_ALIASES)


def shared_aliases() -> dict[str, str]:
    """The live alias table of the shared `BuiltinToolProvider` (alias -> built-in name)."""
    return _shared


def reset_shared_aliases() -> None:
    """Forget aliases registered on the shared provider (for tests)."""
    _shared.clear()
    _shared.update(DEFAULT_ALIASES)

_T = TypeVar("_T")


class ToolContainer(Protocol):
    """A `ToolSet` or `ToolRegistry`: its ``get`` resolves names by the rules of this module."""

    resolves_names: ClassVar[bool]

    def get(self, name: str) -> Any:
        """The tool ``name`` means, or ``None``."""


ToolLookup = ToolContainer | Mapping[str, Any] | Iterable[Any]
"""Where a name is looked up: a tool container, a mapping of name to tool, or tools."""

MAX_TOOL_NAME_LENGTH = 64
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
"""What a tool name may be (``\\Z``, not ``$``, which would accept a trailing newline)."""


def is_tool_name(name: object) -> bool:
    """Whether ``name`` is a valid tool name: ASCII letters, digits, ``_`` and ``-``, 1-64."""
    return isinstance(name, str) and TOOL_NAME_PATTERN.fullmatch(name) is not None


def check_tool_name(name: object) -> str | None:
    """The problem with ``name`` as a tool name, or ``None`` when it is valid."""
    if is_tool_name(name):
        return None
    return f"name {name!r} must match ^[A-Za-z0-9_-]{{1,64}}$ (ASCII letters, digits, _ and -)"


def name_key(name: str) -> str | None:
    """The case-insensitive key of a valid name (ASCII lower case); ``None`` for any other.

    Only ASCII is lower-cased: ``str.lower()`` maps some non-ASCII letters to ASCII ones (the
    Kelvin sign ``K`` becomes ``k``), which would let a look-alike pass for a real name.
    """
    return name.lower() if is_tool_name(name) else None


def shown_name(name: object) -> str:
    """``name`` safe to print and to send back to a model: escaped, at most 80 characters."""
    text = name if isinstance(name, str) else repr(name)
    if is_tool_name(text):
        return text
    escaped = ascii(text)[1:-1]
    return escaped if len(escaped) <= 80 else escaped[:79] + "…"


def builtin_aliases() -> dict[str, str]:
    """Alias -> built-in name, from the shared `BuiltinToolProvider` (``file_read`` ...)."""
    return dict(shared_aliases())


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
