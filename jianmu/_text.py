"""Text from a run, shown as it is: every character a terminal or a page would obey or hide
(ANSI escapes and other controls, bidi overrides, zero-width spaces, separators other than the
plain space) written as an escape, so a person deciding on a call sees what it holds.

Below every layer: the CLI (`jianmu._cli.common`) and the studio show run text by these rules.
"""

from __future__ import annotations

import json

__all__ = ("json_visible", "visible")

_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str, keep: str = "") -> str:
    """``text`` with each non-printable character, but those in ``keep``, written as an
    escape (``\\u001b``, ``\\u202e``, ``\\n``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else _escape(c) for c in text)


def json_visible(text: str) -> str:
    """JSON text with each non-printable character but its line breaks written as its JSON
    escape: the same value when read back, shown as it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else json.dumps(c)[1:-1] for c in text)
