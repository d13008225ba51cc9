"""The built-in tools' aliases: older names that resolve to a built-in (seed 000).

The table lives here, below the tool containers and the guard, so that name resolution
(`jianmu.tools.names`) reads it without importing the provider that registers aliases.
"""

from __future__ import annotations

__all__ = ("DEFAULT_ALIASES", "reset_shared_aliases", "shared_aliases")

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
