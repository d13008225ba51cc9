"""Model-supplied regular expressions, matched without freezing the process.

Python's ``re`` holds the GIL while it backtracks and has no timeout, so a pattern such as
``(a|aa)+$`` over a crafted line stops every thread and the event loop. The ``regex``
package (with ``VERSION0``: Python ``re`` syntax) releases the GIL while matching and takes a
``timeout``; every match here gets the time left before the search's deadline, which the
search tools set with `search_deadline`. ``regex`` expands counted repeats when it compiles
(``a{3000000}`` costs ~800 MB), so the pattern's expanded size is checked first.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from jianmu.errors import PatternTimeout, SearchOutOfTime, ToolInputError

if TYPE_CHECKING:
    import regex

__all__ = (
    "MAX_PATTERN_WEIGHT",
    "PatternTimeout",
    "SearchOutOfTime",
    "compile_pattern",
    "search_deadline",
    "timed_match",
    "timed_search",
)

MAX_PATTERN_WEIGHT = 50_000
"""Largest expanded size of a pattern (counted repeats multiplied out), in pattern nodes."""

_DEADLINE: ContextVar[float | None] = ContextVar("jianmu_search_deadline", default=None)
_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})


@contextlib.contextmanager
def search_deadline(seconds: float) -> Iterator[None]:
    """Give every `timed_match`/`timed_search` in this block ``seconds`` in all."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _remaining() -> float | None:
    deadline = _DEADLINE.get()
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise SearchOutOfTime("the search ran out of time")
    return left


def timed_match(rx: regex.Pattern[str], text: str) -> bool:
    """``rx.match(text)`` within the deadline; raises `PatternTimeout` past it."""
    try:
        return rx.match(text, timeout=_remaining()) is not None
    except TimeoutError as exc:
        raise PatternTimeout(str(exc)) from None


def timed_search(rx: regex.Pattern[str], text: str) -> bool:
    """``rx.search(text)`` within the deadline; raises `PatternTimeout` past it."""
    try:
        return rx.search(text, timeout=_remaining()) is not None
    except TimeoutError as exc:
        raise PatternTimeout(str(exc)) from None


def _weight(parsed: Any) -> int:
    """Expanded size of a parsed ``re`` pattern: counted repeats multiply their body."""
    total = 0
    for op, av in parsed:
        if str(op) in _REPEATS:
            low, high, body = av
            count = low if high == _MAXREPEAT else high
            total += max(1, count) * _weight(body)
        else:
            total += 1 + sum(_weight(sub) for sub in _subpatterns(av))
        if total > MAX_PATTERN_WEIGHT:
            return total  # stop early: the product may be astronomically large
    return total


def _subpatterns(value: Any) -> Iterator[Any]:
    if isinstance(value, _SubPattern):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _subpatterns(item)


_parser: Any = importlib.import_module("re._parser")  # Python's own parser (3.11+)
_SubPattern: type = _parser.SubPattern
_MAXREPEAT: int = _parser.MAXREPEAT


def compile_pattern(pattern: str, flags: int = 0, *, what: str = "regular expression") -> Any:
    """Compile a model-supplied ``pattern`` (Python ``re`` syntax) with ``regex``.

    Raises:
        ToolInputError: the pattern is invalid or expands too much when compiled.
    """
    try:
        parsed = _parser.parse(pattern, flags)
    except Exception as exc:  # re.error, RecursionError, OverflowError on absurd input
        msg = getattr(exc, "msg", str(exc))
        pos = getattr(exc, "pos", None)
        where = f" at position {pos}" if pos is not None else ""
        raise ToolInputError(
            f"invalid {what} {pattern!r}: {msg}{where}; escape special characters such "
            "as ( [ . * with a backslash"
        ) from None
    weight = _weight(parsed)
    if weight > MAX_PATTERN_WEIGHT:
        raise ToolInputError(
            f"the {what} {pattern!r} is too large once its counted repeats ({{n}}, {{m,n}}) "
            f"are multiplied out (over {MAX_PATTERN_WEIGHT:,}); use smaller counts, or + and *"
        )
    import regex  # here, not at the top: `import jianmu` does not need it

    try:
        return regex.compile(pattern, flags | regex.VERSION0)
    except regex.error as exc:
        raise ToolInputError(f"invalid {what} {pattern!r}: {exc}") from None
