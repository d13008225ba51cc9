"""What in a shell command line runs code the guard cannot read.

Programs that run a script or a command given to them (shells, interpreters, ``eval``, command
runners, editors with a command language), options that make an everyday program run one (awk's
``system``, sed's ``e``, ``git -c alias.x='!cmd'``, ``tar --to-command``), variables that change
what a later program runs, and the places where bash evaluates a value as arithmetic or a prompt,
which runs the command substitutions hidden in it. The reader (`jianmu.guard._shell`) reports
each as *opaque*; the rules (`jianmu.guard._rules`) decide what that means.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from jianmu.guard._shell_words import (
    NUMBER_RE,
    REDIRECT_TYPES,
    Word,
    node_text,
    word_value,
)

__all__ = (
    "FIND_ACTIONS",
    "INTERPRETER_RE",
    "OPAQUE",
    "SHELLS",
    "check_assignment",
    "evaluates_code",
    "hidden_in_text",
    "only_info",
    "runs_code_in_arguments",
)

SHELLS = frozenset(
    {
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "rbash",
        "yash", "posh", "ksh93", "oksh", "loksh", "pdksh", "lksh", "hush", "msh", "sash",
        "rc", "es", "xonsh", "elvish", "nu",
    }
)  # fmt: skip
_INFO_FLAGS = frozenset({"--version", "-V", "--help", "-h"})
INTERPRETER_RE = re.compile(
    r"^(python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|irb|node(js)?|deno|bun|php[0-9.]*|"
    r"lua[0-9.]*|luajit|tclsh[0-9.]*|wish|expect|rscript|r|julia|osascript|"
    r"java|jshell|groovy|scala|dotnet|pwsh|powershell|guile|racket|sbcl|ghci|runghc|"
    r"swift|elixir|erl|escript|ld\.so|ld-linux[\w.-]*|ld-musl[\w.-]*|"
    r"i?python[0-9.]*w?|bpython|ptpython|jupyter|micropython|jython|graalpy|tsx|ts-node|"
    r"qjs|gjs|rhino|octave|sage|lldb|r2|radare2|iex|crystal|nim|zig)$",
    re.IGNORECASE,
)
# Commands that run code the matcher cannot read: a script given as a string or a file,
# another command assembled at run time, or a definition that changes what a later word runs.
OPAQUE = frozenset(
    {
        "eval", "source", ".", "alias", "trap", "enable", "hash", "fc", "complete", "bind",
        "parallel", "watch", "su", "runuser", "sg", "newgrp", "pkexec", "script",
        "unshare", "nsenter", "chrt", "prlimit", "systemd-run", "strace", "ltrace", "gdb",
        "valgrind", "firejail", "bwrap", "fakeroot", "proot", "at", "batch", "ssh", "crontab",
        "unbuffer", "catchsegv", "dbus-run-session", "xvfb-run", "flatpak-spawn", "run-parts",
        # more command runners: each runs the command (or script) it is given
        "setpriv", "faketime", "cpulimit", "numactl", "eatmydata", "capsh", "nocache", "chpst",
        "cgexec", "softlimit", "setarch", "linux32", "linux64", "uclampset", "schedtool",
        "runcon", "nsjail", "minijail0", "tini", "dumb-init", "daemonize", "start-stop-daemon",
        "sshpass", "torsocks", "proxychains", "proxychains4", "rlwrap", "tmux", "screen",
        "chronic", "ifne", "pee", "vipe", "lckdo", "setlock", "npx", "uvx", "pipx",
        # programs with a command language that runs shell commands (`:!cmd`, `!cmd`, syscmd)
        "vim", "vi", "nvim", "view", "vimdiff", "ex", "rvim", "ed", "red", "emacs",
        "emacsclient", "m4", "dc", "sqlite3", "gnuplot",
        "run0", "setuidgid", "s6-setuidgid", "envdir", "envuidgid", "nq", "tsp", "daemon",
        "schroot", "distrobox", "machinectl", "dbus-launch", "toybox",
    }
)  # fmt: skip
FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete"})
# Variables that make a later program load or run code of the caller's choice.
_DANGEROUS_VARS = frozenset(
    {
        "PATH", "BASH_ENV", "ENV", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "IFS",
        "PROMPT_COMMAND", "PS4", "SHELLOPTS", "BASHOPTS", "BASH_FUNC", "PYTHONSTARTUP",
        "PYTHONPATH", "PERL5OPT", "PERL5LIB", "RUBYOPT", "NODE_OPTIONS", "GIT_SSH_COMMAND",
        "GIT_EXTERNAL_DIFF", "GIT_PAGER", "PAGER", "EDITOR", "VISUAL", "GIT_CONFIG_PARAMETERS",
    }
)  # fmt: skip
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def only_info(args: list[Word]) -> bool:
    """Whether the arguments only ask for a version or help (``python --version``)."""
    return bool(args) and all(w.literal and w.text in _INFO_FLAGS for w in args)


def check_assignment(text: str, opaque: list[str]) -> None:
    """Note an assignment to a variable that changes what a later command runs."""
    name = text.partition("=")[0].partition("[")[0].rstrip("+")
    if name in _DANGEROUS_VARS or name.startswith("BASH_FUNC"):
        opaque.append(f"it sets {name}, which changes what later commands run")


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
    if kind == "command":
        return _evaluating_builtin(node)
    return None


def _safe_operand(text: str, names_ok: bool) -> bool:
    """A number, or (for ``-v``) a plain variable name: nothing bash would evaluate."""
    return bool(NUMBER_RE.match(text)) or (names_ok and _NAME_RE.match(text) is not None)


def _evaluating_builtin(node: Any) -> str | None:
    """``let``, ``test -v``/``-eq``, ``printf -v a[..]``, ``read a[..]`` on anything but numbers."""
    words = [c for c in node.children if c.type not in REDIRECT_TYPES and c.is_named]
    if not words or words[0].type != "command_name":
        return None
    name = posixpath.basename(node_text(words[0]))
    if name not in _EVAL_BUILTINS:
        return None
    args = [word_value(c) for c in words[1:]]
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


# awk's system() and pipes to commands, sed's `e` command and flag, git's -c alias.x='!cmd'
_AWK_RE = re.compile(r"system|\||getline")
# sed's `e`: a command after an optional address (`1e cmd`, `/x/e cmd`, `$!e`) or an s flag
_SED_RE = re.compile(
    r"(^|[;{}\n])\s*([0-9$,~+!\s]|/[^/]*/)*e(\s|$|;)|/[a-zA-Z0-9]*e[a-zA-Z0-9]*\s*($|[;}\n])"
)
# options that make an everyday program run a command given as their value
_CODE_OPTIONS: dict[str, tuple[str, ...]] = {
    "tar": ("--checkpoint-action", "--to-command", "-I", "--use-compress-program",
            "--rsh-command", "-F", "--info-script", "--new-volume-script"),
    "zip": ("-TT", "--unzip-command"),
    "rsync": ("-e", "--rsh", "--rsync-path"),
    "man": ("-P", "--pager", "-H", "--html"),
    "less": ("-P",),  # harmless on its own, but LESSOPEN-style tricks are not worth reading
}  # fmt: skip
# git subcommands and options that run a command given on the command line
_GIT_RUNS = frozenset(
    {"--exec", "--extcmd", "--open-files-in-pager", "--upload-pack", "--receive-pack"}
)  # fmt: skip
_GIT_RUNNERS = frozenset({"bisect", "submodule", "filter-branch", "mergetool", "difftool"})
# Tools whose subcommand runs the command that follows it (`uv run rm x`, `npm exec rm x`).
_SUBCOMMAND_RUNNERS: dict[str, frozenset[str]] = {
    **dict.fromkeys(("uv", "poetry", "pipenv", "pdm", "hatch", "rye", "pixi", "conda",
                     "mamba", "micromamba", "cargo"), frozenset({"run"})),
    **dict.fromkeys(("npm", "pnpm", "yarn", "bun", "bundle", "direnv", "mise", "asdf",
                     "rbenv", "pyenv", "nodenv", "goenv"), frozenset({"exec", "dlx"})),
    **dict.fromkeys(("docker", "podman", "nerdctl", "kubectl", "lxc", "incus", "flatpak",
                     "toolbox"), frozenset({"run", "exec", "enter"})),
    "nix": frozenset({"run", "shell", "develop"}),
    "nix-shell": frozenset({"--run", "--command"}),
    "ip": frozenset({"netns"}),
}  # fmt: skip
_GIT_SHORT_RUNS = {"rebase": "-x", "grep": "-O", "clone": "-u", "ls-remote": "-u"}
# `git config KEY VALUE` for a key whose value a later git command runs (`alias.x '!rm x'`)
_GIT_CODE_KEYS = re.compile(
    r"^(alias\.|core\.(editor|pager|sshcommand|fsmonitor|hookspath|askpass|gitproxy)|"
    r"sequence\.editor|credential\.|diff\.|difftool\.|merge\.|mergetool\.|filter\.|"
    r"pager\.|gpg\.|uploadpack\.|receive\.|remote\.|protocol\.|include|url\.|http\.|"
    r"web\.|browser\.|man\.|instaweb\.|sendemail\.|interactive\.|log\.|status\.|"
    r"submodule\.|fetch\.|push\.|gc\.|transfer\.|ssh\.)",
    re.IGNORECASE,
)


def runs_code_in_arguments(name: str, args: list[Word]) -> bool:
    """Whether a usually harmless program is given code to run: awk, sed, git -c."""
    texts = [w.text for w in args]
    if re.fullmatch(r"g?awk|mawk|nawk", name):
        return (
            any(not w.literal for w in args)
            or "-f" in texts
            or any(_AWK_RE.search(t) for t in texts)
        )
    if re.fullmatch(r"g?sed", name):
        return any(t == "-f" or t.startswith("--file") for t in texts) or any(
            not w.literal or _SED_RE.search(w.text) for w in args
        )
    if name == "git":
        return any(
            t in ("-c", "--config-env", "--exec-path")
            or t.startswith(("--config-env=", "--exec-path="))
            or t.split("=", 1)[0] in _GIT_RUNS
            or t in _GIT_RUNNERS
            for t in texts
        ) or any(
            sub in texts and any(t.startswith(flag) for t in texts)
            for sub, flag in _GIT_SHORT_RUNS.items()
        ) or ("config" in texts and _git_config_runs_code(args))
    runs = _SUBCOMMAND_RUNNERS.get(name)
    if runs and any(t in runs for t in texts):
        return True
    options = _CODE_OPTIONS.get(name)
    if options:
        # `-Icmd`, `-I cmd`, `--to-command=cmd`: a short option may carry its value
        return any(
            t.split("=", 1)[0] in options
            or any(o[1:2] != "-" and t.startswith(o) for o in options)
            for t in texts
        )
    return False


def _git_config_runs_code(args: list[Word]) -> bool:
    """Whether ``git config`` sets (or may set) a key whose value later git commands run,
    or writes a config file named on the command line."""
    return any(
        not w.literal
        or _GIT_CODE_KEYS.match(w.text)
        or w.text in ("-f", "--file")
        or w.text.startswith("--file=")
        for w in args
    )
