"""Map the open Agent Skills ``allowed-tools`` entries to Jianmu tool names and rule keys.

``allowed-tools: Read Grep Bash(git:*) mcp__github__create_issue`` lists the tools a skill uses,
spelled as Claude Code spells them. Each entry becomes the Jianmu tools it stands for (``Read``
→ ``read_file`` and ``read_skill_file``) and a ``tool_policy`` rule key (``Bash(git:*)`` →
``bash(git *)``), parsed with the guard's own rule parser. In Jianmu they make tools available
but never pre-approve them: a skill may only tighten, so whether a tool asks first is the
config's decision (see ``loader``).

An entry Jianmu has no tool for (``Task``, ``TodoWrite``, ``NotebookEdit``, a misspelling, a
pattern the rule parser refuses) is not an error — the reference validator ``skills-ref``
accepts any string — but a warning kept on the `Skill` (``Skill.warnings``, shown by
``jianmu skills validate``), and the entry is ignored at run time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jianmu.errors import ConfigError
from jianmu.guard._rules import parse_rule
from jianmu.mcp.provider import mcp_tool_names

__all__ = (
    "CLAUDE_TOOL_NAMES",
    "READ_SKILL_FILE",
    "AllowedTool",
    "map_allowed_tool",
    "map_allowed_tools",
    "split_allowed_tools",
)

READ_SKILL_FILE = "read_skill_file"
"""The tool that reads a file of a loaded skill's folder (added by the `SkillNode`)."""

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

_ALSO_GRANTS: dict[str, tuple[str, ...]] = {"read": (READ_SKILL_FILE,)}
"""Claude's ``Read`` also reads the skill's own files; Jianmu needs a second tool for that."""

_MCP_PREFIX = "mcp__"
"""Claude Code names an MCP tool ``mcp__<server>__<tool>``; Jianmu's is ``<server>__<tool>``."""

# an entry is a name, optionally followed by a parenthesised pattern that may hold spaces
_ENTRY_RE = re.compile(r"[^\s()]+(?:\([^()]*\))?")

ToolChecker = Callable[[str], bool]


@dataclass(frozen=True, kw_only=True)
class AllowedTool:
    """One ``allowed-tools`` entry, mapped (or ignored, with the reason in `warning`)."""

    entry: str
    """The entry as written, e.g. ``Bash(git:*)``."""
    tool: str | None
    """The Jianmu tool name, e.g. ``bash``; ``None`` when Jianmu has no such tool."""
    rule: str | None
    """The ``tool_policy`` key, e.g. ``bash(git *)`` (the bare tool name without a pattern);
    ``None`` when the entry is ignored."""
    tools: tuple[str, ...] = ()
    """Every Jianmu tool the entry makes available: ``Read`` → ``read_file``,
    ``read_skill_file``; empty when the entry is ignored."""
    warning: str | None = None
    """Why the entry is ignored; ``None`` when it maps to a tool."""


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


def _ignored(entry: str, why: str) -> AllowedTool:
    return AllowedTool(entry=entry, tool=None, rule=None, warning=f"{entry!r} {why}; ignored")


def _mcp_name(name: str) -> str | None:
    """``mcp__github__create_issue`` → ``github__create_issue`` (``mcp__github`` → ``github``),
    spelled as `MCPToolProvider` names the tool; ``None`` for a name without a server."""
    server, _, tool = name[len(_MCP_PREFIX):].partition("__")
    if not server:
        return None
    return mcp_tool_names(server, [tool])[0].lower() if tool else server


def map_allowed_tool(entry: str, is_known: ToolChecker | None = None) -> AllowedTool:
    """Map one entry such as ``Bash(git:*)`` to Jianmu tool names and a rule key.

    Claude Code's names map through `CLAUDE_TOOL_NAMES`; Claude's prefix pattern
    ``Bash(git:*)`` ("``git`` then anything") becomes the glob rule ``bash(git *)``;
    ``mcp__server__tool`` becomes the MCP tool ``server__tool``. An entry naming a tool Jianmu
    does not have comes back ignored (``tool`` is ``None``, ``warning`` says why).

    Args:
        entry: The entry as written in SKILL.md.
        is_known: Accepts Jianmu tool names that need no mapping (built-ins, aliases, MCP
            tools, custom tools); ``None`` accepts only mapped names.

    Raises:
        ValueError: the entry's pattern is invalid (empty parentheses, ``:*`` without a prefix).
    """
    try:
        rule = parse_rule(entry)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    name = rule.tool
    if name in CLAUDE_TOOL_NAMES:
        mapped = CLAUDE_TOOL_NAMES[name]
    elif name.startswith(_MCP_PREFIX):
        found = _mcp_name(name)
        if found is None:
            return _ignored(entry, "names no MCP server (write 'mcp__server__tool')")
        mapped = found
        if not (is_known is not None and is_known(mapped)):
            # kept: the server may be configured where the skill runs; unconfigured, the
            # SkillNode connects nothing and the toolset skips the name
            server = mapped.partition("__")[0]
            return AllowedTool(
                entry=entry, tool=mapped, rule=_rule_key(entry, mapped, rule.prefix),
                tools=(mapped,),
                warning=f"{entry!r}: no MCP server {server!r} is configured under mcp.servers; "
                        "the tool is unavailable until one is",
            )
    elif is_known is not None and is_known(name):
        mapped = name
    else:
        return _ignored(entry, "is not a tool Jianmu has (known: Bash, Read, Write, Edit, "
                               "MultiEdit, Glob, Grep, LS, WebFetch, WebSearch, mcp__server__tool "
                               "and Jianmu tool names)")
    return AllowedTool(
        entry=entry, tool=mapped, rule=_rule_key(entry, mapped, rule.prefix),
        tools=(mapped, *_ALSO_GRANTS.get(name, ())),
    )


def _rule_key(entry: str, tool: str, prefix: bool) -> str:
    """The rule key: the Jianmu tool name, then the entry's pattern (``git:*`` → ``git *``)."""
    if "(" not in entry:
        return tool
    inner = entry[entry.index("(") + 1 : entry.rindex(")")].strip()
    if inner == "*":
        return tool
    if prefix:
        # Claude's `cmd:*` is "cmd, then anything": the glob `cmd *` (Jianmu's `cmd:*` would
        # also match a bare `cmd`; the glob is the stricter spelling the issue asks for)
        inner = inner[:-2].rstrip() + " *"
    return f"{tool}({inner})"


def map_allowed_tools(
    value: str | Sequence[str], is_known: ToolChecker | None = None
) -> tuple[tuple[AllowedTool, ...], tuple[str, ...]]:
    """Map an ``allowed-tools`` value (the space-separated string or a list).

    Never raises for what the reference validator accepts: an entry that cannot be split or
    parsed, or names no tool, is ignored with a warning.

    Returns:
        The mapped entries (ignored ones included, with their ``warning``), and the warnings.
    """
    notes: list[str] = []
    if isinstance(value, str):
        try:
            entries = split_allowed_tools(value)
        except ValueError as exc:
            notes.append(f"{exc}; split at spaces instead")
            entries = value.split()
    else:
        entries = [str(e) for e in value]
    mapped: list[AllowedTool] = []
    for entry in entries:
        try:
            item = map_allowed_tool(entry, is_known)
        except ValueError as exc:
            item = _ignored(entry, f"has an invalid pattern ({exc})")
        mapped.append(item)
        if item.warning is not None:
            notes.append(item.warning)
    return tuple(mapped), tuple(notes)
