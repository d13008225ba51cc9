"""Tests for jianmu/tools/builtin/calculator.py and its evaluator."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from jianmu.errors import ToolInputError
from jianmu.tools.builtin import CalculatorTool
from jianmu.tools.builtin.calculator import (
    MAX_DEPTH,
    MAX_EXPRESSION_LENGTH,
    MAX_INT_BITS,
    MAX_ROUND_DIGITS,
    MathExpressionError,
    evaluate,
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("2 ** -2", 0.25),
        ("-(3)", -3),
        ("+3", 3),
        ("not 0", True),
        ("1 < 2 <= 2 != 3", True),
        ("3 > 4", False),
        ("1e3 + 0.5", 1000.5),
        ("sqrt(16) + pi", 4 + math.pi),
        ("log(1024, 2)", 10.0),
        ("factorial(20)", 2432902008176640000),
        ("comb(10, 3)", 120),
        ("comb(10**6, 10**6 - 1)", 10**6),
        ("gcd(12, 18) + lcm(4, 6)", 18),
        ("abs(-2.5) + round(2.567, 2) + max(1, 5, 3) + min(4, 2)", 2.5 + 2.57 + 5 + 2),
        ("floor(2.7) + ceil(2.1) + trunc(-1.5)", 4),
        ("hypot(3, 4)", 5.0),
        ("degrees(pi)", 180.0),
        ("tau / 2 == pi", True),
        ("isinf(inf)", True),
        ("2 ** 9999", 2**9999),
    ],
    ids=lambda v: str(v)[:40],
)
def test_evaluates(expression: str, expected: object) -> None:
    assert evaluate(expression) == expected


@pytest.mark.anyio
async def test_tool_returns_text() -> None:
    calc = CalculatorTool()
    assert await calc.execute({"expression": "2 * (3 + 4)"}) == "14"
    assert await calc.execute({"expression": "1 / 4"}) == "0.25"
    assert await calc.execute({"expression": "2 > 1"}) == "True"
    assert calc.parallel_safe and calc.category == "read" and calc.effect_tags == ()
    # the docstring states the length limit in words: it must say the one enforced
    assert f"over {MAX_EXPRESSION_LENGTH} characters" in calc.description


ESCAPES = [
    "__import__('os').system('touch {canary}')",
    "().__class__.__bases__[0].__subclasses__()",
    "[x for x in range(3)]",
    "{x for x in range(3)}",
    "{x: 1 for x in range(3)}",
    "(x for x in range(3))",
    "lambda: 1",
    "math.e.__class__",
    "pi.__class__",
    "sqrt.__globals__",
    "f'{1+1}'",
    "(y := 3)",
    "open('{canary}', 'w')",
    "eval('1+1')",
    "exec('x=1')",
    "globals()",
    "getattr(1, 'real')",
    "type(1)",
    "x",
    "__builtins__",
    "'abc' * 3",
    "b'x'",
    "None",
    "...",
    "[1, 2][0]",
    "(1, 2)",
    "{'a': 1}",
    "1 if 1 else 2",
    "1 and 2",
    "1 << 1000",
    "5 & 3",
    "~1",
    "sqrt(x=4)",
    "max(*[1, 2])",
    "sqrt(2)(3)",
    "pi()",
    "sqrt",
    "1; import os",
    "import os",
    "1j * 1j",
    "True + 1",
    "await sqrt(1)",
]


@pytest.mark.parametrize("expression", ESCAPES)
def test_escape_attempts_are_refused(expression: str, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    with pytest.raises(MathExpressionError) as info:
        evaluate(expression.replace("{canary}", str(canary)))
    assert str(info.value)
    assert not canary.exists()


def test_escape_errors_name_the_problem() -> None:
    with pytest.raises(MathExpressionError, match="attribute access"):
        evaluate("pi.real")
    with pytest.raises(MathExpressionError, match="function '__import__' is not allowed"):
        evaluate("__import__('os')")
    with pytest.raises(MathExpressionError, match="comprehensions"):
        evaluate("[x for x in range(3)]")
    with pytest.raises(MathExpressionError, match="unknown name 'x'"):
        evaluate("x + 1")
    with pytest.raises(MathExpressionError, match="only numbers are allowed"):
        evaluate("'a'")
    with pytest.raises(MathExpressionError, match="positional arguments only"):
        evaluate("log(x=1)")


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9",
        "2**3999999 * 2**3999999",
        "2**3999999",
        "10**10000",
        "(2**5000) * (2**5001)",
        "factorial(100000)",
        "comb(10**6, 500000)",
        "perm(10**6)",
        "lcm(2**5000 + 1, 2**5001 + 1, 3**3000)",
        "10**3000 + 10**3000 * 10**100",
    ],
)
def test_oversized_numbers_fail_fast(expression: str) -> None:
    with pytest.raises(MathExpressionError, match="over the limit"):
        evaluate(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "round(1, -20000000)",  # int.__round__ would build 10**20000000 first
        "round(1, -(2**9000))",
        "round(7, 10**9)",
        "round(1.5, -20000000)",
        f"round(1, -{MAX_ROUND_DIGITS + 1})",
    ],
)
def test_round_refuses_huge_ndigits(expression: str) -> None:
    with pytest.raises(MathExpressionError, match=r"ndigits .* beyond the limit") as info:
        evaluate(expression)
    assert f"{MAX_ROUND_DIGITS:,}" in str(info.value)


def test_round_within_the_cap_still_works() -> None:
    assert evaluate("round(123456, -2)") == 123500
    assert evaluate(f"round(10**3000 + 7, -{MAX_ROUND_DIGITS})") == 0
    assert evaluate(f"round(1, -{MAX_ROUND_DIGITS})") == 0
    assert evaluate("round(2.675, 2)") == round(2.675, 2)
    assert evaluate("round(2.5)") == 2


@pytest.mark.anyio
async def test_round_with_huge_ndigits_is_a_tool_error() -> None:
    with pytest.raises(ToolInputError, match="ndigits"):
        await CalculatorTool().execute({"expression": "round(1, -20000000)"})


def test_long_input_fails_before_parsing() -> None:
    text = "1+" * 50_000 + "1"
    assert len(text) == 100_001
    with pytest.raises(MathExpressionError, match="100,001 characters long") as info:
        evaluate(text)
    assert str(MAX_EXPRESSION_LENGTH) in str(info.value).replace(",", "")


def test_deep_nesting_is_refused() -> None:
    with pytest.raises(MathExpressionError, match=f"deeper than {MAX_DEPTH}"):
        evaluate("-" * (MAX_DEPTH + 5) + "1")
    with pytest.raises(MathExpressionError, match="invalid expression"):
        evaluate("(" * 300 + "1" + ")" * 300)


@pytest.mark.parametrize(
    ("expression", "match"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("1 +", "invalid expression"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("sqrt(-1)", "math domain error"),
        ("10**1000 / 3", "overflows a float"),
        ("2.0 ** 5000", "overflows a float"),
        ("(-8) ** (1/3)", "complex number"),
        ("log()", "log()"),
    ],
)
def test_bad_expressions_say_what_is_wrong(expression: str, match: str) -> None:
    with pytest.raises(MathExpressionError, match=match):
        evaluate(expression)


def test_big_but_allowed_integers_are_exact() -> None:
    assert evaluate(f"2 ** {MAX_INT_BITS - 1}") == 2 ** (MAX_INT_BITS - 1)
    assert evaluate("1 ** 10000000") == 1
    assert evaluate("(-1) ** 10000001") == -1


@pytest.mark.anyio
async def test_tool_errors_are_input_errors() -> None:
    with pytest.raises(ToolInputError, match="not allowed"):
        await CalculatorTool().execute({"expression": "__import__('os')"})
    with pytest.raises(ToolInputError):
        await CalculatorTool().execute({})
