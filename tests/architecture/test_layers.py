"""The house's rules, checked on the code itself: layers, no circles, small modules, one
home for exceptions (issue "The house")."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "jianmu"
MAX_LINES = 1000  # a module holds one concept, whatever its length; past 1,000 lines it sprawls


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            for nxt in edges[node]:
                if nxt in on_stack:
                    low[node] = min(low[node], low[nxt])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_between_modules_counting_lazy_and_type_checking_imports() -> None:
    # grimp reads every import statement: in functions and under TYPE_CHECKING too
    graph = grimp.build_graph("jianmu", exclude_type_checking_imports=False)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "circlepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from circlepkg import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from circlepkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circlepkg", exclude_type_checking_imports=False, cache_dir=None)
    assert _cycles(graph) == [["circlepkg.a", "circlepkg.b"]]


def test_import_linter_contracts_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "import-linter is a dev dependency: pip install -e '.[dev]'"
    done = subprocess.run([lint, "--no-cache"], cwd=PACKAGE.parent, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_no_module_over_1000_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def _bases(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(b) for b in node.bases]


def test_every_exception_lives_in_errors_py() -> None:
    errors = ast.parse((PACKAGE / "errors.py").read_text(encoding="utf-8"))
    known = {"Exception", "BaseException", "TimeoutError", "ValueError", "KeyError",
             "LookupError", "RuntimeError", "UserWarning", "Warning", "DeprecationWarning"}
    known |= {n.name for n in ast.walk(errors) if isinstance(n, ast.ClassDef)}
    outside = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                base.split(".")[-1] in known or base.endswith(("Error", "Exception", "Warning"))
                for base in _bases(node)
            ):
                outside.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert outside == []


def test_every_error_derives_from_jianmu_error() -> None:
    import jianmu.errors as errors

    classes = [v for v in vars(errors).values()
               if isinstance(v, type) and issubclass(v, BaseException)
               and not issubclass(v, Warning) and v.__module__ == errors.__name__]
    assert classes
    assert [c.__name__ for c in classes if not issubclass(c, errors.JianmuError)] == []


def test_no_module_asks_sniffio_which_library_runs() -> None:
    # one concurrency style: asyncio inside; a caller without a running asyncio loop is told
    # apart by asyncio.get_running_loop() failing, never by branching on sniffio
    asking = [str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")
              if "sniffio" in p.read_text(encoding="utf-8")]
    assert asking == []


def test_every_top_level_module_and_package_is_in_a_layer() -> None:
    import tomllib

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if c["type"] == "layers")
    named = {part.strip(" ()") for layer in contract["layers"] for part in layer.split("|")}
    children = {f"jianmu.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    children |= {f"jianmu.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert sorted(children - named) == []
