"""The words of a shell command as bash would see them, for the guard's shell reader.

A word's value is known when it is literal (quotes and escapes removed); a word whose value only
the run knows (an expansion, a substitution, an unquoted glob, ``~``) is kept as written and
marked not literal, so that no rule mistakes it for what it may become.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ("NUMBER_RE", "REDIRECT_TYPES", "Word", "has_unquoted_glob", "node_text", "word_value")

NUMBER_RE = re.compile(r"^-?[0-9]+$")
REDIRECT_TYPES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_UNQUOTED_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DQUOTE_ESCAPE = re.compile(r"\\([$`\"\\\n])")


@dataclass(frozen=True)
class Word:
    """One word of a command: its value, or its source text when only the run knows it."""

    text: str
    literal: bool


def node_text(node: Any) -> str:
    """The source text of a tree-sitter node."""
    return bytes(node.text or b"").decode("utf-8", "replace")


def word_value(node: Any) -> Word:
    """The value of one word node, or its source text when only the run knows it."""
    kind, text = node.type, node_text(node)
    if kind == "word":
        if has_unquoted_glob(text) or text.startswith("~"):
            return Word(text, False)
        return Word(_UNQUOTED_ESCAPE.sub(r"\1", text.replace("\\\n", "")), True)
    if kind == "number":
        return Word(text, True)
    if kind == "raw_string" or (kind == "ansi_c_string" and "\\" not in text):
        return Word(text[text.index("'") + 1 : -1], True)
    if kind == "string":
        parts: list[str] = []
        for child in node.children:
            if child.type == "string_content":
                parts.append(_DQUOTE_ESCAPE.sub(r"\1", node_text(child).replace("\\\n", "")))
            elif child.type != '"':
                return Word(text, False)
        return Word("".join(parts), True)
    if kind == "concatenation":
        words = [word_value(c) for c in node.children]
        unquoted = "".join(node_text(c) if c.type == "word" else "\x00" for c in node.children)
        if has_unquoted_glob(unquoted):  # `rm{,}` is `rm rm`: brace expansion across parts
            return Word(text, False)
        if all(w.literal for w in words):
            return Word("".join(w.text for w in words), True)
        return Word(text, False)
    return Word(text, False)  # expansions, substitutions, $'..', brace expansion...


def has_unquoted_glob(text: str) -> bool:
    escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "*?[" or (ch == "{" and ("," in text or ".." in text)):
            return True
    return False
