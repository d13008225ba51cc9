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

How argument values are matched:

- Shell commands (an argument named ``command``, ``cmd`` or ``script``, or any argument of a tool
  whose category is ``execute``) are split on shell operators (``&&``, ``||``, ``;``, ``|``,
  ``&``, ``$(``, backticks, parentheses, redirections, newlines). Each part is matched both as
  written and *normalised* (`normalise_command`): quotes and backslashes removed, whitespace
  collapsed, leading ``VAR=value`` assignments, ``{`` and wrapper commands (``env``,
  ``command``, ``exec``, ``nohup``, ``time``, ``nice``, ``sudo``, ``xargs``, ``builtin``...)
  dropped, the command word reduced to its basename (``/bin/rm`` → ``rm``), and the script of
  ``sh -c '...'`` / ``eval ...`` split in turn. A rule *grants* (allow) only when every part
  matches in both forms — ``bash(git status*)`` allows neither ``git status; rm -rf /`` nor
  ``FOO=1 git status`` — and *restricts* (deny, confirm) when any part matches in either form.
  (`ToolPolicyChecker` also lets several allow rules cover the parts together:
  ``git status | head`` with ``bash(git status*)`` and ``bash(head*)``.)
- A restricting pattern of two or more words whose first word is plain (``git push*``) also
  matches a part whose command is that word when the rest of the pattern matches from any later
  word: ``git -C . push`` is caught, and so, conservatively, is ``git log --grep push``.
- Path arguments (a name containing ``path``, ``file`` or ``dir``) are matched in every form
  the tool may touch: the given path normalised (``docs/../secrets`` is ``secrets``), and,
  when the workspace root is known, the path relative to it, lexically and with symlinks
  followed (``/ws/secrets/key`` and a link ``docs/notes`` → ``secrets`` both become
  ``secrets/...``; a real location outside the workspace stays absolute). Allow needs every
  form to match, deny and confirm any one.

**Allow rules are the reliable form.** A shell is a programming language: an allow rule only
grants commands that look plainly like its pattern, and anything unusual falls back to the
tool's default (usually asking a person). Deny rules on shell commands are best effort — they
catch the common re-spellings above, but a determined model can still build a command they do
not recognise (variables, ``$'\\x72m'``, scripts written to a file...). To keep a tool from doing
something, allow what it may do and let the rest be confirmed or denied by default.
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from jianmu.errors import ConfigError
from jianmu.tools.calls import ToolCall

__all__ = ("Rule", "normalise_command", "parse_rule", "path_forms")

_RULE_RE = re.compile(r"^\s*([^()\s]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_KEY_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*:(.*)$", re.DOTALL)
_SHELL_SPLIT_RE = re.compile(r"&&|\|\||\$\(|[;&|\n\r`()<>]")
_SHELL_KEYS = frozenset({"command", "cmd", "script"})
_PATH_HINTS = ("path", "file", "dir")
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_GLOB_CHARS = frozenset("*?[")
# Words that run the command after them; their options are skipped, and the options listed
# here take a value (``sudo -u root rm`` runs ``rm``).
_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "command": frozenset(),
    "exec": frozenset({"-a"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "sudo": frozenset({"-u", "--user", "-g", "--group", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "doas": frozenset({"-u", "-C"}),
    "xargs": frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--delimiter"}),
    "builtin": frozenset(),
    "setsid": frozenset(),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
}
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
_MAX_NESTING = 3


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _shell_words(text: str) -> list[str]:
    """Split one command into words as a shell would: quotes and backslashes removed.

    Lenient: an unclosed quote runs to the end (parts are cut on operators even inside quotes).
    """
    words: list[str] = []
    cur: list[str] = []
    started = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            if started:
                words.append("".join(cur))
                cur, started = [], False
            i += 1
            continue
        started = True
        if c == "\\":
            cur.append(text[i + 1 : i + 2])
            i += 2
        elif c == "$" and text[i + 1 : i + 2] in ("'", '"'):
            i += 1  # $'...' and $"..." quote like '...' and "..."
        elif c == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            cur.append(text[i + 1 : j])
            i = j + 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`':
                    j += 1
                cur.append(text[j])
                j += 1
            i = j + 1
        else:
            cur.append(c)
            i += 1
    if started:
        words.append("".join(cur))
    return words


def _command_words(part: str) -> list[str]:
    """The words of one command from its command word on (see `normalise_command`)."""
    words = _shell_words(part)
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("{", "(", "!") or _ASSIGN_RE.match(word):
            i += 1
            continue
        base = posixpath.basename(word) or word
        takes_value = _WRAPPERS.get(base)
        if takes_value is None:
            break
        i += 1
        while i < len(words) and (
            words[i].startswith("-") or (base == "env" and _ASSIGN_RE.match(words[i]))
        ):
            i += 2 if words[i] in takes_value else 1
    rest = words[i:]
    if rest:
        rest[0] = posixpath.basename(rest[0]) or rest[0]
    return rest


def normalise_command(part: str) -> str:
    """One shell command as its words, without the disguises that deny rules would miss.

    Quotes and backslash escapes are removed, runs of whitespace collapse to one space,
    leading ``VAR=value`` assignments, ``{``, ``!`` and wrapper commands (``env``, ``sudo``,
    ``xargs``... with their options) are dropped and the command word becomes its basename:
    ``FOO=1 sudo -u root "/bin/rm" -rf x`` is ``rm -rf x``.
    """
    return " ".join(_command_words(part))


def _split_shell(value: str, depth: int = 0) -> list[tuple[str, list[str]]]:
    """The commands of a shell command line: (as written, normalised words) for each.

    The script of ``sh -c '...'`` and the arguments of ``eval`` are split in turn.
    """
    out: list[tuple[str, list[str]]] = []
    for raw in _SHELL_SPLIT_RE.split(value):
        raw = raw.strip()
        if not raw:
            continue
        words = _command_words(raw)
        out.append((raw, words))
        if depth >= _MAX_NESTING or not words:
            continue
        script: str | None = None
        if words[0] == "eval":
            script = " ".join(words[1:])
        elif words[0] in _SHELLS:
            for k, word in enumerate(words[1:-1], start=1):
                if word.startswith("-") and not word.startswith("--") and "c" in word:
                    script = words[k + 1]
                    break
        if script:
            out.extend(_split_shell(script, depth + 1))
    return out


def path_forms(value: str, root: str | os.PathLike[str] | None = None) -> list[str]:
    """Every spelling of a path argument a rule is matched against (duplicates dropped).

    The given path normalised; with a workspace ``root``, also the path the tool will touch,
    relative to the root (`jianmu.execution.workspace.locate`, the resolver the file tools
    use): lexically (``/ws/secrets/k`` → ``secrets/k``) and with symlinks followed
    (``docs/notes/k`` → ``secrets/k`` when ``docs/notes`` links to ``secrets``). A location
    outside the root is given as an absolute path.
    """
    forms = [posixpath.normpath(value.replace("\\", "/"))]
    if root is None or "\x00" in value or value.startswith("~"):
        return forms
    from jianmu.execution.workspace import locate  # keeps the guard import light

    try:
        where = locate(value, root)
    except (OSError, ValueError):  # a symlink loop, an unencodable name: the given form only
        return forms
    for rel in where.forms():
        if rel not in forms:
            forms.append(rel)
    return forms


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


def _is_shell(name: str | None, tool: Any) -> bool:
    return (name or "").lower() in _SHELL_KEYS or getattr(tool, "category", None) == "execute"


def _is_path(name: str | None) -> bool:
    return bool(name) and any(hint in str(name).lower() for hint in _PATH_HINTS)


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
    aliases: frozenset[str] = frozenset()
    """Other lower-cased names of the same tool (``file_read`` for ``read_file``) it covers."""

    @property
    def is_name_rule(self) -> bool:
        """Whether the rule names the whole tool, with no argument pattern."""
        return self.pattern is None

    def applies_to(self, tool_name: str) -> bool:
        """Whether the rule is about the tool called ``tool_name`` (case-insensitive)."""
        name = tool_name.strip().lower()
        return name == self.tool or name in self.aliases

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

    def split(
        self, name: str | None, value: str, tool: Any = None, root: str | None = None
    ) -> list[str]:
        """Every text an allow rule must match: each shell command as written and normalised,
        or each form of a path (see `path_forms`; ``root`` is the workspace root)."""
        if _is_shell(name, tool):
            parts: list[str] = []
            for raw, words in _split_shell(value):
                for text in (raw, " ".join(words)):
                    if text not in parts:
                        parts.append(text)
            return parts or [""]
        if _is_path(name) and value:
            return path_forms(value, root)
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

    def _match_later_words(self, words: list[str]) -> bool:
        """``git push*`` against ``git -C . push``: the command, then the rest from any word."""
        head, _, rest = (self.pattern or "").partition(" ")
        if not rest.strip() or not head or _GLOB_CHARS & set(head) or words[:1] != [head]:
            return False
        return any(self.match_text(" ".join([head, *words[i:]])) for i in range(2, len(words)))

    def _restricts(self, name: str | None, value: str, tool: Any, root: str | None) -> bool:
        if _is_shell(name, tool):
            return any(
                self.match_text(raw)
                or self.match_text(" ".join(words))
                or self._match_later_words(words)
                for raw, words in _split_shell(value) or [("", [])]
            )
        return any(self.match_text(part) for part in self.split(name, value, tool, root))

    def matches(self, call: ToolCall, tool: Any = None, *, root: str | None = None) -> bool:
        """Whether the rule covers the whole call: the test for a rule that *grants* (allow).

        Every part of a shell command must match, as written and normalised, and every form
        of a path (see the module docstring).

        Args:
            call: The tool call.
            tool: The tool, when known; its ``input_schema`` finds the main argument and its
                ``category`` marks shell commands.
            root: The workspace root that relative paths are resolved against.
        """
        if not self.applies_to(call.name):
            return False
        if self.pattern is None:
            return True
        found = self.value_of(call, tool)
        if found is None:
            return False
        return all(self.match_text(part) for part in self.split(*found, tool, root))

    def _names_a_missing_argument(self, tool: Any) -> bool:
        properties = _schema_properties(tool)
        return self.key is not None and properties is not None and self.key not in properties

    def matches_any_part(
        self, call: ToolCall, tool: Any = None, *, root: str | None = None
    ) -> bool:
        """Whether the rule touches the call: the test for a rule that *restricts* (deny, confirm).

        Any part of a shell command may match, as written or normalised, and any form of a
        path; when no main argument can be told apart, every string argument is tried as well
        as the whole arguments as JSON.
        """
        if not self.applies_to(call.name):
            return False
        if self.pattern is None or self._names_a_missing_argument(tool):
            # a restricting rule on an argument the tool does not have can never match: it is
            # a typo (``bash(comand:rm*)``), so it restricts the whole tool rather than nothing
            return True
        found = self.value_of(call, tool)
        if found is None:
            return False
        candidates = [found]
        if found[0] is None and self.key is None and isinstance(call.arguments, dict):
            candidates += [(k, v) for k, v in call.arguments.items() if isinstance(v, str)]
        return any(self._restricts(name, value, tool, root) for name, value in candidates)


def _schema_properties(tool: Any) -> dict[str, Any] | None:
    schema = getattr(tool, "parameters", None) or getattr(tool, "input_schema", None)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return properties if isinstance(properties, dict) and properties else None


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
