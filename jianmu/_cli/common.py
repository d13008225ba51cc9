"""What every command shares: exit codes, the usage error, consoles, config and inputs.

Run ids, tool names, arguments, errors and answers come from models, tools and other
processes: printed raw, rich markup in them (``[link=...]``) or ANSI escapes would be obeyed by
the terminal. So the console every command prints with (`make_console`) takes each string it
is given as plain text: no markup is parsed, and control and format characters are written as
escapes (`printable`). Styles come only from `rich.text.Text` objects the commands build
(`say`), whose strings are made printable the same way.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.text import Text

from jianmu.config import AppConfig, load_config
from jianmu.errors import CLIError, ExitCode
from jianmu.runtime.runner import RunStatus

__all__ = (
    "RUN_EXIT_CODES", "TREE_FORMATS",
    "CLIError", "ExitCode", "json_text", "load_cli_config", "make_console", "parse_inputs",
    "printable", "say", "visible")

TREE_FORMATS = ("ascii", "dot", "mermaid")
"""What ``jianmu tree show --format`` accepts."""

RUN_EXIT_CODES = {
    RunStatus.SUCCESS: ExitCode.OK,
    RunStatus.FAILURE: ExitCode.FAILURE,
    RunStatus.SUSPENDED: ExitCode.SUSPENDED,
    RunStatus.TIMEOUT: ExitCode.STOPPED,
    RunStatus.CANCELLED: ExitCode.STOPPED,
}
"""How ``jianmu run`` (plain or durable) and ``resume`` exit for each way a run ends."""


class _PlainConsole(Console):
    """A rich console that prints every string as written: no markup, nothing obeyed."""

    def render_str(self, text: str, **options: Any) -> Text:
        # every string rich turns into text passes here: print's, a table's cells and title
        options.update(markup=False, emoji=False, highlight=False)
        return super().render_str(printable(text), **options)


def make_console(*, stderr: bool = False) -> Console:
    """A rich console for data: strings print as written (no markup, control characters
    escaped, see the module docstring); styles come from `say`."""
    tty = sys.stdout.isatty()
    # without a terminal rich assumes 80 columns, which squeezes tables into slivers
    return _PlainConsole(stderr=stderr, highlight=False, emoji=False, markup=False,
                         soft_wrap=not tty, width=None if tty else 120)


_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(char: str) -> str:
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` with each non-printable character written as an escape (``\\u001b``, ``\\n``).

    Control characters (ANSI escape sequences), format characters (bidi overrides, zero-width
    spaces, tag characters) and separators other than the plain space would otherwise be obeyed
    by the terminal or be invisible; a person deciding on a tool call must see them.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape_char(char) for char in text)


def printable(text: str) -> str:
    """``text`` with its lines kept and every other non-printable character escaped
    (`visible`, tabs expanded): what a multi-line value may show on a terminal."""
    if text.isprintable():
        return text
    return "\n".join(visible(line.expandtabs()) for line in text.split("\n"))


def say(*parts: str | tuple[str, str]) -> Text:
    """One styled line: ``("suspended", "yellow")`` is a label in a style, a string plain
    text; every part is made `printable`, so data can be any of them."""
    return Text.assemble(*(
        (printable(p[0]), p[1]) if isinstance(p, tuple) else printable(p) for p in parts
    ))


def json_text(value: Any) -> str:
    """``value`` as indented JSON that shows every character yet cannot drive a terminal:
    non-printable characters (C1 controls, bidi overrides) are ``\\u`` escapes, as valid
    JSON."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if text.isprintable() or all(c.isprintable() or c == "\n" for c in text):
        return text
    return "".join(
        c if c.isprintable() or c == "\n" else json.dumps(c)[1:-1] for c in text
    )


def load_cli_config(path: str | None) -> AppConfig:
    """The config named by ``--config``, else the usual search (`load_config`)."""
    return load_config(path)


def parse_inputs(pairs: Iterable[str]) -> dict[str, Any]:
    """``key=value`` (a string) and ``key:=json`` (a JSON value) into a dict.

    Raises:
        CLIError: a pair has no ``=``, an empty key, or ``:=`` with invalid JSON.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise CLIError(f"--input {pair!r}: write key=value (or key:=JSON for a JSON value)")
        if key.endswith(":"):
            key = key[:-1]
            try:
                parsed: Any = json.loads(value)
            except json.JSONDecodeError as exc:
                raise CLIError(
                    f"--input {pair!r}: the value after ':=' is not JSON ({exc.msg}); "
                    "quote strings as JSON or use key=value"
                ) from None
        else:
            parsed = value
        key = key.strip()
        if not key:
            raise CLIError(f"--input {pair!r}: the key before '=' is empty")
        out[key] = parsed
    return out
