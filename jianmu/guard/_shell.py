"""Read a shell command line with a real grammar (tree-sitter-bash) for the guard's rules.

`scan` finds every simple command of a command line — in lists, pipelines, compound
statements (if/while/until/for/case, ``{ }``, ``( )``), function bodies, command and process
substitutions, heredocs and ``sh -c`` scripts — sees through wrapper commands (``env``,
``sudo``, ``timeout 5``, ``nice -n 5``...) and reports what it cannot see through as *opaque*:
a command word built from an expansion, ``eval``/``source``, a shell reading a script from
stdin or a file, an interpreter, ``xargs``, ``find -exec``, a program run by a path outside
the system folders, a parse error. The rules (`jianmu.guard._rules`) decide what that means.

This module walks the grammar's tree; `jianmu.guard._shell_words` gives a word's value,
`jianmu.guard._shell_wrappers` reads wrappers and ``sh -c``, and `jianmu.guard._shell_opaque`
says what runs code the guard cannot read.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import tree_sitter
import tree_sitter_bash

from jianmu.guard._shell_opaque import (
    FIND_ACTIONS,
    INTERPRETER_RE,
    OPAQUE,
    SHELLS,
    check_assignment,
    evaluates_code,
    hidden_in_text,
    only_info,
    runs_code_in_arguments,
)
from jianmu.guard._shell_words import NUMBER_RE, REDIRECT_TYPES, Word, node_text, word_value
from jianmu.guard._shell_wrappers import MAX_DEPTH, WRAPPERS, read_shell, unwrap

__all__ = ("MAX_DEPTH", "ShellCommand", "ShellScan", "scan")

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

    def read(self, script: str, depth: int) -> None:
        """Scan a script found inside the command line, ``depth`` levels down."""
        _scan_into(script, depth, self)


@lru_cache(maxsize=512)
def scan(command: str) -> ShellScan:
    """The simple commands of ``command`` and what in it cannot be seen through."""
    out = _Found()
    _scan_into(command, 0, out)
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
    if tree.root_node.has_error:
        out.opaque.append("the command does not parse as a shell command line")
    _walk(tree.root_node, depth, out)


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
    if kind == "command":
        _command(node, depth, out)
    elif kind == "variable_assignment":
        check_assignment(node_text(node), out.opaque)
    elif kind == "file_redirect":  # a herestring (<<<) is input, not a file written
        _redirect(node, out)
    for child in node.children:
        _walk(child, depth, out)


def _redirect(node: Any, out: _Found) -> None:
    """A redirection that writes a file is a part of its own, which no command rule allows."""
    targets = [c for c in node.children if c.is_named and c.type != "file_descriptor"]
    if not targets:
        return
    target = word_value(targets[-1])
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
        elif child.is_named:
            words.append(word_value(child))
    forms: list[tuple[str, ...]] = []
    dynamic: list[frozenset[int]] = []
    _see_through(words, depth, out, forms, dynamic)
    if forms:
        out.commands.append(ShellCommand(node_text(node), tuple(forms), tuple(dynamic)))


def _record(words: list[Word], forms: list[tuple[str, ...]], dyn: list[frozenset[int]]) -> None:
    texts = [w.text for w in words]
    if words and words[0].literal:
        texts[0] = posixpath.basename(texts[0]) or texts[0]
    forms.append(tuple(texts))
    dyn.append(frozenset(i for i, w in enumerate(words) if not w.literal))


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
        if name == "find" and any(not w.literal or w.text in FIND_ACTIONS for w in words[1:]):
            out.opaque.append("'find' runs or deletes what it finds")
            return
        if name == "xargs":
            out.opaque.append("'xargs' runs a command built from its input")
        options = WRAPPERS.get(name)
        if options is None:
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

