"""`calculator`: evaluates math expressions with our own closed AST evaluator."""

from __future__ import annotations

from jianmu.tools.base import tool
from jianmu.tools.builtin._common import copies
from jianmu.tools.builtin._mathexpr import evaluate, format_number

__all__ = ("CalculatorTool", "calculator")


@tool(
    category="read",
    timeout_seconds=5.0,
    max_result_length=5_000,
    examples=("calculator(expression='2 ** 10') -> '1024'",),
)
def calculator(expression: str) -> str:
    """Evaluate a math expression and return its value.

    Use it for any arithmetic instead of computing in your head. The expression may use
    numbers, + - * / // % **, parentheses, comparisons (== != < <= > >=), the constants pi,
    e, tau, inf, nan and functions of Python's math module (sqrt, log, log10, exp, sin, cos,
    tan, floor, ceil, factorial, comb, gcd, hypot, ...) plus abs, round, min, max. For
    example 'sqrt(2) * (3 + 4) ** 2' or 'log(1024, 2)'. Integers are exact; very large
    results (over about 3,000 digits) and expressions over 1000 characters are refused.
    Returns the value as text (True/False for comparisons).

    Args:
        expression: The math expression, e.g. '2 * (3 + 4)' or 'sqrt(16) + pi'.

    Returns:
        The value of the expression.
    """
    return format_number(evaluate(expression))


CalculatorTool = copies(calculator, "CalculatorTool")
