"""The quick reading of Google docstrings gives what docstring-parser's `GoogleParser` gives."""

from __future__ import annotations

import random

import pytest

from jianmu.tools import _docstrings as schema
from jianmu.tools._docstrings import ParsedDocstring, parse_docstring

_SUMMARIES = ["Add two numbers.", "", "Find the user", "  Leading space.", "a: colon in it"]
_LONGS = ["", "More text here.", "Line one.\nLine two.", "Notes:\n    kept out", "x\n\n\ny",
          "Keyword Args:\n    k: hidden", "    indented long"]
_TITLES = ["Args:", "Arguments:", "Parameters:", "Params:", "Args:  ", "Returns:", "Raises:",
           "Examples:", "Args", "Yields:", "Attributes:"]
_NAMES = ["x", "count", "*args", "**kwargs", "a_b", "n (int)", "q (str, optional)", "", " y",
          "z ", "two words"]
_DESCS = ["the value.", "list[str]: the names.", "a [x]: odd", "no colon at all", "",
          "  spaced", "many: colons: here", "Defaults to 3.", "x\n    more",
          "first\n        deeper\n    back", "end\n\n    after blank"]
_INDENTS = ["    ", "  ", "\t", "        "]


def _entry(rng: random.Random, indent: str) -> str:
    name, desc = rng.choice(_NAMES), rng.choice(_DESCS)
    desc = desc.replace("\n    ", "\n" + indent + indent[:2])
    if rng.random() < 0.05:
        return f"{indent}{name} no colon"
    return f"{indent}{name}: {desc}" if rng.random() < 0.9 else f"{indent}{name}:{desc}"


def _docstring(rng: random.Random) -> str:
    parts = [rng.choice(_SUMMARIES)]
    if rng.random() < 0.5:
        parts.append(("\n" if rng.random() < 0.7 else "") + rng.choice(_LONGS))
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        indent = rng.choice(_INDENTS)
        parts.append(("\n" if rng.random() < 0.8 else "") + rng.choice(_TITLES))
        parts += [_entry(rng, indent) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.1:
            parts.append("Trailing unindented text.")
    text = "\n".join(parts)
    if rng.random() < 0.5:  # as written in a function body
        text = text.replace("\n", "\n    ") + "\n    "
    return text


def _by_the_parser(doc: str) -> ParsedDocstring:
    if not doc.strip():
        return ParsedDocstring()
    return schema._parsed(doc, "GOOGLE")


def test_random_google_docstrings_read_as_the_parser_reads_them() -> None:
    rng = random.Random(33)
    quick = 0
    for _ in range(3000):
        doc = _docstring(rng)
        expected = _by_the_parser(doc)
        assert parse_docstring(doc, "google") == expected, doc
        quick += schema._google_params(doc) is not None if doc.strip() else 0
        if schema._guess_style(doc) == "GOOGLE":
            assert parse_docstring(doc) == expected, doc
    assert quick > 600  # the quick path was taken, and so was the parser's


@pytest.mark.parametrize("doc", [
    "Summary.\n\nArgs:\n    a: first.\n    b: second,\n        continued.\n",
    "Summary.\n\nArgs:\n    a: one.\n\nArgs:\n    a: two.\n",
    "Summary.\nArgs:\n    a (int): typed.\n",
    "Summary.\n\nArgs:\n    a: one.\nReturns:\n    the sum.\n",
    "Summary.\n\nArgs:\n\n    a: after a blank line.\n",
    "Summary.\n\nArgs:\n  a: two spaces.\n    b: deeper, part of a.\n",
    "Summary.\n\nArgs:\n    a: one.\n\nReturns:\n    The records as text.\n",
    "Summary.\n\nReturns:\n    str: the name,\n        on two lines.\n",
    "Summary.\n\nReturns:\n",
    "Summary.\n\nReturns:\n    one.\nReturns:\n    two.\n",
    "Summary.\n\nYields:\n    one.\n",
])
def test_chosen_docstrings_read_as_the_parser_reads_them(doc: str) -> None:
    assert parse_docstring(doc, "google") == _by_the_parser(doc)


@pytest.mark.parametrize("doc", [
    "One line.", "Summary.\n\nArgs:\n    a: one.", "  Leading.\nnext", "Trailing.\n  ",
    "Tab\there.\nnext", "Summary.\n    all indented\n    after", "\nStarts with a newline.",
    "Summary.\n\x0bvertical tab line\n    x", "Summary.\n \n  \nEnd", "Ends with newline.\n",
    "Summary.\n\n  Args:\n    a: one.",
])
def test_a_docstring_is_cleaned_as_cleandoc_cleans_it(doc: str) -> None:
    import inspect

    assert schema._cleaned(doc) == inspect.cleandoc(doc)
