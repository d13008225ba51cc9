"""Reading a function's docstring: its description, and each parameter's and the result's.

docstring-parser reads the Google, NumPy and reST styles; the style is guessed from the section
markers when not given (parsing one style is ~4x faster than trying all). The common tool
docstring (a summary, Google ``Args:`` of untyped names, one ``Returns:``) is read here exactly
as docstring-parser's `GoogleParser` reads it, without its objects: a tool is often built per
request from a new function (tests/tools/test_docstring_google.py compares both readings).
"""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = ("ParsedDocstring", "docstring_of", "parse_docstring")

# -- docstrings: descriptions of the tool and its parameters ------------------------------

# Each style's `docstring_parser.DocstringStyle` member; docstring-parser loads with the
# first docstring parsed, so a tool made from a schema never imports it.
_STYLES = {"auto": "AUTO", "google": "GOOGLE", "numpy": "NUMPYDOC", "sphinx": "REST",
           "rest": "REST"}

# Section headers that docstring-parser leaves in the long description for some styles
# (Google "Notes:", or a NumPy section it does not know); the description ends there.
_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns?|Yields?|Raises|Exceptions?|Notes?|Warnings?|Warns|See Also|References|"
    r"Examples?|Todo|Attributes|Methods)\s*:?\s*$"
)
_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_REST_FIELD = re.compile(r"^\s*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|"
                         r"raises?|except|exception|yields?|ytype|var|ivar|cvar)\b")


_GOOGLE_HEAD = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns|Raises|"
    r"Yields)\s*:\s*$", re.M
)
_NUMPY_HEAD = re.compile(
    r"^\s*(Parameters|Returns|Raises|Yields|Other Parameters)\s*\n\s*-{3,}\s*$", re.M
)
_REST_HEAD = re.compile(r"^\s*:(param|parameter|arg|argument|returns?|raises?)\b", re.M)


def _guess_style(doc: str) -> str:
    """Pick the style from its section markers; parsing one style is ~4x faster than AUTO."""
    # each marker's regular expression runs only where its plain text is (a NumPy header's
    # dashes, a reST field's ":param", ":arg", ":return" or ":raise")
    found = [
        style for style, pattern, present in (
            ("NUMPYDOC", _NUMPY_HEAD, "---" in doc),
            ("REST", _REST_HEAD, ":param" in doc or ":arg" in doc or ":return" in doc
             or ":raise" in doc),
            ("GOOGLE", _GOOGLE_HEAD, True),
        ) if present and pattern.search(doc)
    ]
    return found[0] if len(found) == 1 else "AUTO"


# docstring-parser's Google sections (`GoogleParser`'s defaults, and the parameter lists
# Google's style guide and napoleon name besides, `_GOOGLE_MORE_PARAMS`)
_GOOGLE_TITLE = re.compile(
    r"^(Arguments|Args|Parameters|Params|Keyword Args|Keyword Arguments|Kwargs|"
    r"Other Parameters|Raises|Exceptions|Except|Attributes|Example|Examples|"
    r"Returns|Yields):[ \t\r\f\v]*$", re.M
)
_GOOGLE_MORE_PARAMS = ("Keyword Args", "Keyword Arguments", "Kwargs", "Other Parameters")
_GOOGLE_PARAMS = frozenset({"Arguments", "Args", "Parameters", "Params", *_GOOGLE_MORE_PARAMS})
_ROLE = re.compile(r":(?:[\w-]+:)?[\w-]+:`[~!]?([^`]*)`")
"""A Sphinx role (``:obj:`int```, ``:class:`~a.B```): its text is what it says, and the
colons inside it broke a Google entry (``y (:obj:`int`, optional): ...`` lost its text)."""
_NOT_INDENTED = re.compile(r"\n\S")
_GOOGLE_NAMED_RETURN = re.compile(r"(\s*[^:\s]+:)|([^:]*\]:.*)")
"""docstring-parser's ``MULTIPLE_PATTERN``: a Returns section that starts ``name:``."""


def _cleaned(doc: str) -> str:
    """``inspect.cleandoc(doc)``, skipped where it would give ``doc`` back (a docstring from
    `inspect.getdoc` is cleaned already): no tab, no space at either end, and a line after the
    first that starts unindented, so the common indentation is none."""
    if (doc and "\t" not in doc and not doc[0].isspace() and not doc[-1].isspace()
            and ("\n" not in doc or _NOT_INDENTED.search(doc))):
        return doc
    return inspect.cleandoc(doc)


def _google_params(doc: str) -> ParsedDocstring | None:
    """What `GoogleParser` reads in ``doc`` when its only sections are parameter lists of
    untyped names (``name: what it is``, continued on more indented lines) and one Returns:
    the common tool docstring, read without building docstring-parser's objects; ``None`` for
    anything else, which the parser reads."""
    text = _cleaned(doc)
    titles = list(_GOOGLE_TITLE.finditer(text))
    head = text[: titles[0].start()] if titles else text
    short, _, rest = head.partition("\n")
    description = short
    long = rest.strip()
    if long:
        sep = "\n\n" if rest.startswith("\n") else "\n"
        description = f"{short}{sep}{long}" if short else long
    params: dict[str, str] = {}
    returns = ""
    seen: set[str] = set()
    for j, title in enumerate(titles):
        name = title.group(1)
        if name in seen or (name not in _GOOGLE_PARAMS and name != "Returns"):
            return None
        seen.add(name)
        details = text[title.end(): titles[j + 1].start() if j + 1 < len(titles) else len(text)]
        unindented = _NOT_INDENTED.search(details)
        if unindented is not None:  # the section ends at a line that is not indented
            details = details[: unindented.start()]
        chunk = details.strip("\n")
        if name == "Returns":
            returns = _google_returns(inspect.cleandoc(chunk))
            continue
        indent = chunk[: len(chunk) - len(chunk.lstrip())]
        if not indent or len(indent) == len(chunk) or indent.strip(" "):
            return None
        width = len(indent)
        entries: list[list[str]] = []
        for line in chunk.split("\n"):
            if line.startswith(indent) and len(line) > width and not line[width].isspace():
                entries.append([line[width:]])
            else:  # chunk's first line always starts an entry
                entries[-1].append(line)
        for lines in entries:
            entry = "\n".join(lines).strip("\n")
            before, colon, desc = entry.partition(":")
            if not colon or "\n" in before or "(" in before:
                return None  # no colon, or a typed name: the parser decides
            if desc:
                desc = desc[1:] if desc[0] == " " else desc
                if "\n" in desc:
                    first, more = desc.split("\n", 1)
                    desc = first + "\n" + inspect.cleandoc(more)
            if before:
                params[before.lstrip("*")] = desc.strip()
    return ParsedDocstring(
        description=_clean_description(description), params=_each_name(params), returns=returns
    )


def _each_name(params: dict[str, str]) -> dict[str, str]:
    """``params`` with an entry for several names (NumPy's ``x, y : int``) given to each."""
    if not any("," in name for name in params):
        return params
    out: dict[str, str] = {}
    for names, desc in params.items():
        for name in names.split(","):
            if name.strip():
                out[name.strip().lstrip("*")] = desc
    return out


def _google_returns(part: str) -> str:
    """The description `GoogleParser` reads in a Returns section (cleaned): all of it, or
    what follows ``name:``."""
    if _GOOGLE_NAMED_RETURN.match(part):
        desc = part.split(":", 1)[1]
        if desc:
            desc = desc[1:] if desc[0] == " " else desc
            if "\n" in desc:
                first, more = desc.split("\n", 1)
                desc = first + "\n" + inspect.cleandoc(more)
        part = desc
    return part.strip()


@dataclass(frozen=True)
class ParsedDocstring:
    """What a tool needs from a docstring."""

    description: str = ""
    """Summary plus free text, without any section."""
    params: dict[str, str] = field(default_factory=dict)
    """Parameter name -> description."""
    returns: str = ""
    """The description of the return value."""


def _clean_description(text: str) -> str:
    lines = text.splitlines()
    if ":" not in text and "---" not in text:  # no line can be a section or a field
        return "\n".join(lines).strip()
    kept: list[str] = []
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if (_SECTION.match(line) and (line.rstrip().endswith(":") or _UNDERLINE.match(nxt))) or \
                _REST_FIELD.match(line):
            break
        kept.append(line)
    return "\n".join(kept).strip()


@lru_cache(maxsize=2048)
@functools.cache
def _parser(style: str) -> Any:
    """One parser per style where docstring-parser has a class for it: its module function
    builds a parser (its sections and their regular expression) on every docstring, and a
    parser keeps nothing of what it parsed."""
    if style == "GOOGLE":
        from docstring_parser.google import DEFAULT_SECTIONS, GoogleParser, Section, SectionType

        return GoogleParser([*DEFAULT_SECTIONS, *(
            Section(title, "param", SectionType.MULTIPLE) for title in _GOOGLE_MORE_PARAMS)])
    if style == "NUMPYDOC":
        from docstring_parser.numpydoc import NumpydocParser

        return NumpydocParser()
    return None


def docstring_of(fn: Any, obj: Any = None) -> str | None:
    """What describes ``fn``: its docstring, or one it inherits from a class of the author's,
    never a builtin slot's (a ``__call__`` without one inherited "Call self as a function."
    from ``type``); with ``obj``, the callable object whose ``__call__`` ``fn`` is, its class's
    docstring when ``fn`` has none (as LangChain and the Agents SDK read ``obj.__doc__``)."""
    found = inspect.getdoc(fn)
    if found is not None and getattr(fn, "__doc__", None) is None:
        builtin = getattr(object, getattr(fn, "__name__", ""), None)
        if builtin is not None and found == inspect.getdoc(builtin):
            found = None
    if found is None and obj is not None:
        own = type(obj).__doc__
        found = inspect.cleandoc(own) if isinstance(own, str) else None
    return found


def parse_docstring(doc: str | None, style: str = "auto") -> ParsedDocstring:
    """Parse ``doc`` in ``style`` (auto, google, numpy, sphinx).

    Raises:
        ValueError: ``style`` is not one of the known styles.
    """
    if style not in _STYLES:
        raise ValueError(
            f"docstring_format {style!r} is not known; use one of {', '.join(_STYLES)}"
        )
    if not doc or not doc.strip():
        return ParsedDocstring()
    if ":`" in doc:
        doc = _ROLE.sub(r"\1", doc)
    if _GOOGLE_TITLE.match(doc):
        # no summary: a cleaned docstring's first line is its "Args:", and cleaning it again
        # (both readers do) took its entries' indentation, and every description with it
        doc = "\n" + doc
    chosen = _STYLES[style]
    if chosen == "AUTO":
        chosen = _guess_style(doc)
    if chosen == "GOOGLE":
        quick = _google_params(doc)
        if quick is not None:
            return quick
    return _parsed(doc, chosen)


def _parsed(doc: str, chosen: str) -> ParsedDocstring:
    """``doc`` read by docstring-parser in style ``chosen`` (a `DocstringStyle` name)."""
    import docstring_parser

    try:
        parser = _parser(chosen)
        parsed = parser.parse(doc) if parser is not None else docstring_parser.parse(
            doc, style=docstring_parser.DocstringStyle[chosen])
    except docstring_parser.ParseError:
        return ParsedDocstring(description=_clean_description(doc))
    text = parsed.short_description or ""
    if parsed.long_description:
        sep = "\n\n" if parsed.blank_after_short_description else "\n"
        text = f"{text}{sep}{parsed.long_description}" if text else parsed.long_description
    params = {
        p.arg_name.lstrip("*"): (p.description or "").strip()
        for p in parsed.params
        if p.arg_name and p.args and p.args[0] in ("param", "parameter", "arg", "argument",
                                                    "key", "keyword", "attribute",
                                                    "other_param")
    }
    returns = (parsed.returns.description or "").strip() if parsed.returns else ""
    return ParsedDocstring(description=_clean_description(text), params=_each_name(params),
                           returns=returns)
