"""Read a shell command line with a real grammar (tree-sitter-bash) for the guard's rules.

`scan` finds every simple command of a command line — in lists, pipelines, compound
statements (if/while/until/for/case, ``{ }``, ``( )``), function bodies, command and process
substitutions, heredocs and ``sh -c`` scripts — sees through wrapper commands (``env``,
``sudo``, ``timeout 5``, ``nice -n 5``...) and reports what it cannot see through as *opaque*:
a command word built from an expansion, ``eval``/``source``, a shell reading a script from
stdin or a file, an interpreter, ``xargs``, ``find -exec``, a program run by a path outside
the system folders, a parse error. The rules (`jianmu.guard._rules`) decide what that means.

The module reads in four parts, in this order:

- **words**: a word's value as bash would see it. A word is literal when its value is known
  (quotes and escapes removed); a word whose value only the run knows (an expansion, a
  substitution, an unquoted glob, ``~``) is kept as written and marked not literal, so that
  no rule mistakes it for what it may become;
- **code the guard cannot read**: programs that run a script or a command given to them
  (shells, interpreters, ``eval``, command runners, editors with a command language), options
  that make an everyday program run one (awk's ``system``, sed's ``e``, ``git -c
  alias.x='!cmd'``, ``tar --to-command``), variables that change what a later program runs,
  and the places where bash evaluates a value as arithmetic or a prompt, which runs the
  command substitutions hidden in it;
- **wrappers and shells**: `unwrap` reads a wrapper's options the way the wrapper does and
  returns the words of the command it runs; `read_shell` reads ``sh -c 'script'``. Scripts
  found on the way (``sh -c``, ``flock -c``, ``env -S``) are read in turn, one level deeper;
  an option the guard does not know, or one only the run knows, makes the line opaque;
- **the scan**: the walk over the grammar's tree that puts the three together.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import tree_sitter
import tree_sitter_bash

from jianmu.guard._folders import (
    FOLDER_COMMANDS,
    Folders,
    changed_to,
    through_proc,
)
from jianmu.guard._programs import (
    FIND_ACTIONS,
    INTERPRETER_RE,
    OPAQUE,
    SHELLS,
    gives_new_names,
    hidden_urls,
    only_info,
    runs_a_shell,
    runs_code_in_arguments,
)
from jianmu.guard._tree import Place, last_named, nests_deeper, place
from jianmu.guard._variables import (
    changed_by_builtin,
    changed_by_node,
    check_assignment,
    runs_later,
)

__all__ = ("MAX_DEPTH", "ShellCommand", "ShellScan", "scan")


# -- words -------------------------------------------------------------------------------------

NUMBER_RE = re.compile(r"^-?[0-9]+$")
REDIRECT_TYPES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_UNQUOTED_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DQUOTE_ESCAPE = re.compile(r"\\([$`\"\\\n])")


@dataclass(frozen=True)
class Word:
    """One word of a command: its value, or its source text when only the run knows it."""

    text: str
    literal: bool


def node_text(node: Any) -> str:
    """The source text of a tree-sitter node."""
    return bytes(node.text or b"").decode("utf-8", "replace")


def word_value(node: Any) -> Word:
    """The value of one word node, or its source text when only the run knows it."""
    kind, text = node.type, node_text(node)
    if kind == "word":
        if has_unquoted_glob(text) or text.startswith("~"):
            return Word(text, False)
        return Word(_UNQUOTED_ESCAPE.sub(r"\1", text.replace("\\\n", "")), True)
    if kind == "number":
        return Word(text, True)
    if kind == "raw_string" or (kind == "ansi_c_string" and "\\" not in text):
        return Word(text[text.index("'") + 1 : -1], True)
    if kind == "string":
        parts: list[str] = []
        for child in node.children:
            if child.type == "string_content":
                parts.append(_DQUOTE_ESCAPE.sub(r"\1", node_text(child).replace("\\\n", "")))
            elif child.type != '"':
                return Word(text, False)
        return Word("".join(parts), True)
    if kind == "concatenation":
        words = [word_value(c) for c in node.children]
        unquoted = "".join(node_text(c) if c.type == "word" else "\x00" for c in node.children)
        if has_unquoted_glob(unquoted):  # `rm{,}` is `rm rm`: brace expansion across parts
            return Word(text, False)
        if all(w.literal for w in words):
            return Word("".join(w.text for w in words), True)
        return Word(text, False)
    return Word(text, False)  # expansions, substitutions, $'..', brace expansion...


def has_unquoted_glob(text: str) -> bool:
    escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "*?[" or (ch == "{" and ("," in text or ".." in text)):
            return True
    return False


# -- code the guard cannot read ----------------------------------------------------------------
# (the programs that run it: `jianmu.guard._programs`)

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Bash evaluates arithmetic recursively: a variable whose value is `a[$(rm x)]` runs `rm x`
# when it is read in `(( ))`, `$(( ))`, `let`, `[[ x -eq y ]]`, `test -v`, an array index,
# a substring offset, or assigned to an integer variable; `${x@P}` expands a value as a
# prompt, running its substitutions. Such evaluation of anything but plain numbers is opaque.
_ARITH_NODES = frozenset({"arithmetic_expansion", "c_style_for_statement"})
_ARITH_TEST_OPS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v", "-R"})
_SAFE_ARITH_RE = re.compile(r"^[\s0-9+\-*/%<>=!&|^~?:;,()]*$")
_SAFE_INDEX_RE = re.compile(r"^(-?[0-9]+|@|\*)$")
_EVAL_BUILTINS = frozenset({"let", "test", "[", "printf", "read", "mapfile", "readarray"})


def _arith_text(node: Any) -> str:
    text = node_text(node)
    if node.type == "arithmetic_expansion":
        return text[3:-2] if text.startswith("$((") else text[2:-1]
    if node.type == "compound_statement" and text.startswith("(("):
        return text[2:-2]
    if node.type == "c_style_for_statement":
        return text.split("))", 1)[0].partition("((")[2]
    return ""


def evaluates_code(node: Any) -> str | None:
    """Why ``node`` makes bash evaluate a value as arithmetic or a prompt, if it does."""
    kind = node.type
    arith = kind in _ARITH_NODES or (
        kind == "compound_statement" and node_text(node).startswith("((")
    )
    if arith and not _SAFE_ARITH_RE.match(_arith_text(node)):
        return "arithmetic on a variable may run a command hidden in its value"
    if kind == "subscript":
        index = "".join(node_text(c) for c in node.children[2:-1])
        if not _SAFE_INDEX_RE.match(index.strip()):
            return "an array index is arithmetic that may run a command hidden in a value"
    if kind == "expansion":
        tokens = [c.type for c in node.children]
        if "@" in tokens and any(node_text(c) == "P" for c in node.children):
            return "${x@P} runs the command substitutions in a value"
        if tokens[1:2] == ["!"] and _indirect(node.children[2:]):
            return "${!x} reads a name from a value, whose index is arithmetic"
        if ":" in tokens:
            offsets = "".join(node_text(c) for c in node.children[tokens.index(":") :][:-1])
            if not _SAFE_ARITH_RE.match(offsets):
                return "a substring offset is arithmetic that may run a command hidden in a value"
    if kind in ("unary_expression", "binary_expression") and any(
        c.type == "test_operator" and node_text(c) in _ARITH_TEST_OPS for c in node.children
    ):
        operands = [c for c in node.children if c.is_named and c.type != "test_operator"]
        names_only = kind == "unary_expression"  # `-v NAME` reads no value
        if any(not _safe_operand(node_text(c), names_only) for c in operands):
            return "a numeric test evaluates a value that may hide a command"
    if kind == "declaration_command":
        flags = "".join(node_text(c) for c in node.children if node_text(c).startswith("-"))
        named = [c for c in node.children if c.is_named and not node_text(c).startswith("-")]
        if ("i" in flags or "n" in flags) and named:
            return "an integer or reference variable evaluates a value that may hide a command"
        if any(c.type != "variable_assignment" and c.type != "variable_name" for c in named):
            return "a variable name given as a quoted or computed word may hide a command"
    if kind == "unset_command" and not _plain_unset(node_text(node)):
        return "'unset' of an array element evaluates its index, which may hide a command"
    if kind == "unset_command":
        return changed_by_builtin("unset", [word_value(c) for c in node.children[1:]])
    if kind == "array":
        for element in node.children:
            text = node_text(element)
            index, bracket, rest = text[1:].partition("]")
            if (
                text.startswith("[")
                and bracket
                and rest.startswith(("=", "+="))
                and not _SAFE_INDEX_RE.match(index.strip())
            ):
                return "an index in an array's list is arithmetic that may run a command"
    return changed_by_node(node)


# what `unset` may name without evaluating anything: an option, a name, a numeric index
_PLAIN_NAME_RE = re.compile(r"^(-[a-z]+|[A-Za-z_][A-Za-z0-9_]*(\[(-?[0-9]+|@|\*)\])?)$")


def _plain_unset(text: str) -> bool:
    """Whether ``unset ...`` names only options, variables and numeric indexes."""
    try:
        words = shlex.split(text.removeprefix("unset"))
    except ValueError:
        return False
    return "$" not in text and "`" not in text and all(_PLAIN_NAME_RE.match(w) for w in words)


def _indirect(rest: list[Any]) -> bool:
    """Whether ``${!...}`` is an indirection (``${!x}``, ``${!a[0]}``), not a list of names
    (``${!pre*}``, ``${!pre@}``) or of an array's keys (``${!a[@]}``)."""
    if not rest:
        return False
    first, after = rest[0], [node_text(c) for c in rest[1:2]]
    if first.type == "subscript":
        index = "".join(node_text(c) for c in first.children[2:-1]).strip()
        return index not in ("@", "*")
    return not (after and after[0] in ("*", "@"))


def _safe_operand(text: str, names_ok: bool) -> bool:
    """A number, or (for ``-v``) a plain variable name: nothing bash would evaluate."""
    return bool(NUMBER_RE.match(text)) or (names_ok and _NAME_RE.match(text) is not None)


# builtins that declare variables: read from the grammar's declaration, unless a wrapper or
# quotes (`builtin export PATH=.`, `"declare" -n x=PATH`) make them a plain command
_DECLARATIONS = frozenset({"declare", "typeset", "export", "local", "readonly"})


def evaluating_builtin(name: str, args: list[Word]) -> str | None:
    """Why the builtin ``name`` runs a string or changes a variable that decides what runs:
    ``let``, ``test -v``/``-eq``, ``printf -v a[..]``, ``read a[..]`` on anything but
    numbers, ``mapfile -C`` (a callback), ``read PATH`` (`changed_by_builtin`)."""
    changed = changed_by_builtin(name, args)
    if changed is not None:
        return changed
    if name in _DECLARATIONS:
        return f"{name!r} run as a plain command declares what the guard does not read"
    if name == "shopt" and any(w.text == "cdable_vars" or not w.literal for w in args):
        return "'cd' may then read its folder from a variable"
    if name in ("set", "shopt") and any(
        w.text in ("history", "histexpand") or (w.text[:1] == "-" and "H" in w.text)
        for w in args
    ):  # then `!!` on a later line runs a command added with `history -s`
        return "history expansion runs commands the guard cannot read"
    if name in ("mapfile", "readarray") and any(
        w.text.startswith("-") and "C" in w.text for w in args
    ):
        return f"{name!r} runs a callback the guard cannot read"
    if name not in _EVAL_BUILTINS:
        return None
    texts = [w.text for w in args]
    if name == "let" and any(not _SAFE_ARITH_RE.match(t) for t in texts):
        return "'let' on a variable may run a command hidden in its value"
    if name in ("test", "[") and any(t in _ARITH_TEST_OPS for t in texts):
        values = [t for t in texts if t not in _ARITH_TEST_OPS and t not in ("]", "!")]
        unary = not any(t in _ARITH_TEST_OPS - {"-v", "-R"} for t in texts)
        if any(not w.literal for w in args) or any(
            not _safe_operand(t, unary) for t in values
        ):
            return "a numeric test evaluates a value that may hide a command"
    if name in ("printf", "read", "mapfile", "readarray") and any(
        not w.literal or "[" in w.text for w in args
    ):
        return f"{name!r} assigns a name that may hide a command"
    return None


# Nodes whose text bash may still expand: a backquote left in them is a command.
_TEXT_NODES = frozenset({"word", "heredoc_body", "regex", "string_content", "extglob_pattern"})
_UNESCAPED_BACKQUOTE = re.compile(r"(?<!\\)(?:\\\\)*`")
_PATTERN_NODES = frozenset({"word", "regex", "extglob_pattern"})
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)(?:\\\\)*\$[({\[A-Za-z_0-9@*#?$!-]")


def _quoted_heredoc(node: Any) -> bool:
    """Whether ``node`` is the body of a heredoc whose delimiter is quoted (kept literal)."""
    parent = node.parent
    if node.type != "heredoc_body" or parent is None:
        return False
    starts = [node_text(c) for c in parent.children if c.type == "heredoc_start"]
    return any(ch in start for start in starts for ch in "'\"\\")


def hidden_in_text(node: Any) -> str | None:
    """Why ``node``'s text hides a command the grammar left unread, if it does."""
    kind = node.type
    if kind in _TEXT_NODES and _UNESCAPED_BACKQUOTE.search(node_text(node)):
        if not _quoted_heredoc(node):
            # a substitution the grammar left as text (`${x:-`rm x`}`, a heredoc's body)
            return "it holds a backquoted command the guard cannot read"
    elif kind in _PATTERN_NODES and _UNESCAPED_DOLLAR.search(node_text(node)):
        # `${x#$(rm x)}`: the grammar keeps a pattern as text; bash expands it
        return "it holds an expansion the guard cannot read"
    return None


# -- wrappers and shells -----------------------------------------------------------------------

MAX_DEPTH = 4
"""How deep ``sh -c`` / ``env -S`` scripts are read before the rest counts as opaque."""
MAX_LINE_BYTES = 128 << 10
"""The longest command line read: Linux passes no longer argument to a program (``bash -c
LINE`` fails with E2BIG), and reading costs the event loop time by the byte."""
MAX_NESTING = 128
"""How deep a line's grammar tree may nest (``a && b && ...`` nests one level per ``&&``):
the walk recurses, and a deeper line ran out of Python's stack and failed the run."""


@dataclass(frozen=True)
class Options:
    """How a wrapper reads its options before the command it runs."""

    flags: str = ""
    """Short options without a value."""
    valued: str = ""
    """Short options that take a value (``-n 5`` or ``-n5``)."""
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    positional: int = 0
    """Words between the options and the command (``timeout 5``, ``flock FILE``)."""
    numbers: bool = False
    """``-N`` is an option (``nice -10``)."""
    no_command: str = ""
    """Short options after which no command follows (``ionice -p PID``)."""


WRAPPERS: dict[str, Options] = {
    "env": Options(
        flags="i0v",
        valued="uCS",
        long_flags=frozenset({"--ignore-environment", "--null", "--debug"}),
        long_valued=frozenset({"--unset", "--chdir", "--split-string"}),
    ),
    "command": Options(flags="pvV"),
    "builtin": Options(),
    "exec": Options(flags="cl", valued="a"),
    "nohup": Options(),
    "coproc": Options(),
    "time": Options(
        flags="pavq",
        valued="fo",
        long_flags=frozenset({"--portability", "--append", "--verbose", "--quiet"}),
        long_valued=frozenset({"--format", "--output"}),
    ),
    "nice": Options(valued="n", long_valued=frozenset({"--adjustment"}), numbers=True),
    "ionice": Options(
        flags="t",
        valued="cnpPu",
        long_flags=frozenset({"--ignore"}),
        long_valued=frozenset({"--class", "--classdata", "--pid", "--pgid", "--uid"}),
        no_command="pPu",
    ),
    "taskset": Options(flags="acp", long_flags=frozenset({"--all-tasks", "--cpu-list"}),
                       positional=1, no_command="p"),
    "flock": Options(
        flags="sxunoFe",
        valued="wEc",
        long_flags=frozenset({"--shared", "--exclusive", "--unlock", "--nonblock",
                              "--close", "--no-fork", "--verbose"}),
        long_valued=frozenset({"--timeout", "--wait", "--conflict-exit-code", "--command"}),
        positional=1,
    ),
    "stdbuf": Options(valued="ioe", long_valued=frozenset({"--input", "--output", "--error"})),
    "timeout": Options(
        flags="v",
        valued="sk",
        long_flags=frozenset({"--preserve-status", "--foreground", "--verbose"}),
        long_valued=frozenset({"--signal", "--kill-after"}),
        positional=1,
    ),
    "setsid": Options(flags="cfw", long_flags=frozenset({"--ctty", "--fork", "--wait"})),
    "sudo": Options(
        flags="AbEHiKklnPSsv",
        valued="CDghpRrTtUu",
        long_flags=frozenset({"--preserve-env", "--login", "--shell", "--non-interactive",
                              "--background", "--set-home", "--stdin", "--askpass"}),
        long_valued=frozenset({"--user", "--group", "--chdir", "--prompt", "--host",
                               "--close-from", "--role", "--type", "--other-user",
                               "--command-timeout", "--chroot"}),
    ),
    "doas": Options(flags="ns", valued="uC"),
    "chroot": Options(
        long_flags=frozenset({"--skip-chdir"}),
        long_valued=frozenset({"--userspec", "--groups"}),
        positional=1,
    ),
    "busybox": Options(),
    "xargs": Options(
        flags="0prtxo",
        valued="adEeIiLlnPs",
        long_flags=frozenset({"--null", "--interactive", "--no-run-if-empty", "--verbose",
                              "--exit", "--open-tty"}),
        long_valued=frozenset({"--arg-file", "--delimiter", "--eof", "--replace",
                               "--max-lines", "--max-args", "--max-procs", "--max-chars",
                               "--process-slot-var"}),
    ),
}  # fmt: skip


def read_shell(name: str, args: list[Word], depth: int, out: _Found) -> None:
    """``sh -c 'script'`` is read in turn; a shell reading a file or stdin is opaque, and so is
    one that first runs its startup files (`_startup_files`)."""
    if _startup_files(name, args):
        out.opaque.append(f"{name!r} first runs startup files the guard cannot see")
    i, run_string = 0, False
    while i < len(args):
        word = args[i]
        if not word.literal:
            break
        text = word.text
        if text == "--" or text == "-":
            i += 1
            break
        if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if text.startswith("--"):
            i += 1
            continue
        if text[:1] in ("-", "+") and len(text) > 1:
            run_string = run_string or (text.startswith("-") and "c" in text)
            i += 1
            continue
        break
    if run_string and i < len(args):
        script = args[i]
        if not script.literal:
            out.opaque.append(f"the script of {name} -c is only known at run time")
            return
        out.read(script.text, depth + 1)
        return
    if only_info(args):
        return
    out.opaque.append(f"{name!r} reads a script the guard cannot see (a file or stdin)")


def _startup_files(name: str, args: list[Word]) -> bool:
    """Whether the shell runs startup files before its script: a login or interactive shell
    (``bash -lc``, ``sh -ic``: ``~/.profile``, ``~/.bashrc``, ``$ENV``, an ``--rcfile``), and
    zsh and fish, which read theirs for every script unless told not to."""
    options: list[str] = []
    valued = False  # the word after `-o`, `-O`, `--rcfile` is that option's value
    for word in args:
        if valued:
            valued = False
            continue
        if not word.literal or not word.text.startswith(("-", "+")) or word.text in ("-", "--"):
            break
        options.append(word.text)
        valued = word.text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file")
    letters = "".join(o[1:] for o in options if o[:1] == "-" and o[1:2] != "-")
    if name == "zsh" and "f" not in letters and "--no-rcs" not in options:
        return True
    if name == "fish" and not {"-N", "--no-config"} & set(options):
        return True
    login = "l" in letters or "--login" in options
    interactive = "i" in letters or "--interactive" in options
    return (login and not (name == "bash" and "--noprofile" in options)) or (
        interactive and not (name == "bash" and "--norc" in options)
    )


def unwrap(
    name: str, spec: Options, args: list[Word], depth: int, out: _Found
) -> list[Word] | None:
    """The words of the command a wrapper runs; ``None`` when it runs none or is opaque."""
    i, split_string, script = 0, None, None
    while i < len(args):
        word = args[i]
        text = word.text
        if name == "env" and word.literal and "=" in text and not text.startswith("-"):
            check_assignment(text, out.opaque)
            if runs_later(text):  # the value as the program sees it: `env 'X=$(shell cmd)'`
                out.opaque.append(f"{text.partition('=')[0]} may make a program run a command")
            i += 1
            continue
        if not word.literal:
            if text.startswith("-") or text.startswith("$"):
                out.opaque.append(f"an option of {name!r} is only known at run time")
                return None
            break
        if text == "--":
            i += 1
            break
        if name == "env" and text == "-":  # `env - CMD` is `env -i CMD`
            i += 1
            continue
        if not text.startswith("-") or text == "-":
            break
        if spec.numbers and NUMBER_RE.match(text):
            i += 1
            continue
        value: str | None = None
        opt = text
        if text.startswith("--"):
            opt, eq, value_part = text.partition("=")
            if opt in spec.long_valued:
                if eq:
                    value = value_part
                elif i + 1 < len(args):
                    i += 1
                    value = args[i].text if args[i].literal else None
                    if value is None:
                        out.opaque.append(f"an option of {name!r} is only known at run time")
                        return None
            elif opt not in spec.long_flags:
                out.opaque.append(f"{name!r} has an option the guard does not know: {opt}")
                return None
        else:
            for k, letter in enumerate(text[1:], start=1):
                if letter in spec.valued:
                    opt = "-" + letter
                    value = text[k + 1 :]
                    if not value and i + 1 < len(args):
                        i += 1
                        if not args[i].literal:
                            out.opaque.append(f"an option of {name!r} is only known at run time")
                            return None
                        value = args[i].text
                    break
                if letter not in spec.flags:
                    out.opaque.append(f"{name!r} has an option the guard does not know: -{letter}")
                    return None
                if letter in spec.no_command:
                    return None
        if (opt[1:] and opt[1:] in spec.no_command) or opt in ("--pid", "--pgid", "--uid"):
            return None
        if name == "exec" and (
            "l" in text.partition("a")[0] or (opt == "-a" and (value or "").startswith("-"))
        ):  # `exec -l sh`, `exec -a -sh sh`: a login shell, which runs its startup files
            out.opaque.append("'exec' starts a login shell, which runs files the guard cannot see")
        if name == "env" and opt in ("-S", "--split-string"):
            split_string = value
        if name == "flock" and opt in ("-c", "--command"):
            script = value
        i += 1
    rest = args[i:]
    if script is not None:
        out.read(script, depth + 1)
        return None
    if split_string is not None:
        if "$" in split_string or depth >= MAX_DEPTH:
            out.opaque.append("the string of env -S is only known at run time")
            return None
        try:
            split = [Word(w, True) for w in shlex.split(split_string)]
        except ValueError:
            out.opaque.append("the string of env -S does not parse")
            return None
        return unwrap(name, spec, split + rest, depth + 1, out)
    skip = spec.positional
    if name == "flock" and len(rest) > 1 and rest[1].text in ("-c", "--command"):
        if len(rest) < 3 or not rest[2].literal:
            out.opaque.append("the script of flock -c is only known at run time")
        else:
            out.read(rest[2].text, depth + 1)
        return None
    if len(rest) <= skip:
        return None
    if any(not w.literal for w in rest[:skip]):
        out.opaque.append(f"an argument of {name!r} is only known at run time")
        return None
    return rest[skip:]


# -- the scan ----------------------------------------------------------------------------------

_PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
_SYSTEM_DIRS = frozenset(
    {"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}
)

# Shell reserved words: after a wrapper they start a compound command, not a program.
_RESERVED = frozenset(
    {"{", "}", "(", ")", "((", "if", "then", "else", "elif", "fi", "while", "until", "for",
     "do", "done", "case", "esac", "select", "function", "!", "[[", "]]", "coproc", "time"}
) - {"coproc", "time"}  # fmt: skip
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "-"})
_BACKQUOTE_ESCAPE = re.compile(r"\\([$`\\])")


@dataclass(frozen=True)
class ShellCommand:
    """One simple command, or one redirection target, of a command line."""

    raw: str
    """As written (the command's source text)."""
    forms: tuple[tuple[str, ...], ...]
    """Its words (quotes removed, command word as a basename), then after each wrapper seen
    through: ``sudo -u r rm x`` is ``("sudo", "-u", "r", "rm", "x")``, ``("rm", "x")``."""
    dynamic: tuple[frozenset[int], ...] = ()
    """For each form, the positions of words whose value is only known at run time
    (expansions, substitutions, unquoted globs); such a word is shown as written."""


@dataclass(frozen=True)
class ShellScan:
    """Everything `scan` found in a command line."""

    commands: tuple[ShellCommand, ...]
    opaque: tuple[str, ...]
    """Why the command line cannot be fully seen through; empty when it can."""


@dataclass
class _Found:
    """What a scan collects while it walks."""

    commands: list[ShellCommand] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    folders: Folders = field(default_factory=Folders)
    """The changes of folder so far (``cd``, ``pushd``) and where they lead."""
    last_named: dict[Place, Place | None] = field(default_factory=dict)
    """Each pipeline's and list's last named child, by their place in the line being walked
    (`last_named`)."""

    def read(self, script: str, depth: int) -> None:
        """Scan a script found inside the command line, ``depth`` levels down."""
        _scan_into(script, depth, self)


def scan(command: str) -> ShellScan:
    """The simple commands of ``command`` and what in it cannot be seen through; a line
    longer than `MAX_LINE_BYTES` is opaque unread (and not kept: the cache holds its lines)."""
    if len(command) > MAX_LINE_BYTES or len(command.encode("utf-8", "surrogatepass")) > \
            MAX_LINE_BYTES:
        return ShellScan((), (f"the command line is longer than {MAX_LINE_BYTES:,} bytes, "
                              "more than a program is given as one argument",))
    return _scan(command)


@lru_cache(maxsize=512)
def _scan(command: str) -> ShellScan:
    out = _Found()
    _scan_into(command, 0, out)
    renamer = next((n for c in out.commands if (n := gives_new_names(c.forms))), None)
    if renamer is not None and len(out.commands) > 1:
        # `ln -s secrets s; cat s/key`: the other commands may read through a name made now
        out.opaque.append(f"{renamer!r} gives a file a new name the line's other commands "
                          "may read through, which does not exist before the run")
    return ShellScan(tuple(out.commands), tuple(out.opaque))


def _scan_into(command: str, depth: int, out: _Found) -> None:
    if depth > MAX_DEPTH:
        out.opaque.append(f"scripts nested deeper than {MAX_DEPTH} levels")
        return
    try:
        tree = _PARSER.parse(command.encode("utf-8", "surrogatepass"))
    except (UnicodeError, ValueError):  # pragma: no cover - the parser takes any bytes
        out.opaque.append("the command cannot be parsed")
        return
    if nests_deeper(tree.root_node, MAX_NESTING):
        out.opaque.append(f"the command line nests deeper than {MAX_NESTING} levels")
        return
    if tree.root_node.has_error:
        out.opaque.append("the command does not parse as a shell command line")
    outer, out.last_named = out.last_named, {}  # places in this line, not the one holding it
    try:
        _walk(tree.root_node, depth, out)
    finally:
        out.last_named = outer


def _walk(node: Any, depth: int, out: _Found) -> None:
    kind = node.type
    why = evaluates_code(node)
    if why is not None:
        out.opaque.append(why)
    text = node_text(node) if kind == "command_substitution" else ""
    if text.startswith("`") and "\\`" in text:
        # inside backquotes, \` is a nested substitution the grammar reads as a word: bash
        # removes one level of backslashes first, so read the inside that way too
        _scan_into(_BACKQUOTE_ESCAPE.sub(r"\1", text[1:-1]), depth + 1, out)
    hidden = hidden_in_text(node)
    if hidden is not None:
        out.opaque.append(hidden)
    if kind == "heredoc_redirect" and _heredoc_misread(node):
        out.opaque.append("a heredoc ends where the grammar does not see it end")
    if kind == "command":
        _command(node, depth, out)
    elif kind == "variable_assignment":
        check_assignment(node_text(node), out.opaque)
    elif kind == "file_redirect":  # a herestring (<<<) is input, not a file written
        _redirect(node, out)
    elif kind == "command_substitution":
        _read_substitution(node, out)
    for child in node.children:
        _walk(child, depth, out)


def _heredoc_misread(node: Any) -> bool:
    """Whether bash ends the heredoc ``node`` before the grammar does: its delimiter after
    quote removal (``E"O"F`` is ``EOF``), or a line joined by a backslash-newline in an
    unquoted body, or a line after ``<<-`` strips its tabs, met before the grammar's end."""
    start = next((c for c in node.children if c.type == "heredoc_start"), None)
    end = next((c for c in node.children if c.type == "heredoc_end"), None)
    if start is None or end is None:
        return False
    root = node
    while root.parent is not None:
        root = root.parent
    source = bytes(root.text or b"")
    line_end = source.find(b"\n", start.end_byte)
    if line_end < 0 or line_end >= end.start_byte:
        return False
    body = source[line_end + 1 : end.start_byte].decode("utf-8", "replace")
    written = node_text(start)
    quoted = any(ch in written for ch in "'\"\\")
    try:
        delimiter = "".join(shlex.split(written)) if quoted else written
    except ValueError:
        return True
    if not quoted:
        body = body.replace("\\\n", "")
    tabs = any(c.type == "<<-" for c in node.children)
    return any((line.lstrip("\t") if tabs else line) == delimiter for line in body.split("\n"))


def _redirect(node: Any, out: _Found) -> None:
    """A redirection that writes a file is a part of its own, which no command rule allows."""
    found = _target(node)  # the words after it are the command's (`_redirected`)
    if found is None:
        return
    target = word_value(found)
    if target.text in _HARMLESS_TARGETS or NUMBER_RE.match(target.text):
        return  # 2>/dev/null, >&2
    raw = node_text(node)
    out.commands.append(
        ShellCommand(raw=raw, forms=((raw,),), dynamic=(frozenset(),)),
    )


def _command(node: Any, depth: int, out: _Found) -> None:
    words: list[Word] = []
    for child in node.children:
        if child.type == "variable_assignment" or child.type in REDIRECT_TYPES:
            continue
        if child.type == "command_name":
            words.extend(word_value(c) for c in child.children)
        elif _fd_variable(child, out):
            continue
        elif child.is_named:
            words.append(word_value(child))
    words += _redirected(node, out.last_named)
    forms: list[tuple[str, ...]] = []
    dynamic: list[frozenset[int]] = []
    _see_through(words, depth, out, forms, dynamic)
    # a change of folder, also behind a wrapper (`builtin cd secrets`, `command pushd x`)
    changes = [
        [Word(text, i not in known_late) for i, text in enumerate(form)]
        for form, known_late in zip(forms, dynamic, strict=True)
        if form and 0 not in known_late and form[0] in FOLDER_COMMANDS
    ]
    if forms:
        out.folders.place(forms, dynamic)  # after a `cd`, a relative word names a file there
        out.commands.append(ShellCommand(node_text(node), tuple(forms), tuple(dynamic)))
    if changes:
        out.folders.change(changed_to(changes[0][0].text, changes[0][1:]))


_FD_VARIABLE_RE = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)(\[.*\])?\}$", re.DOTALL)


def _fd_variable(node: Any, out: _Found) -> bool:
    """Whether ``node`` is the ``{NAME}`` of ``{NAME}>file``, which bash reads as a variable
    to store a new descriptor in, not as a word of the command (the grammar reads a word);
    a NAME that decides what runs, or an index (arithmetic), makes the line opaque."""
    found = _FD_VARIABLE_RE.match(node_text(node))
    if found is None or node.type not in ("word", "concatenation"):
        return False
    root = node
    while root.parent is not None:
        root = root.parent
    if bytes(root.text or b"")[node.end_byte : node.end_byte + 1] not in (b"<", b">"):
        return False
    index = found.group(2)
    if index is not None and not _SAFE_INDEX_RE.match(index[1:-1].strip()):
        out.opaque.append("a {NAME[i]} descriptor's index is arithmetic that may hide a command")
    check_assignment(found.group(1), out.opaque)
    return True


def _redirected(node: Any, known: dict[Place, Place | None]) -> list[Word]:
    """The words of a command that its redirections hold: the grammar reads the words after a
    redirection's target as the redirection's (``rm 2>/dev/null x``, ``rm >&- x``, ``rm <<EOF
    x`` are ``rm x`` to bash, also as the last command of a pipeline or a list), and a file
    read on the input is read by the command as a file argument would be (``cat <
    secrets/key`` reads what ``cat secrets/key`` does)."""
    redirects = [c for c in node.children if c.type in REDIRECT_TYPES]
    below, statement = node, node.parent
    while statement is not None and (
        statement.type == "negated_command"
        or (statement.type in ("pipeline", "list")
            and last_named(statement, known) == place(below))
    ):
        below, statement = statement, statement.parent
    if statement is not None and statement.type == "redirected_statement":
        redirects += [
            c for c in statement.children
            if c.type in REDIRECT_TYPES and c.start_byte >= node.end_byte
        ]
    words: list[Word] = []
    while redirects:
        redirect = redirects.pop(0)
        named = [c for c in redirect.children if c.is_named and c.type not in _REDIRECT_PARTS]
        redirects += [c for c in named if c.type in REDIRECT_TYPES]  # `<<EOF >x y`
        named = [c for c in named if c.type not in REDIRECT_TYPES and c.type != "ERROR"]
        target = _target(redirect)
        if target is not None and named:
            named = named[1:]
            reads = any(c.type in ("<", "<>") for c in redirect.children)
            value = word_value(target)
            if reads and value.text not in _HARMLESS_TARGETS:
                words.append(value)
        words += [word_value(c) for c in named]
    return words + _read_around(statement)


# statements whose own redirection is the grammar's: the command's (read above), not a group's
_SIMPLE_BODIES = frozenset({"command", "pipeline", "list", "negated_command"})


def _read_around(node: Any) -> list[Word]:
    """The files the compound statements (and functions) around a command give it as input:
    ``{ cat; } < secrets/key`` and ``while ...; do cat; done < secrets/key`` read what ``cat <
    secrets/key`` does."""
    words: list[Word] = []
    while node is not None:
        # a function's own redirections apply whenever it runs: `f() { cat; } < k`
        grouped = node.type in ("redirected_statement", "function_definition")
        body = node.child_by_field_name("body") if grouped else None
        if body is not None and body.type not in _SIMPLE_BODIES:
            for redirect in node.children:
                target = _target(redirect) if redirect.type == "file_redirect" else None
                if target is not None and any(c.type in ("<", "<>") for c in redirect.children):
                    value = word_value(target)
                    if value.text not in _HARMLESS_TARGETS:
                        words.append(value)
        node = node.parent
    return words


def _read_substitution(node: Any, out: _Found) -> None:
    """``$(< file)`` is bash's spelling of ``$(cat file)``: a command ``cat file`` to a rule."""
    named = node.named_children
    if len(named) != 1 or named[0].type != "file_redirect":
        return
    target = _target(named[0])
    if target is None or not any(c.type == "<" for c in named[0].children):
        return
    value = word_value(target)
    forms: list[tuple[str, ...]] = [("cat", value.text)]
    dynamic = [frozenset() if value.literal else frozenset({1})]
    out.folders.place(forms, dynamic)
    out.commands.append(ShellCommand(node_text(node), tuple(forms), tuple(dynamic)))


_REDIRECT_PARTS = frozenset({"file_descriptor", "heredoc_start", "heredoc_body", "heredoc_end"})
_CLOSE_FD = frozenset({"<&-", ">&-"})


def _target(redirect: Any) -> Any | None:
    """What a redirection opens (a file, a descriptor, a herestring's text), or ``None`` when
    it opens nothing (``>&-`` closes, a heredoc's text follows the command)."""
    if redirect.type == "heredoc_redirect" or any(c.type in _CLOSE_FD for c in redirect.children):
        return None
    named = [c for c in redirect.children if c.is_named and c.type not in _REDIRECT_PARTS]
    return named[0] if named else None


def _record(words: list[Word], forms: list[tuple[str, ...]], dyn: list[frozenset[int]]) -> None:
    texts = [w.text for w in words]
    if words and words[0].literal:
        texts[0] = posixpath.basename(texts[0]) or texts[0]
    forms.append(tuple(texts))
    dyn.append(frozenset(i for i, w in enumerate(words) if not w.literal))
    seen = tuple(through_proc(t) if i and w.literal else t for i, (t, w) in enumerate(
        zip(texts, words, strict=True)))
    if seen != forms[-1]:  # `cat /proc/self/cwd/k` reads `./k`
        forms.append(seen)
        dyn.append(dyn[-1])


def _see_through(
    words: list[Word],
    depth: int,
    out: _Found,
    forms: list[tuple[str, ...]],
    dyn: list[frozenset[int]],
) -> None:
    """Record each form of one command, unwrapping wrappers and ``sh -c`` scripts."""
    while words:
        _record(words, forms, dyn)
        head = words[0]
        if not head.literal:
            out.opaque.append(f"the command word {head.text!r} is only known at run time")
            return
        name = head.text
        why = evaluating_builtin(posixpath.basename(name), words[1:])
        if why is not None:  # also through a wrapper: `builtin let ...`, `command read PATH`
            out.opaque.append(why)
        if name in _RESERVED:
            # a compound command after a wrapper the grammar misread as words
            # (`coproc { rm x; }`, `coproc NAME { ... }`): its commands are what runs
            if name != "{" or len(words) < 2:
                out.opaque.append(f"{name!r} after a wrapper runs a compound command")
                return
            words = words[1:]
            continue
        if "/" in name:
            if posixpath.dirname(posixpath.normpath(name)) not in _SYSTEM_DIRS:
                out.opaque.append(f"it runs the file {name!r}")
                return
            name = posixpath.basename(name)
        if name in SHELLS:
            read_shell(name, words[1:], depth, out)
            return
        if name == "eval" and all(w.literal for w in words):  # words[0] is literal here
            # read what it can too, so that a deny rule denies rather than asks
            _scan_into(" ".join(w.text for w in words[1:]), depth + 1, out)
        if name == "find":
            _find_commands(words, forms, dyn)
        if name in OPAQUE or (INTERPRETER_RE.match(name) and not only_info(words[1:])):
            out.opaque.append(f"{name!r} runs code the guard cannot read")
            return
        if runs_code_in_arguments(name, words[1:]):
            out.opaque.append(f"{name!r} is told to run code the guard cannot read")
            return
        hidden = hidden_urls(name, words[1:])
        if hidden is not None:
            out.opaque.append(hidden)
            return
        if name == "find" and any(not w.literal or w.text in FIND_ACTIONS for w in words[1:]):
            out.opaque.append("'find' runs or deletes what it finds")
            return
        if name == "xargs":
            out.opaque.append("'xargs' runs a command built from its input")
        options = WRAPPERS.get(name)
        if options is None:
            runs = runs_a_shell(name, words[1:])
            if runs is not None:
                out.opaque.append(runs)
            return
        rest = unwrap(name, options, words[1:], depth, out)
        if rest is None:
            return
        if name == "coproc" and len(rest) > 1 and rest[1].text in _RESERVED:
            rest = rest[1:]  # `coproc NAME { ...; }`: NAME names the coprocess
        words = rest


def _find_commands(
    args: list[Word], forms: list[tuple[str, ...]], dyn: list[frozenset[int]]
) -> None:
    """The commands of ``find -exec CMD ... ;`` as forms of the find command."""
    for i, word in enumerate(args):
        if word.text in FIND_ACTIONS and word.text != "-delete":
            end = next(
                (j for j in range(i + 1, len(args)) if args[j].text in (";", "+")), len(args)
            )
            if end > i + 1:
                _record(args[i + 1 : end], forms, dyn)

