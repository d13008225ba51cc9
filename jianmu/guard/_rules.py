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
  whose category is ``execute``) are parsed with a real shell grammar (tree-sitter-bash, see
  `jianmu.guard._shell`). Every simple command is found — in lists, pipelines, if/while/until/
  for/case bodies, ``{ }`` and ``( )`` groups, function bodies, command and process
  substitutions, heredocs, the scripts of ``sh -c``/``bash -lc``/``flock -c``/``env -S`` and
  the literal arguments of ``eval`` — and each is matched as written and in every *form*: its
  words with quotes and escapes removed and the command word as a basename (``"/bin/rm"`` is
  ``rm``), then again after each wrapper it runs through (``env``, ``command``, ``exec``,
  ``nohup``, ``time``, ``nice -n 5``, ``ionice -c3``, ``taskset -c 0``, ``flock FILE``,
  ``stdbuf -o0``, ``timeout 5``, ``setsid``, ``sudo -u root``, ``doas``, ``chroot DIR``,
  ``busybox``, and ``xargs``/``find -exec`` for deny rules). A write redirection
  (``> file``) is a part of its own. A rule *grants* (allow) only when every part matches in
  every form — ``bash(git status*)`` allows neither ``git status; rm -rf /`` nor
  ``FOO=1 git status`` — and *restricts* (deny, confirm) when any part matches in any form.
  (`ToolPolicyChecker` also lets several allow rules cover the parts together:
  ``git status | head`` with ``bash(git status*)`` and ``bash(head*)``.)
- A restricting pattern of two or more words whose first word is plain (``git push*``) also
  matches a part whose command is that word when the rest of the pattern matches from any later
  word: ``git -C . push`` is caught, and so, conservatively, is ``git log --grep push``. A word
  only the run knows (``$X``, ``$(...)``, an unquoted glob) may be anything: ``git $X`` is
  restricted by ``git push*`` because ``git`` matches the pattern's first word.
- Path arguments (a name containing ``path``, ``file``, ``dir``, ``root``, ``cwd``, ``folder``,
  or an end of a copy or move: ``source``, ``src``, ``dest``, ``dst``, ``target``) are matched
  in every form the tool may touch: the given path normalised (``docs/../secrets`` is
  ``secrets``), and,
  when the workspace root is known, the path relative to it, lexically and with symlinks
  followed (``/ws/secrets/key`` and a link ``docs/notes`` → ``secrets`` both become
  ``secrets/...``; a real location outside the workspace stays absolute). Allow needs every
  form to match, deny and confirm any one. Whatever an argument is called, a value spelt like
  a path (``./secrets/x``) meets a deny or confirm rule written on a path (``secrets/*``) in
  those forms too, and a value that is a URL (``scheme://...``) is matched as URLs are.
- A shell command's literal arguments (and options' values, ``--file=k``) are paths the same
  way: ``cat /ws/secrets/key``, ``cat notes/key`` through a link and ``cd /ws/secrets; cat
  key`` are ``cat secrets/key`` to a rule ``bash(cat secrets/*)``, and ``bash(cat docs/*)``
  does not allow ``cat docs/../secrets/key``. A form that only tidies a word (``./``, ``//``)
  changes no grant: ``s/a//`` is not a path. A word that is a URL is also matched as the
  client sends it (`url_forms`) by a rule that restricts: ``curl HTTPS://EVIL.COM`` is evil.com.
- An argument that holds a list or an object is matched string by string, each under the name
  of the argument or key holding it (`Rule.values_of`): a restricting rule reads each (and the
  JSON text), a grant needs every one; a list of words given to a shell argument (an ``argv``)
  is the command line it makes, quoted and also joined bare. An argument left out, or null, is
  the default the tool then uses, whatever its type.

**Shell rules fail closed.** A command line is *opaque* when it holds anything the matcher
cannot prove harmless: a command word built from an expansion or substitution (``$R``,
``$(printf rm)``, ``rm${IFS}x``, ``$'\\x72m'``), a parse error (``{rm,-rf,x}``), ``eval``,
``source``/``.``, ``alias``, ``trap``, a shell reading a script from a file or stdin
(``sh x.sh``, ``echo rm x | sh``, ``sh <<< ...``), an interpreter (``python``, ``perl``,
``node``...), awk's ``system``, sed's ``e``, ``git -c``, ``xargs``, ``parallel``,
``find -exec/-execdir/-ok/-delete``, other command runners (``watch``, ``su``, ``ssh``...),
curl's URL globs and ``-K`` and wget's ``-i`` (URLs the line does not show),
a link, move or copy of a folder beside another command (``ln -s secrets s; cat s/key``),
a program run by a path outside the system folders (``./x.sh``), an option of a wrapper the
guard does not know, or a change to ``PATH``, ``BASH_ENV``... (``read PATH`` too). An opaque
command never matches an allow rule (`Rule.matches`), and `ToolPolicyChecker` never
auto-allows it when any argument rule of the tool looks at it: it is confirmed by a person,
which is a denial where nobody can answer (a non-interactive run). So a deny rule either
catches a re-spelling or makes a person look. With no argument rule for the tool (a plain
``bash: allow``) the operator allowed every command, nothing needs seeing through, and an
opaque command is allowed like any other. And a program the guard does not know may run what
follows in its words (``not-14 rm x``, ``npm x -c 'rm x'``, a build file on its stdin), so a
restricting rule also meets its program wherever it is a word with more after it, but in the
words of a program whose words are only data (`DATA_ONLY`: ``echo rm x`` runs no rm).

What this does not promise: programs that run code from files by design (``make``, ``npm run``,
``pytest``, git hooks) are matched as the command they are, and a command allowed by a rule
can still do whatever that program can do. A rule is a policy on what the model asks for; the
sandbox is what bounds what the code can reach.
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from jianmu.errors import ConfigError
from jianmu.guard.checkers import PolicyTarget
from jianmu.tools.calls import ToolCall

if TYPE_CHECKING:
    from jianmu.guard._shell import ShellScan

_Tool = PolicyTarget | None
"""The tool a call names, as the guard sees it; ``None`` when no tool has that name."""

__all__ = ("Rule", "normalise_command", "parse_rule", "path_forms", "shell_parts", "url_forms")

_RULE_RE = re.compile(r"^\s*([^()\s]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_KEY_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*:(.*)$", re.DOTALL)
_SHELL_KEYS = frozenset({"command", "cmd", "script"})
_PATH_HINTS = ("path", "file", "dir", "root", "cwd", "folder")
# names of the two ends of a copy or a move (`move_file(source, destination)`, as MCP's
# filesystem server names them): paths too, but never a shell command's folder
_END_HINTS = ("source", "src", "dest", "dst", "target")
# Tools that read every file beneath the folder they are given: a restricting path rule also
# holds for a folder above what it names (`grep_search .` reads `secrets/key`).
_WALKING_TOOLS = frozenset({"list_dir", "glob_search", "grep_search"})
_GLOB_CHARS = frozenset("*?[")
# what separates words in a command's text read crudely, for the programs it may run anywhere
# in it (`Rule._restricts_embedded`): spaces and the shell's operators, a `\` line end, and the
# commas, equals signs and brackets of other languages (`-wrapper rm,-f,x`); read once with
# quotes and escapes joined away (`r''m` is `rm`), once with them as separators too
# (`system("rm x")`)
_SEPARATORS = r"\s;|&()<>{}\[\],=$`"
_EMBEDDED_SPLIT = re.compile(rf"(?:\\\n|[{_SEPARATORS}])+")
_QUOTED_SPLIT = re.compile(rf"(?:\\\n|[{_SEPARATORS}\"'\\])+")
_UNQUOTE = re.compile(r"[\"'\\]")
_REDIRECT = re.compile(r"^\s*[0-9&]*[<>]")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def scan(command: str) -> ShellScan:
    """`jianmu.guard._shell.scan`, whose bash grammar (tree-sitter) loads with the first
    command a shell rule reads."""
    from jianmu.guard._shell import scan as read

    return read(command)


def normalise_command(part: str) -> str:
    """One shell command as the words it runs, without the disguises deny rules would miss.

    The last form `scan` finds for the first simple command: quotes and backslash escapes
    removed, the command word as a basename, wrappers (``env``, ``sudo``, ``timeout 5``...)
    seen through: ``FOO=1 sudo -u root "/bin/rm" -rf x`` is ``rm -rf x``.
    """
    commands = scan(part).commands
    return " ".join(commands[0].forms[-1]) if commands else ""


def path_forms(
    value: str, root: str | os.PathLike[str] | None = None, *, absolute: bool = False
) -> list[str]:
    """Every spelling of a path argument a rule is matched against (duplicates dropped).

    The given path normalised; with a workspace ``root``, also the path the tool will touch,
    relative to the root (`jianmu.execution.runner.locate`, the resolver the file tools
    use): lexically (``/ws/secrets/k`` → ``secrets/k``) and with symlinks followed
    (``docs/notes/k`` → ``secrets/k`` when ``docs/notes`` links to ``secrets``). A location
    outside the root is given as an absolute path. With ``absolute``, the absolute
    locations (as configured and real) are forms too: a rule written with the workspace's
    absolute path (``/srv/ws/secrets/*``) then restricts ``secrets/key``.
    """
    forms = [posixpath.normpath(value.replace("\\", "/"))]
    if root is None or "\x00" in value or value.startswith("~"):
        return forms
    from jianmu.execution.runner import locate  # keeps the guard import light

    try:
        where = locate(value, root)
    except (OSError, ValueError):  # a symlink loop, an unencodable name: the given form only
        return forms
    extra = (*where.forms(), *((where.lexical, where.real) if absolute else ()))
    for form in extra:
        form = form.replace(os.sep, "/")
        if form not in forms:
            forms.append(form)
    return forms


def url_forms(value: str) -> list[str]:
    """Every spelling of a URL argument a rule is matched against (duplicates dropped).

    As given, and as the HTTP client will send it (`httpx.URL`): scheme and host in lower
    case, the host's international and trailing-dot spellings folded, no user info, no
    default port, no fragment, an empty path as ``/``; that form percent-decoded as well. So
    ``HTTPS://u@EVIL.com.:443`` meets a rule written for ``https://evil.com/*``.
    """
    from urllib.parse import unquote

    import httpx  # a core dependency; imported here to keep the guard import light

    forms = [value.strip()]
    try:
        url = httpx.URL(value.strip())
        host = (url.host or "").rstrip(".")
    except (httpx.InvalidURL, ValueError, TypeError):
        return forms
    # httpx drops the scheme's default port, but not after a scheme written `HTTPS:`
    default = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(url.scheme)
    port = "" if url.port in (None, default) else f":{url.port}"
    path = url.raw_path.decode("ascii", "replace")
    canonical = f"{url.scheme}://{host}{port}{path}"
    extra = [canonical, unquote(canonical)]
    address = _ip_address(host)
    if address is not None:  # `127.1`, `0x7f.1`, `[::ffff:127.0.0.1]` are `127.0.0.1`
        extra += [f"{url.scheme}://{address}{port}{path}"]
        extra += [unquote(extra[-1])]
    for form in extra:
        if form not in forms:
            forms.append(form)
    return forms


def _ip_address(host: str) -> str | None:
    """The address a host that is an IP address names, in its usual spelling: the resolver
    also takes ``127.1``, ``2130706433`` and ``0x7f.0.0.1`` (`socket.inet_aton`), and an
    IPv4 address mapped into IPv6 reaches the IPv4 one. ``None`` for a host name."""
    import ipaddress
    import socket

    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host)
    except ValueError:
        if host.strip("0123456789abcdefABCDEFxX."):  # glibc's inet_aton reads past a space
            return None
        try:
            ip = ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):  # not an address; or "" (no host at all)
            return None
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped
        return str(mapped) if mapped is not None else f"[{ip.compressed}]"
    return str(ip)


# a value spelt like a path: with a separator, or starting at `.` or `~`
_PATH_VALUE_RE = re.compile(r"^\s*[.~]|[/\\]")
# a value that is a URL whatever its argument is called (`link`, `endpoint`, `href`...)
_URL_VALUE_RE = re.compile(r"^\s*[A-Za-z][A-Za-z0-9+.\-]*://")


def _is_url(name: str | None, value: str = "") -> bool:
    named = bool(name) and any(hint in str(name).lower() for hint in ("url", "uri"))
    return named or bool(_URL_VALUE_RE.match(value))


def _schema_main_argument(tool: _Tool, args: dict[str, Any]) -> str | None:
    """The first required string property of the tool's schema present in ``args``."""
    schema = tool.input_schema if tool is not None else None
    if not isinstance(schema, dict):  # an MCP server's schema is not trusted to be a dict
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


def _is_shell(name: str | None, tool: _Tool) -> bool:
    # an execute tool's other arguments are shell text, except a folder it runs in (`cwd`)
    return (name or "").lower() in _SHELL_KEYS or (
        tool is not None and tool.category == "execute" and not _is_path(name, _PATH_HINTS)
    )


def _is_path(name: str | None, hints: tuple[str, ...] = _PATH_HINTS + _END_HINTS) -> bool:
    return bool(name) and any(hint in str(name).lower() for hint in hints)


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
    """Other lower-cased names of the same tool (``file_read`` for ``read_file``) it covers;
    one ending ``__*`` covers every tool of that MCP server (``gh__*``)."""

    @property
    def is_name_rule(self) -> bool:
        """Whether the rule names the whole tool, with no argument pattern."""
        return self.pattern is None

    def applies_to(self, tool_name: str) -> bool:
        """Whether the rule is about the tool called ``tool_name`` (case-insensitive)."""
        name = tool_name.strip().lower()
        return name == self.tool or name in self.aliases or any(
            a.endswith("__*") and name.startswith(a[:-1]) for a in self.aliases)

    def value_of(self, call: ToolCall, tool: _Tool = None) -> tuple[str | None, str] | None:
        """The argument the pattern is matched against, as ``(argument name, text)``.

        With a ``key``: that argument (non-strings as JSON); when it is missing, the default the
        tool then uses, from its schema; ``None`` when it has none. Without one: raw non-JSON
        arguments as they came; else the first required string property of
        ``tool.input_schema``; else the only string argument; else the whole arguments as JSON
        (name ``None``).
        """
        found = self._raw_value(call, tool)
        if found is None:
            return None
        name, value = found
        return name, value if isinstance(value, str) else _json(value)

    def _raw_value(self, call: ToolCall, tool: _Tool) -> tuple[str | None, Any] | None:
        """`value_of` before a value that is not a string is written as JSON."""
        args = call.arguments
        if self.key is not None:
            if not isinstance(args, dict):
                return None
            if self.key not in args or args[self.key] is None:
                # the tool then uses its default (`grep_search` searches ".", a `dry_run`
                # left out is False): match that; a null is "not given" to a tool
                default = _schema_default(tool, self.key)
                if default is not _NO_DEFAULT:
                    return self.key, default
                return None if self.key not in args else (self.key, None)
            return self.key, args[self.key]
        if isinstance(args, str):
            return None, args
        if not isinstance(args, dict):
            return None, args
        name = _schema_main_argument(tool, args)
        if name is None:
            strings = [k for k, v in args.items() if isinstance(v, str)]
            if len(strings) == 1:
                (name,) = strings
        if name is not None:
            return name, args[name]
        return None, args

    def values_of(
        self, call: ToolCall, tool: _Tool = None
    ) -> tuple[tuple[str | None, str], ...] | None:
        """Every text an argument's value is matched as: `value_of`'s, or, for an argument
        that holds a list or an object, each string in it (under the name of the argument or
        key holding it: ``read_multiple_files(paths=[...])``'s each a path), and a list given
        to a shell argument as the command line it makes (an ``argv``). ``None`` as
        `value_of`."""
        found = self._raw_value(call, tool)
        return None if found is None else _texts(*found, tool)

    def split(
        self, name: str | None, value: str, tool: _Tool = None, root: str | None = None,
        folder: str | None = None,
    ) -> list[str]:
        """Every text an allow rule must match: each shell command as written and normalised
        (and read in ``folder``, the one it runs in: `run_folder`), or each form of a path
        (see `path_forms`; ``root`` is the workspace root)."""
        if _is_shell(name, tool):
            return shell_parts(scan_in(value, folder, paths_in=root or ""), root)
        if _is_url(name, value) and value:
            return url_forms(value)
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

    def _match_dynamic(self, words: tuple[str, ...], dynamic: frozenset[int]) -> bool:
        """``git push*`` against ``git $X``: a word only the run knows may be anything — any
        text, several words or none (an empty ``$X`` vanishes: ``git push $X`` may be ``git
        push``) — so the rule restricts when some value of those words makes it match, also
        for a pattern that starts with a glob (``*secrets*`` against ``cat sec*/key``). A
        run-time command word is left to the opaque check: a person is asked rather than
        refused."""
        if min(dynamic, default=0) == 0 or self.pattern is None:
            return False
        text: list[str | None] = []  # None: any text at all
        for i, word in enumerate(words):
            if i in dynamic:
                text.append(None)  # it may take the space before it too
            else:
                text.extend(" " + word if i else word)
        patterns = [self.pattern, self.pattern + " *"] if self.prefix else [self.pattern]
        return any(_may_match(_glob_tokens(p), text) for p in patterns)

    def _restricts_shell(self, shell: ShellScan, root: str | None) -> bool:
        if not shell.commands:
            return self.match_text("")
        for command in shell.commands:
            if self.match_text(command.raw):
                return True
            for words, dynamic in zip(command.forms, command.dynamic, strict=True):
                # `cat ./secrets//k`, `cat /ws/secrets/k` and `cat notes/k` (a link to
                # `secrets`) are `cat secrets/k` to a rule `bash(cat secrets/*)`; `curl
                # HTTPS://EVIL.COM` is `curl https://evil.com/`
                moves = (*located_words(words, dynamic, root), *url_words(words, dynamic))
                for moved in (words, *moves):
                    if (
                        self.match_text(" ".join(moved))
                        or self._match_later_words(list(moved))
                        or self._match_dynamic(moved, dynamic)
                    ):
                        return True
        return False

    def _restricts_embedded(self, shell: ShellScan, command: str) -> bool:
        """``rm *`` against a command that holds ``rm`` as a word where a program the guard
        does not know may run what follows: its arguments (``not-14 rm x``, ``choom -n 1 --
        rm x``, ``npm x -c 'rm x'``, ``gcc-12 -wrapper rm,x``) or a here-document it reads
        (``ninja -f /dev/stdin <<EOF`` ``command = rm x``). A rule that restricts holds there
        too, failing closed, read as the command's own words are (quotes and escapes gone,
        later words, URLs as the client sends them); a program whose words are only data
        (``echo rm x``, ``git commit -m 'rm x'``, ``cat > f.sh <<EOF``) runs none of them."""
        from jianmu.guard._programs import DATA_ONLY

        head = (self.pattern or "").partition(" ")[0]
        if not head or _GLOB_CHARS & set(head) or head not in _UNQUOTE.sub("", command):
            return False  # (a rule on the whole tool, one whose program is a glob, or absent)

        def runs_words(raw: str) -> bool:  # some command of ``raw`` is no data-only program
            found = [c for c in shell.commands if c.raw and c.raw in raw
                     and not _REDIRECT.match(c.raw)]  # (`> f`: where output goes, no program)
            return not found or any(  # (the program a wrapper runs: `sudo tee f`)
                posixpath.basename(c.forms[-1][0]) not in DATA_ONLY
                for c in found if c.forms and c.forms[-1])

        texts = [c.raw for c in shell.commands if runs_words(c.raw)]
        texts += [body for opener, body in _here_documents(command) if runs_words(opener)]
        readings = [(_UNQUOTE.sub("", piece) for piece in _EMBEDDED_SPLIT.split(text))
                    for text in texts] + [_QUOTED_SPLIT.split(text) for text in texts]
        for reading in readings:
            words = tuple(w for w in reading if w)
            for i, word in enumerate(words):
                if word != head and posixpath.basename(word) != head:  # (`/bin/rm`)
                    continue
                rest = (head, *words[i + 1:])
                if any(self.match_text(" ".join(form)) or self._match_later_words(list(form))
                       for form in (rest, *url_words(rest, frozenset()))):
                    return True
        return False

    def _restricts(
        self, name: str | None, value: str, tool: _Tool, root: str | None, folder: str | None
    ) -> bool:
        if _is_shell(name, tool):
            shell = scan_in(value, folder)
            return self._restricts_shell(shell, root) or self._restricts_embedded(shell, value)
        parts = self.split(name, value, tool, root)
        if _is_path(name) and value and not _is_url(name, value):
            # a restricting rule may be written with absolute paths: match those forms too
            parts = path_forms(value, root, absolute=True)
        elif "/" in (self.pattern or "") and _PATH_VALUE_RE.search(value) and not _is_url(
            name, value
        ):
            # a rule on a path and a value spelt like one: a path whatever its argument is
            # called (`save_note(to:secrets/*)`); a text rule (`message:hello*`) reads text
            parts = [*parts, *path_forms(value.strip(), root, absolute=True)]
        if any(self.match_text(part) for part in parts):
            return True
        walks = (tool.name if tool is not None else str(self.tool)).lower() in _WALKING_TOOLS
        return walks and _is_path(name) and any(self._matches_beneath(part) for part in parts)

    def _matches_beneath(self, folder: str) -> bool:
        """Whether the pattern may match a path beneath ``folder`` (conservatively: the
        pattern's literal beginning and the folder agree as far as both go)."""
        if self.pattern is None:
            return True
        cut = min((i for i, ch in enumerate(self.pattern) if ch in _GLOB_CHARS),
                  default=len(self.pattern))
        literal = self.pattern[:cut]
        if folder in (".", ""):
            return not posixpath.isabs(literal)
        below = folder.rstrip("/") + "/"
        return literal.startswith(below) or (cut < len(self.pattern) and below.startswith(literal))

    def matches(self, call: ToolCall, tool: _Tool = None, *, root: str | None = None) -> bool:
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
        found = self.values_of(call, tool)
        if found is None:
            return False
        folder = run_folder(call)
        for name, value in found:
            if _is_shell(name, tool) and scan(value).opaque:
                return False
            if not all(self.match_text(part) for part in self.split(name, value, tool, root,
                                                                     folder)):
                return False
        return True

    def _names_a_missing_argument(self, tool: _Tool) -> bool:
        properties = _schema_properties(tool)
        return self.key is not None and properties is not None and self.key not in properties

    def matches_any_part(
        self, call: ToolCall, tool: _Tool = None, *, root: str | None = None
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
        folder = run_folder(call)
        return any(
            self._restricts(name, value, tool, root, folder)
            for name, value in self._candidates(call, tool)
        )

    def _candidates(self, call: ToolCall, tool: _Tool) -> list[tuple[str | None, str]]:
        """The values a restricting rule looks at: every text of the main argument (see
        `values_of`) and its JSON, and every string argument, and each string in every
        argument, when no main argument can be told apart."""
        found = self._raw_value(call, tool)
        if found is None:
            return []
        name, value = found
        candidates = dict.fromkeys(_texts(name, value, tool))
        if not isinstance(value, str) and not _is_shell(name, tool):
            candidates[(name, _json(value))] = None  # a rule on a list's JSON text reads it
        if name is None and self.key is None and isinstance(call.arguments, dict):
            for key, value in call.arguments.items():
                if isinstance(value, str):
                    candidates[(key, value)] = None
                elif isinstance(value, (list, tuple, dict)):
                    candidates.update(dict.fromkeys(_leaves(key, value, tool)))
        return list(candidates)

    def opacity(self, call: ToolCall, tool: _Tool = None) -> str | None:
        """Why the shell command this argument rule looks at cannot be fully seen through.

        ``None`` when the rule has no argument pattern, is about another tool, looks at no
        shell command, or every command in it was seen through (see `jianmu.guard._shell`).
        """
        if self.is_name_rule or not self.applies_to(call.name):
            return None
        for name, value in self._candidates(call, tool):
            if name is None and isinstance(call.arguments, dict):
                continue  # the whole arguments as JSON: each string is a candidate of its own
            if _is_shell(name, tool):
                opaque = scan(value).opaque
                if opaque:
                    return opaque[0]
        return None


_STAR = ("*", "")
_ANY = ("?", "")


def _glob_tokens(pattern: str) -> list[tuple[str, str]]:
    """An `fnmatch` glob as tokens: ``("*", "")``, ``("?", "")``, ``("[", set)`` or
    ``("", char)``, read as `fnmatch` reads it (a ``[`` without its ``]`` is a character)."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        i += 1
        if ch == "*":
            if out[-1:] != [_STAR]:
                out.append(_STAR)
        elif ch == "?":
            out.append(_ANY)
        elif ch == "[":
            j = i + (pattern[i : i + 1] == "!")
            j += pattern[j : j + 1] == "]"
            j = pattern.find("]", j)
            if j < 0:
                out.append(("", "["))
            else:
                out.append(("[", pattern[i - 1 : j + 1]))
                i = j + 1
        else:
            out.append(("", ch))
    return out


def _may_match(pattern: list[tuple[str, str]], text: list[str | None]) -> bool:
    """Whether the glob ``pattern`` matches ``text`` for some value of its unknown parts
    (``None``: any text): the glob read as an automaton, the text run through it."""

    def closed(states: set[int]) -> set[int]:
        # a `*` of the pattern may match nothing: the token after it is reached as well (a
        # star never follows a star: `_glob_tokens` makes one of them)
        return states | {i + 1 for i in states if i < len(pattern) and pattern[i] is _STAR}

    states = closed({0})
    for ch in text:
        if ch is None:  # any text: every later point of the pattern may be reached
            states = closed(set(range(min(states), len(pattern) + 1)))
            continue
        after: set[int] = set()
        for i in states:
            if i == len(pattern):
                continue
            kind, value = pattern[i]
            if kind == "*":
                after.add(i)
            elif kind == "?" or (kind == "" and value == ch) or (
                kind == "[" and fnmatch.fnmatchcase(ch, value)
            ):
                after.add(i + 1)
        if not after:
            return False
        states = closed(after)
    return len(pattern) in states


def _word_forms(word: str, root: str | None, *, renamed_only: bool) -> list[str]:
    """The files a command's literal argument may name, as a path rule spells them (see
    `path_forms`; an option's value too: ``--file=/ws/k``), other than the word itself.

    With ``renamed_only``, only the forms that name another file than the word read as
    written: a ``..`` undone, a path through the workspace's absolute location, a symlink
    followed; not the tidying of ``./`` or ``//``, which a word like ``s/a//`` must keep
    (what an allow rule needs every one of).
    """
    prefix, path = "", word
    if word.startswith("-"):
        option, equals, path = word.partition("=")
        prefix = option + equals
    if not path or "://" in path or path.startswith("~"):  # no path, a URL, a home folder
        return []
    forms = path_forms(path, root)
    if renamed_only and ".." not in path.split("/"):
        tidy = forms[0]
        forms = [form for form in forms if form != tidy]
    return [prefix + form for form in forms if prefix + form != word]


def located_words(
    words: tuple[str, ...], dynamic: frozenset[int], root: str | None, *, renamed_only: bool = False
) -> list[tuple[str, ...]]:
    """The command's words with its literal arguments replaced by the files they may name
    (`_word_forms`), one tuple per form: a rule on paths matches a command by any of them."""
    return _each_form(words, [
        (i, forms) for i, word in enumerate(words)
        if i and i not in dynamic and (forms := _word_forms(word, root, renamed_only=renamed_only))
    ])


def url_words(words: tuple[str, ...], dynamic: frozenset[int]) -> list[tuple[str, ...]]:
    """The command's words with each URL as the client sends it (`url_forms`), one tuple per
    form: ``curl HTTPS://EVIL.COM`` reaches ``https://evil.com/``, for a rule that restricts;
    an address with no scheme as ``http://`` (``curl 127.0.0.1:80/x``), and an option's URL
    also as a word of its own (``curl --url=...``). A word only the run knows may already be
    any URL to the rule (`Rule._match_dynamic`)."""
    found = []
    for i, word in enumerate(words):
        if not i or i in dynamic:
            continue
        prefix, url = _option_split(word)
        if "://" in url:
            forms = url_forms(url)[1:] if not prefix else url_forms(url)
        elif _schemeless(url) or (words[0] in _URL_CLIENTS and _SCHEMELESS.match(url)):
            forms = url_forms("http://" + url)  # as curl and wget take it
        else:
            continue
        found.append((i, [prefix + form for form in forms] + (forms if prefix else [])))
    return _each_form(words, [(i, forms) for i, forms in found if forms])


def _each_form(words: tuple[str, ...], found: list[tuple[int, list[str]]]
               ) -> list[tuple[str, ...]]:
    """``words`` once per form: the k-th takes each found word's k-th form (its last, past
    it), so every form of every word is matched in some tuple."""
    located: list[tuple[str, ...]] = []
    for k in range(max((len(forms) for _, forms in found), default=0)):
        moved = list(words)
        for i, forms in found:
            moved[i] = forms[min(k, len(forms) - 1)]
        located.append(tuple(moved))
    return located


# an address a URL client reads as http:// (curl, wget): a host that is a name with a dot, an
# IP address in any spelling or ``localhost``, then a port or a path
_URL_CLIENTS = frozenset({"curl", "wget", "http", "https", "xh", "aria2c", "lynx", "w3m"})
_SCHEMELESS = re.compile(
    r"^(\[[0-9A-Fa-f:.]+\]|localhost|[0-9]+|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)(:[0-9]+)?(/\S*)?$")
_HERE_DOC = re.compile(r"(?<!<)<<(-?)\s*([\"']?)([^\s\"'<>;|&()]+)\2")


def _schemeless(word: str) -> bool:
    """Whether ``word`` is an address with no scheme: a host, then a port or a path."""
    found = _SCHEMELESS.match(word)
    return found is not None and bool(found.group(2) or found.group(3))


def _here_documents(command: str) -> list[tuple[str, str]]:
    """Each here-document of ``command`` (read crudely, line by line as bash reads it, at
    ``\\n`` only): the line that opens it (its pipes too), and its body."""
    found: list[tuple[str, str]] = []
    lines = command.split("\n")
    at = 0
    while at < len(lines):
        line, at = lines[at], at + 1
        for opened in _HERE_DOC.finditer(line):
            tabs, end, body = opened.group(1), opened.group(3), []
            while at < len(lines) and (lines[at].lstrip("\t") if tabs else lines[at]) != end:
                body.append(lines[at])
                at += 1
            at += 1  # past its end
            found.append((line, "\n".join(body)))
    return found


def _option_split(word: str) -> tuple[str, str]:
    """An option's name and ``=`` (``--url=``), and its value; ``""`` and the word otherwise."""
    if not word.startswith("-"):
        return "", word
    option, equals, value = word.partition("=")
    return option + equals, value


def shell_parts(shell: ShellScan, root: str | None = None) -> list[str]:
    """Every text an allow rule must match in a command line: each command as written, each
    of its forms (see `ShellCommand.forms`), and each with its arguments as the files they
    name when that is another file (``cat docs/../secrets/k`` is ``cat secrets/k`` too)."""
    parts: dict[str, None] = {}  # in order, each once: a list's `in` made n commands n² work
    for command in shell.commands:
        texts = [command.raw]
        for words, dynamic in zip(command.forms, command.dynamic, strict=True):
            texts.append(" ".join(words))
            texts.extend(
                " ".join(moved)
                for moved in located_words(words, dynamic, root, renamed_only=True)
            )
        parts.update(dict.fromkeys(texts))
    return list(parts) or [""]


_NO_DEFAULT: Any = object()


def _schema_default(tool: _Tool, key: str) -> Any:
    """The schema's default of the argument ``key`` (any JSON value), or `_NO_DEFAULT`."""
    spec = (_schema_properties(tool) or {}).get(key)
    return spec["default"] if isinstance(spec, dict) and "default" in spec else _NO_DEFAULT


def _texts(name: str | None, value: Any, tool: _Tool) -> tuple[tuple[str | None, str], ...]:
    """`Rule.values_of` of an argument ``name`` (None: the whole arguments) holding
    ``value``: the string itself; each string of a list or an object (`_leaves`); else its
    JSON."""
    if isinstance(value, str):
        return ((name, value),)
    whole = (name, _json(value))
    if name is None or not isinstance(value, (list, tuple, dict)):
        return (whole,)
    return tuple(dict.fromkeys(_leaves(name, value, tool))) or (whole,)


_LEAVES_KEPT = 1000
"""How many strings of one argument a rule reads one by one (past them, its JSON text only,
and a grant needs every one: see `_leaves`)."""


def _leaves(name: str, value: Any, tool: _Tool) -> list[tuple[str | None, str]]:
    """Each string in ``value`` (a list or an object, nested), under the name of the argument
    or key that holds it, other scalars as JSON; a list of plain words given to a shell
    argument is the command line it makes, quoted word by word and joined as a shell would
    read it unquoted (a tool may run either). Past `_LEAVES_KEPT` strings, one more text that
    no pattern but ``*`` matches keeps a grant from covering what was not read."""
    if isinstance(value, (list, tuple)) and _is_shell(name, tool) and all(
        isinstance(word, (str, int, float)) and not isinstance(word, bool) for word in value
    ):
        import shlex

        words = [str(word) for word in value]
        return [(name, shlex.join(words)), (name, " ".join(words))]
    found: list[tuple[str | None, str]] = []
    stack: list[tuple[str, Any]] = [(name, value)]
    while stack:
        key, item = stack.pop()
        if len(found) >= _LEAVES_KEPT:
            found.append((name, "\x00" + _json(value)))
            break
        if isinstance(item, dict):
            stack.extend((str(k), v) for k, v in reversed(item.items()))
        elif isinstance(item, (list, tuple)):
            stack.extend((key, v) for v in reversed(item))
        else:
            found.append((key, item if isinstance(item, str) else _json(item)))
    return found


def _schema_properties(tool: _Tool) -> dict[str, Any] | None:
    schema = tool.parameters if tool is not None else None
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


_FOLDER_HINTS = ("cwd", "dir", "folder")


def run_folder(call: ToolCall) -> str | None:
    """The folder a call's shell command runs in (``bash``'s ``cwd``), or None for the
    workspace's root: its commands are read as after a ``cd`` to it."""
    args = call.arguments
    if not isinstance(args, dict):
        return None
    for name, value in args.items():
        if isinstance(value, str) and _is_path(name, _FOLDER_HINTS) and value.strip() not in (
            "", "."
        ):
            return value.strip()
    return None


def scan_in(command: str, folder: str | None, *, paths_in: str | None = None) -> ShellScan:
    """`scan`, each command also read in ``folder``: every relative word, for a rule that
    restricts (`jianmu.guard._folders.in_folder`); with ``paths_in`` (the workspace root, for
    an allow rule's parts), only the words that name a path (with a ``/``, or an entry of the
    folder there), so that ``git status`` run in a folder is still ``git status``."""
    shell = scan(command)
    if folder is None:
        return shell
    from jianmu.guard._folders import in_folder

    commands = []
    for one in shell.commands:
        forms, dynamic = list(one.forms), list(one.dynamic)
        if paths_in is None:
            in_folder(folder, forms, dynamic)
        else:
            _paths_in_folder(folder, paths_in, forms, dynamic)
        commands.append(replace(one, forms=tuple(forms), dynamic=tuple(dynamic)))
    return replace(shell, commands=tuple(commands))


def _paths_in_folder(
    folder: str, root: str, forms: list[tuple[str, ...]], dynamic: list[frozenset[int]]
) -> None:
    """Add each form with its words that name a path moved into ``folder``."""
    for form, known_late in list(zip(forms, dynamic, strict=True)):
        moved = list(form)
        for i, word in enumerate(form[1:], start=1):
            if i in known_late or word.startswith(("-", "/", "~")) or "://" in word:
                continue
            if "/" in word or (root and os.path.lexists(os.path.join(root, folder, word))):
                moved[i] = posixpath.normpath(posixpath.join(folder, word))
        if tuple(moved) != form:
            forms.append(tuple(moved))
            dynamic.append(known_late)
