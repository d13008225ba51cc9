"""The mutation configs stay in step with the code (``make mutate``, mutation/run.py).

An entry of ``mutation/<config>.equivalent`` (``operator line:col  # why``) leaves one mutant
out of the score. When the module changes and the line moves, the entry matches nothing and
the mutant it meant counts again, or, worse, the entry lands on another mutant and hides it.
So each entry must still name a place where its operator applies: the token at ``line:col``
is the one the operator rewrites (and, with cosmic-ray installed, cosmic-ray itself mutates
there). Each config's module and test files must exist too.
"""

from __future__ import annotations

import io
import shlex
import tokenize
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "mutation").glob("*.toml"))

# what each operator family rewrites: the token found at the mutant's position
_COMPARISONS = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=",
                "Is": "is", "IsNot": "is", "In": "in", "NotIn": "not"}
_BINARY = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "FloorDiv": "//", "Mod": "%",
           "Pow": "**", "LShift": "<<", "RShift": ">>", "BitOr": "|", "BitAnd": "&",
           "BitXor": "^", "MatMult": "@"}
_UNARY = {"UAdd": "+", "USub": "-", "Invert": "~", "Not": "not"}
_KEYWORDS = {"core/ReplaceTrueWithFalse": "True", "core/ReplaceFalseWithTrue": "False",
             "core/ReplaceAndWithOr": "and", "core/ReplaceOrWithAnd": "or",
             "core/ReplaceBreakWithContinue": "break", "core/ReplaceContinueWithBreak": "continue",
             "core/RemoveDecorator": "@", "core/ZeroIterationForLoop": None,
             "core/AddNot": None, "core/ExceptionReplacer": None,
             "core/VariableInserter": None, "core/VariableReplacer": None}


def _config(path: Path) -> dict:
    return tomllib.loads(path.read_text())["cosmic-ray"]


def _entries(config: Path) -> list[tuple[str, int, int, str]]:
    listed = config.with_suffix(".equivalent")
    if not listed.exists():
        return []
    found = []
    for number, line in enumerate(listed.read_text().splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if entry:
            operator, where = entry.split()
            row, col = where.split(":")
            found.append((operator, int(row), int(col), f"{listed.name}:{number}"))
    return found


def _expected(operator: str) -> set[str] | None:
    """The tokens ``operator`` rewrites; None for one that may apply at any token."""
    family, _, kinds = operator.partition("_")
    if family == "core/ReplaceComparisonOperator":
        return {_COMPARISONS[kinds.split("_")[0]]}
    if family == "core/ReplaceBinaryOperator":
        return {_BINARY[kinds.split("_")[0]]}
    if family == "core/ReplaceUnaryOperator":
        return {_UNARY[k] for k in kinds.split("_") if k in _UNARY}
    if family == "core/NumberReplacer":
        return {"<number>"}
    if operator not in _KEYWORDS:
        raise AssertionError(f"unknown cosmic-ray operator {operator!r}")
    word = _KEYWORDS[operator]
    return None if word is None else {word}


def _tokens(source: str) -> dict[tuple[int, int], str]:
    """Each token's text by its start (numbers as ``<number>``)."""
    return {
        tok.start: "<number>" if tok.type == tokenize.NUMBER else tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
    }


def _cosmic_ray_positions(module: Path) -> set[tuple[str, int, int]] | None:
    """Where cosmic-ray mutates ``module``, as ``(operator, line, col)``; None without it."""
    try:
        import cosmic_ray.plugins
        from cosmic_ray.ast import ast_nodes, get_ast_from_path
    except ImportError:
        return None
    tree = get_ast_from_path(module)
    nodes = list(ast_nodes(tree))
    found = set()
    for name in cosmic_ray.plugins.operator_names():
        operator_class = cosmic_ray.plugins.get_operator(name)
        if operator_class.arguments():
            continue  # configured per session; none of ours is
        operator = operator_class()
        for node in nodes:
            for start, _end in operator.mutation_positions(node):
                found.add((name, *start))
    return found


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_a_config_names_a_module_and_tests_that_exist(config: Path) -> None:
    settings = _config(config)
    assert (ROOT / settings["module-path"]).is_file(), settings["module-path"]
    named = [word.split("::")[0] for word in shlex.split(settings["test-command"])
             if word.split("::")[0].endswith(".py")]
    assert named, "the test command names no test file"
    missing = [name for name in named if not (ROOT / name).is_file()]
    assert not missing, f"{config.name}: no such test file(s): {missing}"


@pytest.mark.parametrize("config", [c for c in CONFIGS if c.with_suffix(".equivalent").exists()],
                         ids=lambda p: p.stem)
def test_each_equivalent_mutant_is_still_where_its_operator_applies(config: Path) -> None:
    module = ROOT / _config(config)["module-path"]
    source = module.read_text()
    tokens = _tokens(source)
    exact = _cosmic_ray_positions(module)
    stale = []
    for operator, row, col, where in _entries(config):
        expected = _expected(operator)
        token = tokens.get((row, col))
        if token is None or (expected is not None and token not in expected):
            shown = source.splitlines()[row - 1].strip() if row <= source.count("\n") + 1 else ""
            stale.append(f"{where}: {operator} {row}:{col} finds {token!r} in {shown!r}")
        elif exact is not None and (operator, row, col) not in exact:
            stale.append(f"{where}: cosmic-ray makes no {operator} mutant at {row}:{col}")
    assert not stale, "stale equivalent mutants (recompute them):\n" + "\n".join(stale)


def test_the_check_finds_a_moved_entry() -> None:
    # the operator must match the token at the position: `or` is not `==`
    tokens = _tokens("x = a or b == 1\n")
    assert tokens[(1, 6)] == "or" and tokens[(1, 11)] == "=="
    assert tokens[(1, 14)] == "<number>"
    assert "or" in (_expected("core/ReplaceOrWithAnd") or set())
    assert "or" not in (_expected("core/ReplaceComparisonOperator_Eq_LtE") or set())
    assert _expected("core/ReplaceComparisonOperator_IsNot_Eq") == {"is"}
    with pytest.raises(AssertionError, match="unknown"):
        _expected("core/NoSuchOperator")
