"""Text from a run, shown as it is: every character a terminal or a page would obey or hide
(ANSI escapes and other controls, bidi overrides, zero-width spaces, separators other than the
plain space) written as an escape, so a person deciding on a call sees what it holds.

Below every layer: the CLI (`jianmu._cli.common`) and the studio show run text by these rules.
"""

from __future__ import annotations

import json

__all__ = ("json_visible", "visible")

_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# The zero-width joiners a script needs, kept where it needs them (IDNA's CONTEXTJ rules, and
# emoji sequences): after a virama (Indic conjuncts), the non-joiner between two letters of a
# joining script (Persian's "می‌خواهم"), the joiner between two pictographs (👩‍💻). Anywhere
# else ("pay\u200dpal", "write\u200d_file") it hides, and is written as an escape. The
# studio's page applies the same rule (``static/panels.js``).
_ZWNJ, _ZWJ = "\u200c", "\u200d"
_VIRAMAS = frozenset((  # the characters of combining class 9 in the Basic Multilingual Plane
    0x094D, 0x09CD, 0x0A4D, 0x0ACD, 0x0B4D, 0x0BCD, 0x0C4D, 0x0CCD, 0x0D3B, 0x0D3C, 0x0D4D,
    0x0DCA, 0x0E3A, 0x0EBA, 0x0F84, 0x1039, 0x103A, 0x1714, 0x1715, 0x1734, 0x17D2, 0x1A60,
    0x1B44, 0x1BAA, 0x1BAB, 0x1BF2, 0x1BF3, 0x2D7F, 0xA806, 0xA82C, 0xA8C4, 0xA953, 0xA9C0,
    0xAAF6, 0xABED))


def _pictograph(code: int) -> bool:
    return 0x2600 <= code <= 0x27BF or 0x2B00 <= code <= 0x2BFF or 0x1F000 <= code <= 0x1FAFF


def _joining(code: int) -> bool:  # Arabic, Syriac, N'Ko, Mandaic and their presentation forms
    return (0x0600 <= code <= 0x08FF and not 0x07B2 <= code <= 0x07BF) or \
        0xFB50 <= code <= 0xFDFF or 0xFE70 <= code <= 0xFEFF


def _needed(text: str, i: int) -> bool:
    """Whether the joiner at ``text[i]`` is one its script needs there (see `_VIRAMAS`)."""
    before = ord(text[i - 1]) if i else -1
    after = ord(text[i + 1]) if i + 1 < len(text) else -1
    if before in _VIRAMAS:
        return True
    if text[i] == _ZWJ:
        if before == 0xFE0F:  # an emoji's presentation selector: the pictograph is before it
            before = ord(text[i - 2]) if i > 1 else -1
        return _pictograph(before) and _pictograph(after)
    return _joining(before) and _joining(after)


def _shown(text: str, i: int, char: str, keep: str) -> bool:
    return char.isprintable() or char in keep or (char in (_ZWNJ, _ZWJ) and _needed(text, i))


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
    return "".join(c if _shown(text, i, c, keep) else _escape(c) for i, c in enumerate(text))


def json_visible(text: str) -> str:
    """JSON text with each non-printable character but its line breaks written as its JSON
    escape: the same value when read back, shown as it is."""
    if text.isprintable():
        return text
    return "".join(c if _shown(text, i, c, "\n") else json.dumps(c)[1:-1]
                   for i, c in enumerate(text))
