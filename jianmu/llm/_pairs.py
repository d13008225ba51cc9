"""`PairedText`: a stream's text pieces, with a character that their JSON split in two (a
UTF-16 surrogate pair, ``"\\ud83d"`` in one piece and ``"\\ude00"`` in the next) joined again.

JSON writes a character outside the BMP (an emoji) as two escapes; a server that cuts UTF-16
text into pieces (JavaScript strings) may send one half in each. Each piece then decodes to a
lone surrogate, which UTF-8 cannot encode: the answer failed to print, to be written, to be
sent back. Only each piece's first and last character are looked at: a pair inside one piece
is decoded whole by the JSON parser.
"""

from __future__ import annotations

import re

__all__ = ("PairedText", "paired")

_REPLACEMENT = "\ufffd"  # what a UTF-8 decoder gives for a broken character
_SURROGATE = re.compile("[\ud800-\udfff]")


def _high(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _low(char: str) -> bool:
    return "\udc00" <= char <= "\udfff"


class PairedText:
    """Text pieces as they come, a high surrogate that ends one held back until the next
    piece gives its low half (then the one character), else the replacement character."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def piece(self, text: str) -> str:
        """The text to give now of the next ``text`` (``""`` when it held only a half)."""
        held = self._held
        if held:
            self._held = ""
            if text and _low(text[0]):
                code = 0x10000 + ((ord(held) - 0xD800) << 10) + (ord(text[0]) - 0xDC00)
                text = chr(code) + text[1:]
            else:
                text = _REPLACEMENT + text
        elif text and _low(text[0]):  # a low half that no high half came before
            text = _REPLACEMENT + text[1:]
        if text and _high(text[-1]):
            self._held = text[-1]
            text = text[:-1]
        return text

    def rest(self) -> str:
        """What is still held at the stream's end: a half alone, given as the replacement
        character (``""`` when nothing is)."""
        held, self._held = self._held, ""
        return _REPLACEMENT if held else ""


def paired(text: str) -> str:
    """``text`` joined from pieces (a streamed tool call's arguments, its reasoning) with each
    split pair made its character and each half alone the replacement character; as it is
    when it holds no surrogate (almost always: one look, no copy)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
