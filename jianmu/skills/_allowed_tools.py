"""Map the open Agent Skills ``allowed-tools`` entries to Jianmu tool names and rule keys.

``allowed-tools: Read Grep Bash(git:*)`` lists the tools a skill uses. Each entry becomes a
Jianmu tool name (``Read`` → ``read_file``) and a rule key (``Bash(git:*)`` → ``bash(git:*)``),
parsed with the guard's own rule parser so a bad entry fails at load time rather than at the
first call. In Jianmu they make tools available but never pre-approve them: a skill may only
tighten, so whether a tool asks first is the config's decision (see ``loader``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jianmu.errors import ConfigError
from jianmu.guard._rules import parse_rule

__all__ = ("CLAUDE_TOOL_NAMES", "AllowedTool", "map_allowed_tool", "split_allowed_tools")

CLAUDE_TOOL_NAMES: dict[str, str] = {
    "bash": "bash",
    "read": "read_file",
    "write": "write_file",
    "edit": "str_replace",
    "multiedit": "str_replace",
    "glob": "glob_search",
    "grep": "grep_search",
    "webfetch": "http_request",
    "websearch": "duckduckgo_search",
    "ls": "list_dir",
}
"""Tool names of the Agent Skills / Claude Code world (lower-cased) to Jianmu's built-ins."""

# an entry is a name, optionally followed by a parenthesised pattern that may hold spaces
_ENTRY_RE = re.compile(r"[^\s()]+(?:\([^()]*\))?")


@dataclass(frozen=True, kw_only=True)
class AllowedTool:
    """One ``allowed-tools`` entry, mapped."""

    entry: str
    """The entry as written, e.g. ``Bash(git:*)``."""
    tool: str
    """The Jianmu tool name, e.g. ``bash``."""
    rule: str
    """The ``tool_policy`` key, e.g. ``bash(git:*)`` (just the tool name without a pattern)."""


def split_allowed_tools(value: str) -> list[str]:
    """Split the space-separated form; spaces inside parentheses stay in their entry.

    Raises:
        ValueError: the text has unbalanced parentheses.
    """
    entries = _ENTRY_RE.findall(value)
    if re.sub(r"\s", "", "".join(entries)) != re.sub(r"\s", "", value):
        raise ValueError(
            f"cannot split allowed-tools {value!r}: check the parentheses, "
            "e.g. 'Read Grep Bash(git:*)'"
        )
    return entries


def map_allowed_tool(entry: str, is_known: object = None) -> AllowedTool:
    """Map one entry such as ``Bash(git:*)`` to a Jianmu tool name and rule key.

    Args:
        entry: The entry as written in SKILL.md.
        is_known: A callable ``name -> bool`` accepting Jianmu tool names that need no mapping
            (built-ins, aliases, MCP tools, custom tools); ``None`` accepts only mapped names.

    Raises:
        ValueError: the entry names no tool Jianmu knows, or its pattern is invalid.
    """
    try:
        rule = parse_rule(entry)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    mapped = CLAUDE_TOOL_NAMES.get(rule.tool)
    if mapped is None:
        if callable(is_known) and is_known(rule.tool):
            mapped = rule.tool
        else:
            known = "Bash, Read, Write, Edit, MultiEdit, Glob, Grep, WebFetch, WebSearch, LS"
            raise ValueError(
                f"unknown allowed-tools entry {entry!r}: use a Jianmu tool name or one of "
                f"{known} (optionally with a pattern such as 'Bash(git:*)')"
            )
    if rule.pattern is None:
        key = mapped
    else:
        inner = entry[entry.index("(") + 1 : entry.rindex(")")]
        key = f"{mapped}({inner.strip()})"
    return AllowedTool(entry=entry, tool=mapped, rule=key)
