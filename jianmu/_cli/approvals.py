"""How the CLI shows an approval request: the short summary as a heading, then the tool and
its FULL arguments, so a person approves exactly what will run."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from rich.console import Console
from rich.text import Text

from jianmu._cli.common import visible
from jianmu.runtime import ApprovalRequest

__all__ = ("LONG_ARGUMENTS", "heading", "pretty_json", "print_request", "request_details")

LONG_ARGUMENTS = 4000
"""Arguments longer than this (in characters, as shown) get a note saying how long they are."""

# Shown on their own lines, or the guard's bookkeeping (a hash of the call, who asked) that
# is nothing a person decides on; any other payload key goes under "details".
_SHOWN = frozenset({"tool", "arguments", "reason", "rule", "fingerprint", "asked_by"})


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
