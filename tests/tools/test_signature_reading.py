"""A plain function's parameters, read from its code object, are `inspect.signature`'s."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pytest

from jianmu.tools.schema import _signature


def _plain(a, b: int, /, c: str = "x", *args: int, d: float, e=None, **kw: Any) -> str: ...  # type: ignore[no-untyped-def]


def _defaults_only(a: int = 1, b: str = "2") -> None: ...


def _kw_only(*, q: str, n: int = 3) -> int: ...  # type: ignore[empty-body]


def _positional_only(x: int, y: int = 0, /) -> None: ...


def _star_kwargs(**kw: Any) -> None: ...


async def _coroutine(a: list[str], b: dict[str, int] | None = None) -> None: ...


def _wrapped(a: int) -> int:
    return a


@functools.wraps(_wrapped)
def _wrapper(*args: Any, **kwargs: Any) -> Any:
    return _wrapped(*args, **kwargs)


def _with_signature(x: int) -> None: ...


_with_signature.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter("y", inspect.Parameter.KEYWORD_ONLY, annotation=str)]
)


class _Holder:
    def method(self, a: int, b: str = "") -> None: ...


@pytest.mark.parametrize("fn", [
    _plain, _defaults_only, _kw_only, _positional_only, _star_kwargs, _coroutine, _wrapper,
    _with_signature, _Holder().method, _Holder.method, lambda a, b=2, *c, d, **e: None,
    functools.partial(_defaults_only, b="3"),
])
def test_read_as_inspect_reads_it(fn: Any) -> None:
    expected = inspect.signature(fn)
    got = _signature(fn)
    assert [(p.name, p.kind, p.default, p.annotation) for p in got.parameters.values()] == [
        (p.name, p.kind, p.default, p.annotation) for p in expected.parameters.values()
    ]
    assert got.return_annotation == expected.return_annotation
