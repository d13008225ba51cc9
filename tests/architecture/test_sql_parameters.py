"""SQL the package sends binds its parameters in the forms every supported Python takes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "jianmu"
_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE)\b")
_NUMBERED = re.compile(r"\?\d")


def test_no_sql_binds_a_numbered_parameter() -> None:
    # sqlite3 takes "?1" as a named parameter: given a sequence, Python 3.12 warns (an error
    # where warnings are errors) and 3.14 refuses it. "?" or ":name" serve every version.
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and _SQL.search(node.value) and _NUMBERED.search(node.value)):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)
