"""Tool-policy rules: a tool name, or a tool name with an argument pattern.

The rule keys of ``GuardConstraints.tool_policy`` use the syntax coding agents made familiar:

- ``bash`` — every call of the tool (names compare case-insensitively); ``bash(*)`` is the same;
- ``bash(git status*)`` — a glob over the tool's *main* argument (see `Rule.value_of`);
- ``write_file(path:docs/*)`` — a glob over the named argument ``path``;
- ``Bash(git:*)`` — Claude Code's prefix form: the value is ``git`` or starts with ``git `` .

A ``name:`` prefix names an argument unless ``//`` follows it (a URL such as
``fetch(https://example.com/*)`` is a pattern). Globs are `fnmatch` globs matched
case-sensitively; ``*`` also crosses ``/``. A trailing ``:*`` always means the prefix form, so
``write_file(path:*)`` is the prefix ``path`` of the main argument; write ``write_file`` to
match every call.

Two safety rules make argument patterns hard to slip past:

- Shell commands (an argument named ``command``, ``cmd`` or ``script``, or any argument of a tool
  whose category is ``execute``) are split on shell operators (``&&``, ``||``, ``;``, ``|``,
  ``&``, ``$(``, backticks, parentheses, redirections, newlines). A rule *grants* (allow) only
  when every part matches — ``bash(git status*)`` does not allow ``git status; rm -rf /`` — and
  *restricts* (deny, confirm) when any part matches. (`ToolPolicyChecker` also lets several
  allow rules cover the parts together: ``git status | head`` with ``bash(git status*)`` and
  ``bash(head*)``.) Quotes are not parsed, so a quoted operator
  also splits: that can only make an allow rule not apply, never make a deny rule miss.
- Path arguments (a name containing ``path``, ``file`` or ``dir``) are normalised first, so
  ``docs/../secrets`` is matched as ``secrets``.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from jianmu.errors import ConfigError
from jianmu.tools.calls import ToolCall

__all__ = ("Rule", "parse_rule")

_RULE_RE = re.compile(r"^\s*([^()\s]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_KEY_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*:(.*)$", re.DOTALL)
_SHELL_SPLIT_RE = re.compile(r"&&|\|\||\$\(|[;&|\n\r`()<>]")
_SHELL_KEYS = frozenset({"command", "cmd", "script"})
_PATH_HINTS = ("path", "file", "dir")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _schema_main_argument(tool: Any, args: dict[str, Any]) -> str | None:
    """The first required string property of the tool's schema present in ``args``."""
    schema = getattr(tool, "input_schema", None)
    if not isinstance(schema, dict):
        return None
    props = schema.get("properties") or {}
    for name in schema.get("required") or ():
        spec = props.get(name) if isinstance(props, dict) else None
        if (
            isinstance(spec, dict)
            and spec.get("type") == "string"
            and isinstance(args.get(name), str)
        ):
            return str(name)
    return None


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One parsed ``tool_policy`` key: which tool, and optionally which argument values."""

    tool: str
    """The tool's name, lower-cased."""
    pattern: str | None = None
    """The glob (or prefix, when `prefix` is set); ``None`` matches every call of the tool."""
    key: str | None = None
    """The argument the pattern looks at; ``None`` means the tool's main argument."""
    prefix: bool = False
    """Claude Code's ``cmd:*`` form: the value equals the pattern or starts with it and a space."""
    text: str = ""
    """The rule as written."""

    @property
    def is_name_rule(self) -> bool:
        """Whether the rule names the whole tool, with no argument pattern."""
        return self.pattern is None

    def applies_to(self, tool_name: str) -> bool:
        """Whether the rule is about the tool called ``tool_name`` (case-insensitive)."""
        return self.tool == tool_name.strip().lower()

    def value_of(self, call: ToolCall, tool: Any = None) -> tuple[str | None, str] | None:
        """The argument the pattern is matched against, as ``(argument name, text)``.

        With a ``key``: that argument (non-strings as JSON); ``None`` when it is missing. Without
        one: raw non-JSON arguments as they came; else the first required string property of
        ``tool.input_schema``; else the only string argument; else the whole arguments as JSON
        (name ``None``).
        """
        args = call.arguments
        if self.key is not None:
            if not isinstance(args, dict) or self.key not in args:
                return None
            value = args[self.key]
            return self.key, value if isinstance(value, str) else _json(value)
        if isinstance(args, str):
            return None, args
        if not isinstance(args, dict):
            return None, _json(args)
        name = _schema_main_argument(tool, args)
        if name is None:
            strings = [k for k, v in args.items() if isinstance(v, str)]
            if len(strings) == 1:
                name = strings[0]
        if name is not None:
            return name, args[name]
        return None, _json(args)

    def split(self, name: str | None, value: str, tool: Any = None) -> list[str]:
        """The parts of an argument value: a shell command's commands, a normalised path."""
        shell = (name or "").lower() in _SHELL_KEYS or getattr(tool, "category", None) == "execute"
        if shell:
            parts = [p.strip() for p in _SHELL_SPLIT_RE.split(value)]
            return [p for p in parts if p] or [""]
        if name and any(hint in name.lower() for hint in _PATH_HINTS) and value:
            value = posixpath.normpath(value.replace("\\", "/"))
        return [value.strip()]

    def match_text(self, text: str) -> bool:
        """Whether one part matches the pattern (a pattern-less rule matches anything)."""
        if self.pattern is None:
            return True
        if self.prefix:
            return fnmatch.fnmatchcase(text, self.pattern) or fnmatch.fnmatchcase(
                text, self.pattern + " *"
            )
        return fnmatch.fnmatchcase(text, self.pattern)

    def matches(self, call: ToolCall, tool: Any = None) -> bool:
        """Whether the rule covers the whole call: the test for a rule that *grants* (allow).

        Every part of a shell command must match (see the module docstring).

        Args:
            call: The tool call.
            tool: The tool, when known; its ``input_schema`` finds the main argument and its
                ``category`` marks shell commands.
        """
        if not self.applies_to(call.name):
            return False
        if self.pattern is None:
            return True
        found = self.value_of(call, tool)
        if found is None:
            return False
        return all(self.match_text(part) for part in self.split(*found, tool))

    def matches_any_part(self, call: ToolCall, tool: Any = None) -> bool:
        """Whether the rule touches the call: the test for a rule that *restricts* (deny, confirm).

        Any part of a shell command may match; when no main argument can be told apart, every
        string argument is tried as well as the whole arguments as JSON.
        """
        if not self.applies_to(call.name):
            return False
        if self.pattern is None:
            return True
        found = self.value_of(call, tool)
        if found is None:
            return False
        candidates = [found]
        if found[0] is None and self.key is None and isinstance(call.arguments, dict):
            candidates += [(k, v) for k, v in call.arguments.items() if isinstance(v, str)]
        return any(
            self.match_text(part)
            for name, value in candidates
            for part in self.split(name, value, tool)
        )


def parse_rule(text: str) -> Rule:
    """Parse a ``tool_policy`` key such as ``bash(git status*)`` into a `Rule`.

    Raises:
        ConfigError: the text is empty, has unbalanced parentheses or an empty pattern.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(
            f"invalid tool rule {text!r}: write a tool name such as 'bash', "
            "optionally with an argument pattern such as 'bash(git status*)'"
        )
    m = _RULE_RE.match(text)
    if m is None:
        raise ConfigError(
            f"invalid tool rule {text!r}: expected 'tool' or 'tool(pattern)' "
            "with balanced parentheses, e.g. 'bash(git status*)' or 'write_file(path:docs/*)'"
        )
    tool, inner = m.group(1).lower(), m.group(2)
    if inner is None:
        return Rule(tool=tool, text=text)
    body = inner.strip()
    if not body:
        raise ConfigError(
            f"invalid tool rule {text!r}: the parentheses are empty; "
            f"write {tool!r} to match every call of the tool"
        )
    if body == "*":
        return Rule(tool=tool, text=text)
    if body.endswith(":*"):
        head = body[:-2].strip()
        if not head:
            raise ConfigError(f"invalid tool rule {text!r}: ':*' needs a prefix, e.g. 'git:*'")
        return Rule(tool=tool, pattern=head, prefix=True, text=text)
    km = _KEY_RE.match(body)
    # 'https://host/*' is a URL pattern, not the argument 'https'
    if km is not None and not km.group(2).startswith("//"):
        pattern = km.group(2).strip()
        if not pattern:
            raise ConfigError(
                f"invalid tool rule {text!r}: argument {km.group(1)!r} has an empty pattern; "
                f"write e.g. '{tool}({km.group(1)}:docs/*)'"
            )
        return Rule(tool=tool, key=km.group(1), pattern=pattern, text=text)
    return Rule(tool=tool, pattern=body, text=text)
