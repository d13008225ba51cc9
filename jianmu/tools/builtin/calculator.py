"""`calculator`: evaluates math expressions with our own closed AST evaluator."""

from __future__ import annotations

from jianmu.tools.base import Tool
from jianmu.tools.builtin._mathexpr import MAX_EXPRESSION_LENGTH, evaluate, format_number

__all__ = ("CalculatorTool",)


class CalculatorTool(Tool):
    """Evaluate a math expression exactly and safely."""

    name = "calculator"
    description = (
        "Evaluate a math expression and return its value. Use it for any arithmetic instead "
        "of computing in your head. Args: expression, using numbers, + - * / // % **, "
        "parentheses, comparisons (== != < <= > >=), the constants pi, e, tau, inf, nan and "
        "functions of Python's math module (sqrt, log, log10, exp, sin, cos, tan, floor, "
        "ceil, factorial, comb, gcd, hypot, ...) plus abs, round, min, max. For example "
        "'sqrt(2) * (3 + 4) ** 2' or 'log(1024, 2)'. Integers are exact; very large results "
        f"(over about 3,000 digits) and expressions over {MAX_EXPRESSION_LENGTH} characters "
        "are refused. Returns the value as text (True/False for comparisons)."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "description": "The math expression, e.g. '2 * (3 + 4)' or 'sqrt(16) + pi'.",
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    }
    output_schema = {"type": "string", "description": "The value of the expression."}
    category = "read"
    permission = "auto"
    effect_tags = ()
    parallel_safe = True
    timeout_seconds = 5.0
    max_result_length = 5_000
    examples = ("calculator(expression='2 ** 10') -> '1024'",)

    def run(self, expression: str) -> str:
        """Return the value of ``expression`` as text."""
        return format_number(evaluate(expression))
