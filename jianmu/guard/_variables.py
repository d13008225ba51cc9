"""Variables that change what later commands run, and every way a command line changes one.

``PATH=. ls`` is not the only spelling: ``read PATH``, ``printf -v PATH``, ``mapfile PATH``,
``getopts a PATH``, ``wait -p PATH``, a ``for``/``select`` loop's variable, ``${PATH:=.}``
and ``unset PATH`` (bash then searches a default path that ends in ``.``) change it too. For
`jianmu.guard._shell`, which reports each as opaque.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = (
    "changed_by_builtin", "changed_by_node", "check_assignment", "is_dangerous", "runs_later",
)  # fmt: skip


class _Word(Protocol):
    """A word of a command (`jianmu.guard._shell.Word`)."""

    @property
    def text(self) -> str:
        """Its value, or its source text when only the run knows it."""

    @property
    def literal(self) -> bool:
        """Whether its value is known before the run."""


# Variables that make a later program load or run code of the caller's choice.
_DANGEROUS_VARS = frozenset(
    {
        "PATH", "BASH_ENV", "ENV", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "IFS",
        "PROMPT_COMMAND", "PS4", "SHELLOPTS", "BASHOPTS", "BASH_FUNC", "PYTHONSTARTUP",
        "PYTHONPATH", "PERL5OPT", "PERL5LIB", "RUBYOPT", "NODE_OPTIONS", "GIT_SSH_COMMAND",
        "GIT_EXTERNAL_DIFF", "GIT_PAGER", "PAGER", "EDITOR", "VISUAL", "GIT_CONFIG_PARAMETERS",
        "BASH_CMDS", "BASH_ALIASES", "CDPATH",  # what a name runs; where `cd x` goes
    }
)  # fmt: skip
# Families of variables a program reads a command (or options that run one) from: git's
# config given in the environment (the spelling of `git -c`), the transports git may run
# (`ext::cmd`), the editors, pagers and password prompts programs start, and the option
# variables of programs with such options.
_DANGEROUS_VAR_RE = re.compile(
    r"^(GIT_CONFIG\w*|\w*(EDITOR|PAGER|ASKPASS)|GIT_SSH|GIT_PROXY_COMMAND|GIT_EXEC_PATH|"
    r"GIT_ALLOW_PROTOCOL|LESSOPEN|LESSCLOSE|TAR_OPTIONS|RSYNC_RSH|MANOPT|ZIPOPT|BROWSER|"
    # the loader's and libraries' plug-ins (a shared object runs when it is loaded)
    r"LD_\w+|DYLD_\w+|GCONV_PATH|OPENSSL_(CONF|ENGINES|MODULES)|"
    # what make and build tools run (`CC='rm x #' make x`, MAKEFLAGS='--eval=...')
    r"G?MAKEFLAGS|MFLAGS|MAKEFILES|MAKESHELL|SHELL|CC|CXX|CPP|FC|AR|AS|LD|LEX|YACC)$"
)
# a value make (or another program) expands later: `$(shell cmd)` kept literal by quotes
_LATER_EXPANSION_RE = re.compile(r"'[^']*\$[({]|\\\$[({]")


def is_dangerous(name: str) -> bool:
    """Whether changing the variable ``name`` changes what later commands run."""
    return name in _DANGEROUS_VARS or name.startswith("BASH_FUNC") or bool(
        _DANGEROUS_VAR_RE.match(name)
    )


def runs_later(word: str) -> bool:
    """Whether ``NAME=VALUE`` (a word, quotes removed) sets a variable that decides what runs,
    or a value with a ``$(...)`` a program such as make expands (``make 'X=$(shell cmd)'``)."""
    name, equals, value = word.partition("=")
    return bool(equals) and (is_dangerous(name) or bool(re.search(r"\$[({]|`", value)))


def check_assignment(text: str, opaque: list[str]) -> None:
    """Note an assignment to a variable that changes what a later command runs."""
    name, _, value = text.partition("=")
    name = name.partition("[")[0].rstrip("+")
    if is_dangerous(name):
        opaque.append(f"it sets {name}, which changes what later commands run")
    elif _LATER_EXPANSION_RE.search(value):
        opaque.append(f"{name} holds a $(...) a later program may expand and run")


# Builtins that assign the variables they name: where the name is. None: any word that is
# not an option may be a name (`read -a NAME` names one too); an option: the word after it
# (or its rest, `-vNAME`); a number: the word at that place, which must be known.
_ASSIGNING: dict[str, str | int | None] = {
    "read": None, "mapfile": None, "readarray": None, "unset": None,
    "printf": "-v", "wait": "-p", "getopts": 1,
}  # fmt: skip


def _names(where: str | int | None, args: Sequence[_Word]) -> list[tuple[str, bool]]:
    """The words of a builtin's arguments that may name a variable, as (text, literal)."""
    if where is None:
        return [(w.text, w.literal) for w in args]
    if isinstance(where, int):
        return [(w.text, w.literal) for w in args[where : where + 1]]
    found = []
    for i, word in enumerate(args):
        if word.text == where and i + 1 < len(args):
            found.append((args[i + 1].text, args[i + 1].literal))
        elif word.text.startswith(where) and len(word.text) > len(where):
            found.append((word.text[len(where) :], word.literal))
    return found


def changed_by_builtin(name: str, args: Sequence[_Word]) -> str | None:
    """Why the builtin ``name`` changes a variable that decides what later commands run."""
    if name not in _ASSIGNING:
        return None
    where = _ASSIGNING[name]
    for text, literal in _names(where, args):
        if where is not None and (not literal or "[" in text):
            # a name only the run knows may be PATH; an array's index is arithmetic
            return f"{name!r} assigns a name that may hide a command"
        for candidate in (text, text[2:]) if text.startswith("-") else (text,):
            if is_dangerous(candidate.partition("[")[0]):
                return f"{name!r} changes {candidate}, which changes what later commands run"
    return None


def _text(node: Any) -> str:
    return bytes(node.text or b"").decode("utf-8", "replace")


def changed_by_node(node: Any) -> str | None:
    """Why a grammar node changes such a variable: a loop's variable (``for PATH in``,
    ``select PATH in``), or an expansion that assigns a default (``${PATH:=.}``)."""
    if node.type == "for_statement":
        variable = node.child_by_field_name("variable")
        if variable is not None and is_dangerous(_text(variable)):
            return f"the loop sets {_text(variable)}, which changes what later commands run"
    if node.type == "expansion":
        kinds = [c.type for c in node.children]
        if ("=" in kinds or ":=" in kinds) and any(
            c.type == "variable_name" and is_dangerous(_text(c)) for c in node.children
        ):
            return "the expansion sets a variable that changes what later commands run"
    return None
