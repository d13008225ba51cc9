"""Programs that run code the guard cannot read: shells, interpreters, command runners and
editors with a command language, and the options that make an everyday program run a command
given to it (awk's ``system``, sed's ``e``, ``git -c alias.x='!cmd'``, ``tar --to-command``,
``make --eval``). For `jianmu.guard._shell`, which reports each as opaque."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from jianmu.guard._variables import runs_later

__all__ = (
    "DATA_ONLY", "FIND_ACTIONS", "INTERPRETER_RE", "OPAQUE", "SHELLS", "gives_new_names",
    "hidden_urls", "only_info", "runs_a_shell", "runs_code_in_arguments",
)  # fmt: skip


class Word(Protocol):
    """A word of a command (`jianmu.guard._shell.Word`)."""

    @property
    def text(self) -> str:
        """Its value, or its source text when only the run knows it."""

    @property
    def literal(self) -> bool:
        """Whether its value is known before the run."""


SHELLS = frozenset(
    {
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "rbash",
        "yash", "posh", "ksh93", "oksh", "loksh", "pdksh", "lksh", "hush", "msh", "sash",
        "rc", "es", "xonsh", "elvish", "nu",
    }
)  # fmt: skip
_INFO_FLAGS = frozenset({"--version", "-V", "--help", "-h"})
INTERPRETER_RE = re.compile(
    r"^(python[0-9.]*|pypy[0-9.]*|perl[0-9.]*(-\w+-linux-gnu\w*)?|pdb[0-9.]*|ruby[0-9.]*|irb|node(js)?|deno|bun|php[0-9.]*|"
    r"lua[0-9.]*|luajit|tclsh[0-9.]*|wish[0-9.]*|expect|rscript|r|julia|osascript|"
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
        # setarch by another name (util-linux links these to it): `x86_64 rm x` runs rm
        "i386", "i486", "i586", "i686", "x86_64", "uname26", "ia64", "alpha", "arm", "armh",
        "aarch64", "mips", "mips32", "mips64", "ppc", "ppc32", "ppc64", "ppc64le", "s390",
        "s390x", "sparc", "sparc32", "sparc32bash", "sparc64", "parisc", "parisc32", "parisc64",
        "torify", "caffeinate", "xe", "with-lock-ex", "retry",
        # more runners, and editors and debuggers by other names (Debian's `vim.basic`...)
        "msgexec", "msgfilter", "systemd-cat", "systemd-inhibit", "systemd-socket-activate",
        "memusage", "heaptrack", "luit", "pg_virtualenv", "debconf-apt-progress", "tini-static",
        "sotruss", "valgrind.bin", "gdbtui", "slogin", "vim.basic", "vim.tiny", "vim.nox",
        "vim.gtk3", "rview", "editor", "sensible-editor", "jrunscript",
        "runcon", "nsjail", "minijail0", "tini", "dumb-init", "daemonize", "start-stop-daemon",
        "sshpass", "torsocks", "proxychains", "proxychains4", "rlwrap", "tmux", "screen",
        "chronic", "ifne", "pee", "vipe", "lckdo", "setlock", "npx", "uvx", "pipx",
        # programs with a command language that runs shell commands (`:!cmd`, `!cmd`, syscmd)
        "vim", "vi", "nvim", "view", "vimdiff", "ex", "rvim", "ed", "red", "emacs",
        "emacsclient", "m4", "dc", "sqlite3", "gnuplot",
        "run0", "setuidgid", "s6-setuidgid", "envdir", "envuidgid", "nq", "tsp", "daemon",
        "schroot", "distrobox", "machinectl", "dbus-launch", "toybox",
        # builtins and programs that run a command or a word list they expand
        "compgen", "logsave", "perf", "ssh-agent", "gpg-agent", "scp", "sftp", "scriptlive",
        "sem", "hyperfine", "socat", "ccache", "openvt", "entr", "timelimit", "mispipe", "rr",
        "systemd-nspawn", "apptainer", "singularity", "lxc-attach", "dtach", "abduco",
        "trickle", "xterm",
    }
)  # fmt: skip
FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete"})
# Programs whose arguments and input are only data, never a command they run (their options
# that do run one are `runs_code_in_arguments`'s): ``echo rm x`` runs no rm. Any other program
# may run what follows a word of its (``not-14 rm x``, ``choom -n 1 -- rm x``, a build file on
# its stdin), which a rule that restricts reads as a command (`Rule._restricts_embedded`).
DATA_ONLY = frozenset(
    {
        "echo", "printf", "cat", "tac", "tee", "grep", "egrep", "fgrep", "rg", "ag", "ls",
        "head", "tail", "wc", "sort", "uniq", "cut", "tr", "diff", "cmp", "comm", "paste",
        "join", "nl", "od", "xxd", "hexdump", "strings", "base64", "md5sum", "sha1sum",
        "sha256sum", "sha512sum", "stat", "file", "du", "df", "pwd", "cd", "mkdir", "touch",
        "cp", "mv", "ln", "chmod", "chown", "date", "basename", "dirname", "realpath",
        "readlink", "true", "false", "test", "[", "which", "type", "column", "fold", "fmt",
        "expand", "unexpand", "rev", "jq", "yq", "git", "sed", "awk", "gawk", "mawk", "printenv",
        "export", "read", "local", "declare", "set", "unset", "shift", "return", "exit",
        "find",  # (its -exec commands are read as commands of their own)
    }
)  # fmt: skip


# Programs that give a file or folder another name: a link (``ln -s secrets s``), or a move or
# a copy that carries a folder and its links along (``mv``, ``cp -r``, ``rsync``). The new name
# does not exist when the guard looks, so it cannot follow it in a later command of the line.
_RENAMERS = frozenset({"ln", "link", "mv", "rsync"})
# cp's options that copy a folder or a link as it is, or make links: a plain `cp a b` copies
# the bytes of one file, which a rule on the reading command cannot tell from any other file
_CP_LETTERS = frozenset("rRadPsl")
_CP_LONG = ("--recursive", "--archive", "--no-dereference", "--symbolic-link", "--link")


def gives_new_names(forms: Sequence[Sequence[str]]) -> str | None:
    """The program among a command's forms (its words, then after each wrapper) that gives a
    file or folder another name a later command may read through, or None."""
    for form in forms:
        if form and (form[0] in _RENAMERS or (form[0] == "cp" and _cp_carries(form[1:]))):
            return form[0]
    return None


def _cp_carries(args: Sequence[str]) -> bool:
    for arg in args:
        if arg == "--":
            return False
        if arg.startswith("--"):
            name = arg.partition("=")[0]  # cp takes a long option's unique beginning: --rec
            if len(name) > 2 and any(long.startswith(name) for long in _CP_LONG):
                return True
        elif arg.startswith("-") and _CP_LETTERS & set(arg[1:]):
            return True
    return False


def only_info(args: Sequence[Word]) -> bool:
    """Whether the arguments only ask for a version or help (``python --version``)."""
    return bool(args) and all(w.literal and w.text in _INFO_FLAGS for w in args)


# awk's system() and pipes to commands, sed's `e` command and flag, git's -c alias.x='!cmd'
_AWK_RE = re.compile(r"system|\||getline")
_SED_ADDRESS = re.compile(
    r"(\d+(~\d+)?|\$|/(\[[^]\n]*\]|[^/\\\n]|\\.)*/|\\(?P<d>[^\n\\])((?!(?P=d))[^\\\n]|\\.)*(?P=d))"
    r"[IM]*")
_SED_SIMPLE = frozenset("=dDgGhHnNpPxzF{}")  # commands of one letter and no argument
_SED_TO_LINE_END = frozenset("aicrRwW#:")  # commands whose argument runs to the line's end


def _sed_runs(script: str) -> bool:
    """Whether a sed script runs a shell command: GNU sed's ``e`` command, or an ``s``
    command's ``e`` flag, after any address (``1e``, ``\\,x,e``, ``/x/Ie``) or delimiter
    (``s|a|b|e``). A script that does not read as sed's counts as one that runs."""
    at, end = 0, len(script)
    while True:
        while at < end and script[at] in " \t\n;{":
            at += 1
        if at >= end:
            return False
        for _ in range(2):  # an address, a range's second one (`,addr`, `,+N`, `,~N`)
            found = _SED_ADDRESS.match(script, at)
            if found:
                at = found.end()
            if at < end and script[at] == ",":
                at += 1
                if at < end and script[at] in "+~":
                    at += 1
                continue
            break
        while at < end and script[at] in " \t!":
            at += 1
        if at >= end:
            return False
        command, at = script[at], at + 1
        if command == "e":
            return True
        if command in "sy":
            if at >= end or script[at] in "\\\n":
                return True
            delimiter, parts, at = script[at], 0, at + 1
            while at < end and parts < 2:
                if script[at] == "\\":
                    at += 2
                    continue
                parts += script[at] == delimiter
                at += 1
            if parts < 2:
                return True  # not closed: not sed as the guard knows it
            flags = re.match(r"[gpiImM0-9e]*", script[at:]).group()  # type: ignore[union-attr]
            if command == "s" and "e" in flags:
                return True
            at += len(flags)
            if at < end and script[at] == "w":  # a file to write: the rest of the line
                command = "w"
        if command in _SED_TO_LINE_END:
            while at < end and script[at] != "\n":
                at += 2 if script[at] == "\\" else 1  # (`a\` text goes on past a `\` end)
        elif command in "btTqQlL":  # a label or a number, to `;` or the line's end
            while at < end and script[at] not in ";\n}":
                at += 1
        elif command not in _SED_SIMPLE and command not in "sy":
            return True  # a command the guard does not know


# options that make an everyday program run a command given as their value
_CODE_OPTIONS: dict[str, tuple[str, ...]] = {
    "tar": ("--checkpoint-action", "--to-command", "-I", "--use-compress-program",
            "--rsh-command", "-F", "--info-script", "--new-volume-script"),
    "zip": ("-TT", "--unzip-command"),
    "rsync": ("-e", "--rsh", "--rsync-path"),
    "man": ("-P", "--pager", "-H", "--html"),
    "less": ("-P",),  # harmless on its own, but LESSOPEN-style tricks are not worth reading
    "make": ("--eval", "-E"), "cmake": ("-E", "-P"), "split": ("--filter",),
    "dpkg": ("--pre-invoke", "--post-invoke", "--status-logger"),
    **dict.fromkeys(("apt-get", "apt"), ("-o", "--option", "-c", "--config-file")),
    "sort": ("--compress-program",), "install": ("--strip-program",),
    **dict.fromkeys(("groff", "troff", "nroff"), ("-U",)),  # unsafe: `.sy cmd` runs cmd
    **dict.fromkeys(("gpg", "gpg2"), ("--photo-viewer", "--exec-path")),
    "wget": ("--use-askpass", "-e", "--execute"),
    **dict.fromkeys(("sdiff", "diff3"), ("--diff-program",)),
    **dict.fromkeys(("nc", "ncat", "netcat"), ("-e", "-c", "--exec", "--sh-exec", "--lua-exec")),
    **dict.fromkeys(("gcc", "cc", "g++", "c++", "clang"), ("-wrapper", "-fplugin")),
}  # fmt: skip
# make reading its makefile from the command line's input (`make -f - <<< 'x:; cmd'`)
_MAKE_STDIN_RE = re.compile(r"^(-f|--file=|--makefile=)?(-|/dev/.*|/proc/.*)$")
# git subcommands and options that run a command given on the command line
_GIT_RUNS = frozenset(
    {"--exec", "--extcmd", "--open-files-in-pager", "--upload-pack", "--receive-pack",
     "--access-hook", "--httpd", "--sendmail-cmd", "--smtp-server"}
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
    **dict.fromkeys(("runc", "crun", "ctr"), frozenset({"run", "exec"})),
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
    r"submodule\.|fetch\.|push\.|gc\.|transfer\.|ssh\.|trailer\.)",
    re.IGNORECASE,
)


def runs_code_in_arguments(name: str, args: Sequence[Word]) -> bool:
    """Whether a usually harmless program is given code to run: awk, sed, git -c."""
    texts = [w.text for w in args]
    if re.fullmatch(r"g?awk|mawk|nawk", name):
        return (
            any(not w.literal for w in args)
            or _reads_program(texts, "fEilW", ("--file", "--exec", "--include", "--load"))
            or any(_AWK_RE.search(t) for t in texts)
        )
    if re.fullmatch(r"g?sed", name):
        return _reads_program(texts, "f", ("--file",)) or any(
            not w.literal or _sed_runs(w.text) for w in _sed_scripts(args))
    if name == "git":
        return any(
            t in ("-c", "--config", "--config-env", "--exec-path")  # (`clone --config`)
            or t.startswith(("--config=", "--config-env=", "--exec-path="))
            or _names_option(t, _GIT_RUNS)
            or t in _GIT_RUNNERS
            or "ext::" in t  # the `ext` transport runs its URL as a command
            for t in texts
        ) or any(  # `-x cmd`, `-xcmd`, and in a group of letters: `-qx cmd`, `-iOrm`
            sub in texts and any(t[:1] == "-" and t[1:2] != "-" and flag[1] in t for t in texts)
            for sub, flag in _GIT_SHORT_RUNS.items()
        ) or ("config" in texts and _git_config_runs_code(args))
    if name == "make" and (
        _make_reads_input(args)
        or any(runs_later(t) for t in texts if not t.startswith("-"))  # `make CC='rm x #'`
    ):
        return True
    runs = _SUBCOMMAND_RUNNERS.get(name)
    if runs and any(t in runs for t in texts):
        return True
    options = _CODE_OPTIONS.get(name)
    if options:
        # `-Icmd`, `-I cmd`, `--to-command=cmd`: a short option may carry its value, and be
        # one of a group (`tar -cvI cmd`, `rsync -ave cmd`; tar's first word needs no dash)
        letters = {o[1] for o in options if len(o) == 2 and o[0] == "-"}
        groups = [t[1:] for t in texts if t[:1] == "-" and t[1:2] != "-"]
        if name == "tar" and texts and not texts[0].startswith("-"):
            groups.append(texts[0])
        return any(letters & set(group) for group in groups) or any(
            _names_option(t, options) or any(o[1:2] != "-" and t.startswith(o) for o in options)
            for t in texts
        )
    return False


# URL clients' options that read their URLs (and more options) from a file or stdin
_URL_FILES = {
    # ...or send them elsewhere than their host: another address, a proxy, a socket
    "curl": ("-K", "--config", "--connect-to", "--resolve", "-x", "--proxy", "--preproxy",
             "--socks4", "--socks4a", "--socks5", "--socks5-hostname", "--unix-socket",
             "--abstract-unix-socket"),
    "wget": ("-i", "--input-file", "--config", "-e", "--execute"),
}  # fmt: skip
# curl's globbing: `{a,b}` alternatives and `[1-9]` ranges in a URL (not an IPv6 host's [])
_URL_LIKE_RE = re.compile(r"^(--url=)?([a-zA-Z][\w+.-]*://|[\w-]+\.[\w{}\[\],.-]+)")  # not data
_CURL_GLOB_RE = re.compile(r"\{[^}]*\}|(?<!//)\[[^\]]*-[^\]]*\]")


def hidden_urls(name: str, args: Sequence[Word]) -> str | None:
    """Why a URL client's command names URLs its words do not show (curl's ``-K file``, its
    ``{a,b}`` and ``[1-9]`` globs, wget's ``-i file``), or None."""
    options = _URL_FILES.get(name)
    if options is None:
        return None
    texts = [w.text for w in args]
    letters = {o[1] for o in options if len(o) == 2}
    if any(_names_option(t, options) or (t[:1] == "-" and t[1:2] != "-" and letters & set(t))
           for t in texts):
        return f"{name!r} reads its URLs from a file, or connects elsewhere than they say"
    if name == "curl" and not any(t in ("-g", "--globoff") for t in texts) and any(
            _CURL_GLOB_RE.search(t) for t in texts if _URL_LIKE_RE.match(t)):
        return "'curl' expands a URL's {} and [] into URLs the guard cannot read"
    return None


def runs_a_shell(name: str, args: Sequence[Word]) -> str | None:
    """Why a program the guard does not know, named with a shell or an interpreter among its
    words, may run code it cannot read (``choom -n 0 -- sh x.sh``, ``echo cmd | runner sh``),
    or None: such a word is the program it starts, most likely. Not for a program whose words
    are only data (``echo bash``)."""
    if name in DATA_ONLY:
        return None
    for word in args:
        base = word.text.rsplit("/", 1)[-1]
        if word.literal and (base in SHELLS or INTERPRETER_RE.match(base)):
            return f"{name!r} may start {base!r}, which runs code the guard cannot read"
    return None


def _names_option(text: str, options: Iterable[str]) -> bool:
    """Whether ``text`` is one of ``options`` (``--opt`` or ``--opt=value``) or, for a long
    one, a beginning of it: getopt_long and git take ``--filt=cmd`` for ``--filter=cmd``."""
    name = text.split("=", 1)[0]
    if name in options:
        return True
    longs = [o for o in options if o[:2] == "--"]
    return name[:2] == "--" and len(name) > 2 and any(o.startswith(name) for o in longs)


def _reads_program(texts: list[str], letters: str, long: tuple[str, ...]) -> bool:
    """Whether an option reads the program from a file (or loads one): one of ``letters`` in
    a group of short options (``-f p``, ``-fp``, ``-nf p``), or a ``long`` option, also by
    its beginning (``--fil p``)."""
    return any(
        (t[:1] == "-" and t[1:2] != "-" and any(ch in letters for ch in t[1:]))
        or _names_option(t, long)
        for t in texts
    )


class _Text(NamedTuple):
    """A script carried by an option's word (``-eS``, ``--expression=S``), as a `Word`."""

    text: str
    literal: bool


def _sed_scripts(args: Sequence[Word]) -> list[Word]:
    """A sed command line's scripts: each ``-e``/``--expression`` value, else its first
    operand (the rest are the files it reads)."""
    scripts: list[Word] = []
    operands: list[Word] = []
    words = list(args)
    while words:
        word = words.pop(0)
        text = word.text
        name, equals, value = text.partition("=")
        if text == "--":
            operands += words
            break
        if text.startswith("--") and len(name) > 4 and "--expression".startswith(name):
            scripts += [_Text(value, word.literal)] if equals else words[:1]
            words = words[0 if equals else 1:]
        elif text in ("-l", "--line-length"):
            words = words[1:]
        elif text[:1] == "-" and text[1:2] != "-" and "e" in text[1:]:  # -e S, -neS, -eS
            after = text[1:].partition("e")[2]
            scripts += [_Text(after, word.literal)] if after else words[:1]
            words = words[0 if after else 1:]
        elif text[:1] != "-" or text == "-":
            operands.append(word)
    return scripts or operands[:1]


def _make_reads_input(args: Sequence[Word]) -> bool:
    """Whether ``make`` reads a makefile given on the command line: from its input, a
    device or a process substitution (``make -f - <<< 'x:; cmd'``, ``make -f <(...)``)."""
    for i, word in enumerate(args):
        if _MAKE_STDIN_RE.match(word.text):
            return True
        if word.text in ("-f", "--file", "--makefile") and i + 1 < len(args):
            after = args[i + 1]
            if not after.literal or _MAKE_STDIN_RE.match(after.text):
                return True
    return False


def _git_config_runs_code(args: Sequence[Word]) -> bool:
    """Whether ``git config`` sets (or may set) a key whose value later git commands run,
    or writes a config file named on the command line."""
    return any(
        not w.literal
        or _GIT_CODE_KEYS.match(w.text)
        or w.text in ("-f", "--file")
        or w.text.startswith("--file=")
        for w in args
    )
