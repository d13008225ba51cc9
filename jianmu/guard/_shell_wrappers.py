"""Commands that run another command: wrappers (``env``, ``sudo``, ``timeout 5``...) and shells.

`unwrap` reads a wrapper's options the way the wrapper does and returns the words of the
command it runs; `read_shell` reads ``sh -c 'script'``. Scripts found on the way (``sh -c``,
``flock -c``, ``env -S``) are handed back to the reader, one level deeper; an option the guard
does not know, or one only the run knows, makes the command line opaque.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Protocol

from jianmu.guard._shell_opaque import check_assignment, only_info
from jianmu.guard._shell_words import NUMBER_RE, Word

__all__ = ("MAX_DEPTH", "WRAPPERS", "Options", "Reader", "read_shell", "unwrap")

MAX_DEPTH = 4
"""How deep ``sh -c`` / ``env -S`` scripts are read before the rest counts as opaque."""


class Reader(Protocol):
    """What collects a scan: the reasons it is opaque, and reading a nested script."""

    opaque: list[str]

    def read(self, script: str, depth: int) -> None:
        """Scan ``script`` (found at ``depth``) into the same results."""
        ...


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


def read_shell(name: str, args: list[Word], depth: int, out: Reader) -> None:
    """``sh -c 'script'`` is read in turn; a shell reading a file or stdin is opaque."""
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


def unwrap(
    name: str, spec: Options, args: list[Word], depth: int, out: Reader
) -> list[Word] | None:
    """The words of the command a wrapper runs; ``None`` when it runs none or is opaque."""
    i, split_string, script = 0, None, None
    while i < len(args):
        word = args[i]
        text = word.text
        if name == "env" and word.literal and "=" in text and not text.startswith("-"):
            check_assignment(text, out.opaque)
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
