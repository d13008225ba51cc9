"""What every command shares: exit codes, the usage error, consoles, config and inputs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console

from jianmu.config import AppConfig, load_config
from jianmu.errors import CLIError, ExitCode
from jianmu.runtime.result import RunStatus

__all__ = (
    "RUN_EXIT_CODES", "TREE_FORMATS",
    "CLIError", "ExitCode", "load_cli_config", "make_console", "parse_inputs", "visible")

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


def make_console(*, stderr: bool = False) -> Console:
    """A rich console; highlighting and ``:emoji:`` codes are off so values print as written."""
    tty = sys.stdout.isatty()
    # without a terminal rich assumes 80 columns, which squeezes tables into slivers
    return Console(stderr=stderr, highlight=False, emoji=False, soft_wrap=not tty,
                   width=None if tty else 120)


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
