"""What every command shares: exit codes, the usage error, consoles, config and inputs, and
how an approval request is shown.

Run ids, tool names, arguments, errors and answers come from models, tools and other
processes: printed raw, rich markup in them (``[link=...]``) or ANSI escapes would be obeyed by
the terminal. So the console every command prints with (`make_console`) takes each string it
is given as plain text: no markup is parsed, and control and format characters are written as
escapes (`printable`). Styles come only from `rich.text.Text` objects the commands build
(`say`), whose strings are made printable the same way.

An approval request shows its short summary as a heading, then the tool and its FULL
arguments (`print_request`), so a person approves exactly what will run.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
import time
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from jianmu._text import json_visible, visible
from jianmu.config import AppConfig, load_config
from jianmu.errors import CLIError, ExitCode, MissingExtraError
from jianmu.runtime.context import ApprovalRequest
from jianmu.runtime.runner import RunStatus

__all__ = (
    "EXTRAS", "LONG_ARGUMENTS", "RUN_EXIT_CODES", "TREE_FORMATS",
    "CLIError", "ExitCode", "heading", "json_text", "load_cli_config", "make_console",
    "missing_extra", "parse_edited_arguments", "parse_inputs", "pretty_json", "print_request",
    "print_runs", "printable", "read_json", "request_details", "require_extra", "say", "visible",
    "when")

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
    return json_visible(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def load_cli_config(path: str | None) -> AppConfig:
    """The config named by ``--config``, else the usual search (`load_config`), its tool rules
    checked now (`check_config_rules`): a typo stops the command before a run is saved."""
    from jianmu.guard.enforcer import check_config_rules

    config = load_config(path)
    check_config_rules(config)
    return config


def parse_inputs(pairs: Iterable[str]) -> dict[str, Any]:
    """``key=value`` (a string) and ``key:=json`` (a JSON value) into a dict.

    Raises:
        CLIError: a pair has no ``=``, an empty key, a key given twice, or ``:=`` with
            invalid JSON.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise CLIError(f"--input {pair!r}: write key=value (or key:=JSON for a JSON value)")
        if key.endswith(":"):
            key = key[:-1]
            try:
                parsed: Any = read_json(value)
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
        if key in out:  # the first value would be dropped without a word
            raise CLIError(f"--input {key!r} is given twice; give each input once")
        out[key] = parsed
    return out



# -- extras ------------------------------------------------------------------------------------

EXTRAS: dict[str, str] = {
    "anthropic": "anthropic",
    "dbos": "dbos",
    "psycopg": "dbos",
    "sqlalchemy": "dbos",
    "ddgs": "search",
    "docker": "docker",
    "mcp": "mcp",
    "openai": "openai",
    "starlette": "studio",
    "uvicorn": "studio",
}
"""The pip extra (pyproject.toml) that installs each optional package a command may import,
by the package's import name."""


def read_json(text: str) -> Any:
    """``json.loads(text)``; JSON nested past what Python's reader takes is a
    `json.JSONDecodeError` too (its `RecursionError` ended the command as an internal error)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deep to read", text, 0) from None


def parse_edited_arguments(raw: str) -> dict[str, Any]:
    """``--arguments JSON``: a call's arguments as a person edited them (a JSON object).

    Raises:
        CLIError: the text is not JSON, or not an object.
    """
    try:
        edited = read_json(raw)
    except json.JSONDecodeError as exc:
        raise CLIError(f"--arguments is not valid JSON: {exc}") from None
    if not isinstance(edited, dict):
        raise CLIError("--arguments must be a JSON object, e.g. '{\"k\": 1}'")
    return edited


def require_extra(extra: str, *modules: str) -> None:
    """Fail, naming ``extra``, unless each of ``modules`` (top-level import names) is installed.

    A command calls it first, before it prints or starts anything.

    Raises:
        MissingExtraError: a module is not installed (``pip install 'jianmu[EXTRA]'``).
    """
    for name in modules:
        if name in sys.modules:  # imported already, or blocked (None)
            installed = sys.modules[name] is not None
        else:
            installed = importlib.util.find_spec(name) is not None
        if not installed:
            raise MissingExtraError(name, extra)


def missing_extra(exc: ImportError) -> MissingExtraError | None:
    """The error naming the extra to install when ``exc`` is the import of a missing optional
    package (`EXTRAS`); ``None`` for any other import error."""
    if isinstance(exc, MissingExtraError):
        return exc
    top = (exc.name or "").partition(".")[0]
    extra = EXTRAS.get(top)
    return MissingExtraError(top, extra) if extra is not None else None


# -- approval requests -------------------------------------------------------------------------

LONG_ARGUMENTS = 4000
"""Arguments longer than this (in characters, as shown) get a note saying how long they are."""

# Shown on their own lines, or the guard's bookkeeping (a hash of the call, who asked) that
# is nothing a person decides on; any other payload key goes under "details".
_SHOWN = frozenset({"tool", "arguments", "reason", "rule", "fingerprint", "asked_by",
                    "parameters", "call_id"})


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON with every non-printable character escaped (`visible`).

    JSON already escapes C0 controls inside strings, so the only raw newlines are the layout's;
    what is left (DEL, C1 controls, bidi overrides, zero-width characters) is escaped per line.
    """
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a circular structure: repr still shows everything
        return visible(repr(value))
    return "\n".join(visible(line) for line in text.split("\n"))


def _field(indent: str, key: str, value: Any) -> Text:
    return Text.assemble(indent, (f"{key}: ", "bold"), visible(str(value)))


def _block(indent: str, title: str, value: Any) -> list[Text]:
    shown = pretty_json(value)
    size = f" ({len(shown)} characters, shown in full)" if len(shown) > LONG_ARGUMENTS else ""
    body = textwrap.indent(shown, indent + "  ", lambda _line: True)  # blank lines too
    return [Text.assemble(indent, (title, "bold"), f"{size}:"), Text(body)]


def request_details(request: ApprovalRequest, indent: str = "  ") -> list[Text]:
    """Lines under a request's heading: tool, full arguments, reason, rule, other details.

    Each line is a `Text`, so rich markup (``[bold]``) in a value prints literally; nothing is
    shortened.
    """
    payload = request.payload
    lines: list[Text] = []
    if payload.get("tool") is not None:
        lines.append(_field(indent, "tool", payload["tool"]))
    if "arguments" in payload:
        lines.extend(_block(indent, "arguments", payload["arguments"]))
    for key in ("reason", "rule"):
        if payload.get(key) is not None:
            lines.append(_field(indent, key, payload[key]))
    rest = {k: v for k, v in payload.items() if k not in _SHOWN}
    if rest:  # a node's own kind of request: show whatever it put in
        lines.extend(_block(indent, "details", rest))
    return lines


def print_request(console: Console, title: Text, request: ApprovalRequest,
                  indent: str = "  ") -> None:
    """Print ``title`` (a `heading`, with the summary) and the request's full details.

    ``soft_wrap`` leaves long lines to the terminal: rich would otherwise re-wrap them and
    could drop the spaces where it breaks.
    """
    console.print(title, soft_wrap=True)
    for line in request_details(request, indent):
        console.print(line, soft_wrap=True)


def heading(prefix: Text | str, request: ApprovalRequest, sep: str = ": ") -> Text:
    """``prefix ID: SUMMARY`` with the id and summary made visible (both come from a model)."""
    return Text.assemble(prefix, visible(request.id), sep, visible(request.summary))


def when(stamp: float | None) -> str:
    """A time as the CLI prints it (local, to the second), or ``-``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "-"


def print_runs(console: Console, title: str, place: str, status: str | None,
               columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A list of runs as a table, or the line saying ``place`` has none (with ``status``).

    Every cell is data, printed as written: callers pass it through `visible`.
    """
    if not rows:
        which = f" with status {status}" if status else ""
        console.print(f"no runs{which} in {place}")
        return
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console.print(table)
