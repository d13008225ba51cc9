"""`calculator`: evaluates math expressions with a small, closed evaluator (an allow-list over
Python's AST).

Only numbers, arithmetic and comparison operators, and an allow-list of functions and
constants from `math` are accepted; any other node (names, attributes, subscripts, lambdas,
comprehensions, calls of anything else, strings, f-strings, ``:=``) is refused before anything
runs. Sizes are checked before each costly operation: the length of the text, the nesting
depth, and the bit length of every integer result, estimated before ``**``, ``*``,
``factorial`` and friends compute it, so ``9**9**9`` fails at once instead of hanging.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from jianmu.errors import MathExpressionError
from jianmu.tools.base import tool
from jianmu.tools.builtin.files import copies

__all__ = (
    "MAX_DEPTH",
    "MAX_EXPRESSION_LENGTH",
    "MAX_INT_BITS",
    "MAX_ROUND_DIGITS",
    "CalculatorTool",
    "calculator",
    "evaluate",
    "format_number",
)


MAX_EXPRESSION_LENGTH = 1000
"""Longest expression text accepted, in characters."""
MAX_INT_BITS = 10_000
"""Largest integer result, in bits (about 3,000 decimal digits)."""
MAX_DEPTH = 60
"""Deepest nesting of operators and calls."""
MAX_ROUND_DIGITS = 4000
"""Largest ``|ndigits|`` for ``round``: past every allowed integer's length (about 3,011
digits), and ``round(1, -n)`` builds ``10**n`` internally, so a huge ``n`` would hang."""

Number = int | float | bool


def _bits(value: Number) -> int:
    return abs(int(value)).bit_length() if isinstance(value, int) else 0


def _check_bits(estimate: int, what: str) -> None:
    if estimate > MAX_INT_BITS:
        raise MathExpressionError(
            f"{what} would have about {estimate:,} bits, over the limit of {MAX_INT_BITS:,} "
            "bits; use smaller numbers or float arithmetic (e.g. 2.0**x)"
        )


def _pow(base: Number, exp: Number) -> Number:
    if isinstance(base, int) and isinstance(exp, int) and exp > 0 and abs(base) > 1:
        estimate = int(exp * math.log2(abs(base))) + 1
        _check_bits(estimate, f"{base if _bits(base) < 64 else '<large int>'}**{exp}")
    try:
        return base**exp  # type: ignore[no-any-return]
    except OverflowError as exc:
        raise MathExpressionError(f"the power overflows a float: {exc}") from None


def _mul(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int):
        _check_bits(_bits(a) + _bits(b), "the product")
    return a * b


def _factorial(n: Any) -> int:
    if isinstance(n, int) and n > 1:
        _check_bits(int(n * math.log2(n)), f"factorial({n})")
    return math.factorial(n)


def _round(x: Any, ndigits: Any = None) -> Any:
    # int.__round__ with a negative ndigits computes 10**-ndigits before any size check
    # could see it: bound ndigits first (floats clamp it themselves, ints do not).
    if isinstance(ndigits, int) and abs(ndigits) > MAX_ROUND_DIGITS:
        shown = ndigits if _bits(ndigits) < 64 else "<large int>"
        raise MathExpressionError(
            f"round(x, ndigits): ndigits {shown} is beyond the limit of +/-{MAX_ROUND_DIGITS:,}; "
            f"use an ndigits between -{MAX_ROUND_DIGITS:,} and {MAX_ROUND_DIGITS:,}"
        )
    return round(x) if ndigits is None else round(x, ndigits)


def _comb_perm(fn: Callable[..., int], name: str) -> Callable[..., int]:
    def checked(n: Any, k: Any = None) -> int:
        if isinstance(n, int) and n > 1:
            kk = n if k is None else min(abs(int(k)), n)
            if name == "comb":
                kk = min(kk, n - kk)  # comb(n, k) == comb(n, n - k)
            _check_bits(int(kk * math.log2(n)) + 1, f"{name}({n}, {kk})")
        return fn(n) if k is None else fn(n, k)

    return checked


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: _mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
    ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_CONSTANTS: dict[str, float] = {
    "pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan,
}
_MATH_FUNCTIONS = (
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign",
    "cos", "cosh", "degrees", "dist", "erf", "erfc", "exp", "exp2", "expm1", "fabs", "floor",
    "fmod", "gamma", "gcd", "hypot", "isclose", "isfinite", "isinf", "isnan", "isqrt", "lcm",
    "ldexp", "lgamma", "log", "log10", "log1p", "log2", "radians", "remainder", "sin", "sinh",
    "sqrt", "tan", "tanh", "trunc",
)
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: getattr(math, name) for name in _MATH_FUNCTIONS if hasattr(math, name)
}
_FUNCTIONS.update(
    {
        "abs": abs,
        "round": _round,
        "min": min,
        "max": max,
        "pow": math.pow,  # the float pow: overflows with an error instead of growing forever
        "factorial": _factorial,
        "comb": _comb_perm(math.comb, "comb"),
        "perm": _comb_perm(math.perm, "perm"),
    }
)
# Every function whose cost grows with an argument's value (not just its size) is wrapped
# or clamped: factorial/comb/perm (result bits estimated), round (ndigits capped), ldexp
# (exponent clamped: the float overflows anyway), lcm (result bits checked below). The rest
# are float functions, or integer ones (gcd, isqrt, trunc, floor, ceil) whose cost follows
# the size of arguments the bit limit already bounds.
_MAX_ARGS = 100


def _describe(node: ast.AST) -> str:
    kinds = {
        ast.Attribute: "attribute access ('.')",
        ast.Subscript: "subscripts ('[...]')",
        ast.Lambda: "lambdas",
        ast.ListComp: "comprehensions",
        ast.SetComp: "comprehensions",
        ast.DictComp: "comprehensions",
        ast.GeneratorExp: "generator expressions",
        ast.JoinedStr: "f-strings",
        ast.NamedExpr: "assignment expressions (':=')",
        ast.IfExp: "conditional expressions",
        ast.BoolOp: "'and'/'or'",
        ast.Starred: "'*' unpacking",
        ast.List: "lists",
        ast.Tuple: "tuples",
        ast.Dict: "dicts",
        ast.Set: "sets",
        ast.Await: "'await'",
        ast.Yield: "'yield'",
        ast.YieldFrom: "'yield'",
    }
    return kinds.get(type(node), f"{type(node).__name__} expressions")


def format_number(value: Any) -> str:
    """Render a result as text: ints exactly, floats by ``repr``, booleans as True/False."""
    return repr(value)


class _Evaluator:
    def __init__(self, text: str) -> None:
        self.text = text

    def eval(self, node: ast.AST, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise MathExpressionError(
                f"the expression nests deeper than {MAX_DEPTH} levels; simplify it"
            )
        if isinstance(node, ast.Expression):
            return self.eval(node.body, depth + 1)
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise MathExpressionError(
                    f"only numbers are allowed as literals, not {value!r}"
                )
            if isinstance(value, int):
                _check_bits(_bits(value), "the literal")
            return value
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            if node.id in _FUNCTIONS:
                raise MathExpressionError(f"{node.id!r} is a function; call it, e.g. sqrt(2)")
            raise MathExpressionError(
                f"unknown name {node.id!r}; allowed constants are {', '.join(_CONSTANTS)} "
                "and functions are those of the math module"
            )
        if isinstance(node, ast.BinOp):
            bin_fn = _BINARY.get(type(node.op))
            if bin_fn is None:
                raise MathExpressionError(
                    f"operator {type(node.op).__name__} is not allowed; "
                    "use + - * / // % ** and comparisons"
                )
            left = self.eval(node.left, depth + 1)
            right = self.eval(node.right, depth + 1)
            result = bin_fn(left, right)
            self._check_result(result)
            return result
        if isinstance(node, ast.UnaryOp):
            un_fn = _UNARY.get(type(node.op))
            if un_fn is None:
                raise MathExpressionError(f"operator {type(node.op).__name__} is not allowed")
            return un_fn(self.eval(node.operand, depth + 1))
        if isinstance(node, ast.Compare):
            left = self.eval(node.left, depth + 1)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                cmp_fn = _COMPARE.get(type(op))
                if cmp_fn is None:
                    raise MathExpressionError(
                        f"comparison {type(op).__name__} is not allowed; use == != < <= > >="
                    )
                right = self.eval(comparator, depth + 1)
                if not cmp_fn(left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        raise MathExpressionError(f"{_describe(node)} are not allowed in a math expression")

    def _call(self, node: ast.Call, depth: int) -> Any:
        if not isinstance(node.func, ast.Name):
            raise MathExpressionError(
                "only named math functions can be called, e.g. sqrt(2) or log(8, 2)"
            )
        name = node.func.id
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise MathExpressionError(
                f"function {name!r} is not allowed; use a function of the math module "
                "(sqrt, log, sin, factorial, ...) or abs, round, min, max"
            )
        if node.keywords:
            raise MathExpressionError(f"{name}() takes positional arguments only")
        if len(node.args) > _MAX_ARGS:
            raise MathExpressionError(f"{name}() got more than {_MAX_ARGS} arguments")
        args = [self.eval(arg, depth + 1) for arg in node.args]
        if name == "lcm":
            _check_bits(sum(_bits(a) for a in args), "lcm(...)")
        if name == "ldexp" and len(args) == 2 and isinstance(args[1], int):
            args[1] = max(min(args[1], 1 << 16), -(1 << 16))  # the float overflows anyway
        try:
            result = fn(*args)
        except MathExpressionError:
            raise  # a size check of a wrapped function: its message says it all
        except (ValueError, TypeError, OverflowError) as exc:
            raise MathExpressionError(f"{name}({', '.join(map(repr, args))}): {exc}") from None
        self._check_result(result)
        return result

    @staticmethod
    def _check_result(result: Any) -> None:
        if isinstance(result, int):
            _check_bits(_bits(result), "the result")
        elif isinstance(result, complex):
            raise MathExpressionError(
                f"the result {result!r} is a complex number; only real results are supported "
                "(a negative number to a fractional power has no real value)"
            )


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def evaluate(expression: str) -> Any:
    """Evaluate a math expression safely and return the number (or bool for comparisons).

    Raises:
        MathExpressionError: the expression is invalid, uses something not allowed, or would
            produce a number too large to compute.
    """
    if not isinstance(expression, str):
        raise MathExpressionError(
            f"the expression must be a string, got {type(expression).__name__}"
        )
    text = expression.strip()
    if not text:
        raise MathExpressionError("the expression is empty; give one such as '2 * (3 + 4)'")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise MathExpressionError(
            f"the expression is {len(text):,} characters long, over the limit of "
            f"{MAX_EXPRESSION_LENGTH:,}; split it into smaller calculations"
        )
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise MathExpressionError(
            f"invalid expression {_short(text)!r}: {exc.msg} (column {exc.offset})"
        ) from None
    except (ValueError, MemoryError, RecursionError) as exc:
        raise MathExpressionError(f"invalid expression: {exc}") from None
    try:
        return _Evaluator(text).eval(tree)
    except ZeroDivisionError:
        raise MathExpressionError(f"division by zero in {_short(text)!r}") from None
    except OverflowError as exc:
        raise MathExpressionError(f"the result overflows a float: {exc}") from None
    except RecursionError:
        raise MathExpressionError("the expression nests too deeply; simplify it") from None


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
