"""A seeded generator of tool functions and of arguments for them, for differential tests.

`module_source(seed, n)` writes a module of ``n`` functions (sync and async, methods and
partials, every kind of parameter, docstrings in each style); `load` imports it from a file;
`arguments(rng, params)` makes valid and near-valid argument objects for one function.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ("GenFn", "Param", "arguments", "load", "module_source")

HEADER = '''\
import datetime
import decimal
import enum
import functools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

import annotated_types
from pydantic import BaseModel, Field
from typing_extensions import NotRequired, TypedDict


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Size(int, enum.Enum):
    S = 1
    M = 2


class Inner(TypedDict):
    k: int
    tags: list[str]
    note: NotRequired[str]


class Point(BaseModel):
    x: int
    y: float = 0.0


@dataclass
class Box:
    w: int
    label: str = "box"
'''

# (annotation source, valid JSON values, near-valid values, JSON-writable defaults)
TYPES: list[tuple[str, list[Any], list[Any], list[str]]] = [
    ("str", ["a", "", "3", "ü\\n\"'{}"], [3, 1.5, True, None, ["a"], {"a": 1}], ["'x'", "''"]),
    ("int", [0, 3, -7, 10**12], ["3", 3.0, 3.5, "3.0", True, "x", None, [], 1e20],
     ["0", "5", "-1"]),
    ("float", [0.5, 3.0, -1.25], [3, "3", "2.5", True, "nan", "inf", None, "x"],
     ["1.5", "0.0", "2"]),
    ("bool", [True, False], ["true", "false", 1, 0, "yes", "no", 2, "1", 1.0, None, "x"],
     ["False", "True"]),
    ("Optional[int]", [None, 4], ["4", 4.0, "x", True], ["None", "3"]),
    ("int | None", [None, 4], ["4", 4.5, "x"], ["None", "2"]),
    ("str | None", [None, "s"], [4, False], ["None", "'d'"]),
    ("Literal['a', 'b', 1]", ["a", "b", 1], ["c", "1", True, 1.0, None], ["'a'", "1"]),
    ("Color", ["red", "blue"], ["RED", "green", 1, None], ["Color.RED", "'red'"]),
    ("Size", [1, 2], ["1", 3, "S", 1.0], ["Size.S", "2"]),
    ("list[int]", [[], [1, 2]], [["1", 2], [1.0], [1.5], "[1, 2]", 1, [None], {"a": 1}],
     ["[]", "[1]"]),
    ("list[str]", [["a"], []], [[1], "a", "[\"a\"]", None, [None]], ["['a']"]),
    ("dict[str, int]", [{"a": 1}, {}], [{"a": "1"}, {"a": 1.5}, [], "{\"a\": 1}", {"a": None}],
     ["{}", "{'z': 0}"]),
    ("tuple[int, str]", [[1, "a"]], [[1], [1, "a", 2], ["1", "a"], "x"], ["(1, 'a')"]),
    ("tuple[int, ...]", [[1, 2], []], [["1"], [1.5]], ["()", "(1, 2)"]),
    ("set[str]", [["a", "b"], []], [["a", "a"], [1], "a"], ["set()", "{'a'}"]),
    ("Inner", [{"k": 1, "tags": ["t"]}], [{"k": "1", "tags": []}, {"k": 1}, {"k": 1, "tags": [],
                                                                          "z": 1}, "x"], []),
    ("Point", [{"x": 1}, {"x": 1, "y": 2.5}], [{"x": "1"}, {"y": 1}, {"x": 1, "z": 2}, [1]],
     ["None"]),
    ("Box", [{"w": 2}, {"w": 2, "label": "l"}], [{"w": "2"}, {"label": "l"}, {"w": 2, "q": 1}],
     []),
    ("list[Point]", [[{"x": 1}], []], [[{"x": "a"}], {"x": 1}], ["[]"]),
    ("list[Literal['x', 'y']]", [["x"], []], [["z"], "x"], ["['x']"]),
    ("dict[str, list[int]]", [{"a": [1]}], [{"a": 1}, {"a": ["1"]}], ["{}"]),
    ("Optional[list[int]]", [None, [1]], [[None], "1"], ["None"]),
    ("Annotated[int, Field(ge=0, le=10)]", [0, 10, 5], [-1, 11, "5", 10.0, 10.5],
     ["3", "Field(default=2, description='fld def')"]),
    ("Annotated[str, Field(min_length=2, max_length=5, pattern=r'^[a-z]+$')]", ["ab", "abcde"],
     ["a", "abcdef", "AB", 12, "a-b"], ["'ok'"]),
    ("Annotated[float, Field(gt=0, description='pos float')]", [0.5, 2.0], [0, -1, "1", 0.0],
     ["1.0"]),
    ("Annotated[int, 'str metadata doc']", [1], ["1", 1.5], ["7"]),
    ("Annotated[int, annotated_types.Gt(0), annotated_types.Lt(100)]", [1, 99], [0, 100, "5"],
     ["50"]),
    ("Annotated[list[int], Field(min_length=1, max_length=3)]", [[1], [1, 2, 3]],
     [[], [1, 2, 3, 4], ["1"]], ["[1]"]),
    ("Annotated[str, Field(description='ann field desc')]", ["z"], [1, None], ["'zz'"]),
    ("Any", [1, "a", None, [1], {"a": 1}], [], ["None", "1"]),
    ("float | int", [1, 1.5], ["1", "1.5", True], ["0"]),
    ("int | str", [1, "a"], [1.5, None, True], ["'q'"]),
    ("datetime.date", ["2024-01-02"], ["2024-13-01", 1, "x", "2024-01-02T00:00:00"],
     ["datetime.date(2024, 1, 1)"]),
    ("datetime.datetime", ["2024-01-02T03:04:05"], ["2024-01-02", 0, "x"], []),
    ("decimal.Decimal", ["1.5", 2], [1.5, "x", "nan", "inf"], ["decimal.Decimal('0.5')"]),
    ("uuid.UUID", ["12345678-1234-5678-1234-567812345678"], ["x", 1], []),
    ("Optional[Color]", [None, "red"], ["RED", 1], ["None"]),
    ("Literal['a', None]", ["a", None], ["b", 1], ["None"]),
    ("list[Optional[int]]", [[1, None]], [["x"], None], ["[]"]),
    ("dict[str, Any]", [{"a": [1]}, {}], [[], "x"], ["{}"]),
    ("list[list[int]]", [[[1]], []], [[1], [["a"]]], ["[[1]]"]),
    ("int | list[int]", [1, [1]], ["1", ["a"], "[1]"], ["0"]),
    ("Sequence[int]", [[1, 2]], ["12", ["a"]], ["(1, 2)"]),
    ("Mapping[str, int]", [{"a": 1}], [{"a": "x"}, []], []),
    ("frozenset[int]", [[1, 2]], [["a"], [1, 1]], ["frozenset()"]),
    ("Annotated[Optional[int], Field(ge=0)]", [None, 0, 3], [-1, "x"], ["None", "2"]),
    ("Annotated[int, Field(multiple_of=3)]", [3, 9], [4, "6"], ["6"]),
    ("Annotated[str, Field(strict=True)]", ["s"], [1], ["'t'"]),
    ("Annotated[int, Field(strict=True)]", [1], ["1", 1.0, True], ["1"]),
    ("float", [1.5], [10**400, -10**400], ["float('inf')", "float('nan')"]),
    ("list[int]", [[1]], [], ["[]", "[1, 2]"]),
    ("dict[str, int]", [{"a": 1}], [], ["{}", "{'a': 1}"]),
    ("tuple[int, int]", [[1, 2]], [[1, 2, 3], "x"], ["(1, 2)"]),
    ("bool | None", [True, None], ["true", 0], ["None", "True"]),
]

_RESERVED = frozenset({"copy", "json", "dict", "validate", "model_config", "fields"})
"""Names pydantic's BaseModel has as attributes: kept as they are on odd positions."""

STYLES = ("google", "numpy", "rest", "epydoc", "none", "google_typed")
ODD = ["plain words", "with: a colon", "quotes \"q\" and 'q'", "braces {x} and [y]",
       "unicode é 中文 ✓", "back\\\\slash and `code`", "ends with a dot.", "50% of * stars",
       "two\nlines here", "- a dash first", "Returns: not a section"]


@dataclass
class Param:
    """One generated parameter."""

    name: str
    ann: str
    kind: str  # pos | norm | kw
    default: str | None
    valid: list[Any]
    near: list[Any]
    doc: str | None
    index: int = 0


@dataclass
class GenFn:
    """One generated function and how it is reached."""

    name: str
    params: list[Param]
    is_async: bool
    how: str  # plain | method | partial
    bound: dict[str, Any] = field(default_factory=dict)
    style: str = "none"
    future: bool = False
    var_kw: bool = False
    summary: str = ""


def _docstring(rng: random.Random, fn: GenFn) -> str:
    style = fn.style
    summary = rng.choice(["Do the thing.", "Compute: a value", "Look up {x} \"fast\".", ""])
    fn.summary = summary if style != "none" else ""
    docs = [(p, p.doc) for p in fn.params if p.doc is not None]
    if style == "none" or not docs:
        return f'    """{summary}"""\n' if style != "none" else ""
    lines = [summary, ""] if summary else [""]  # none: the docstring opens on its section
    more = "\n" + " " * (12 if style.startswith("google") else 8)  # a continuation line
    docs = [(p, d.replace("\n", more)) for p, d in docs]
    if style == "google":
        lines.append("Args:")
        lines += [f"    {p.name}: {d}" for p, d in docs]
    elif style == "google_typed":
        lines.append("Args:")
        lines += [f"    {p.name} (int): {d}" for p, d in docs]
    elif style == "numpy":
        lines += ["Parameters", "----------"]
        for p, d in docs:
            lines += [f"{p.name} : object", f"    {d}"]
    elif style == "rest":
        lines += [f":param {p.name}: {d}" for p, d in docs]
    elif style == "epydoc":
        lines += [f"@param {p.name}: {d}" for p, d in docs]
    body = "\n    ".join(lines)
    return f'    """{body}\n    """\n'


def _one(rng: random.Random, seed: int, i: int) -> tuple[str, GenFn]:
    n = rng.randint(0, 5)
    fn = GenFn(name=f"f{seed}_{i}", params=[], is_async=rng.random() < 0.3,
               how=rng.choice(["plain", "plain", "plain", "method", "partial"]),
               style=rng.choice(STYLES))
    fn.var_kw = rng.random() < 0.1
    kinds = sorted(rng.choice(["pos", "norm", "norm", "norm", "kw"]) for _ in range(n))
    order = {"pos": 0, "norm": 1, "kw": 2}
    kinds.sort(key=order.__getitem__)
    seen_default = False
    used: set[str] = set()
    for j, kind in enumerate(kinds):
        ann, valid, near, defaults = rng.choice(TYPES)
        default = None
        if defaults and (rng.random() < 0.4 or (seen_default and kind != "kw")):
            default = rng.choice(defaults)
        if seen_default and kind != "kw" and default is None:
            kind = "kw"  # a required parameter after a defaulted one must be keyword-only
        seen_default = seen_default or (default is not None and kind != "kw")
        name = rng.choice(["a", "b", "query", "limit", "schema", "_private", "model_x", "copy",
                           "json", "dict", "validate", "model_config", "fields"])
        name = name if name in _RESERVED and j % 2 and name not in used else f"{name}{j}"
        used.add(name)
        doc = rng.choice(ODD) if rng.random() < 0.7 else None
        fn.params.append(Param(name, ann, kind, default, valid, near, doc, j))
    if fn.how == "partial" and not any(p.kind != "pos" for p in fn.params):
        fn.how = "plain"
    parts: list[str] = []
    if fn.how == "method":
        parts.append("self")
    kinds_seen: list[str] = [p.kind for p in fn.params]
    for p in fn.params:
        text = f"{p.name}: {p.ann}" + (f" = {p.default}" if p.default is not None else "")
        if p.kind == "kw" and "*" not in parts and not any(
                x.startswith("*") for x in parts):
            parts.append("*")
        parts.append(text)
        if p.kind == "pos" and (kinds_seen.index("pos") + kinds_seen.count("pos") - 1 ==
                                fn.params.index(p)):
            parts.append("/")
    if fn.var_kw:
        parts.append("**kw: Any")
    names = [p.name for p in fn.params]
    ret = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    head = f"{'async ' if fn.is_async else ''}def {fn.name}({', '.join(parts)}) -> dict:\n"
    body = _docstring(rng, fn) + f"    return {ret}\n"
    if fn.how == "method":
        src = f"class C_{fn.name}:\n" + "".join(
            "    " + line + "\n" if line else "\n" for line in (head + body).splitlines())
        src += f"\n\n{fn.name}_obj = C_{fn.name}()\n"
    else:
        src = head + body
    if fn.how == "partial":
        target = next(p for p in fn.params if p.kind != "pos")
        value = rng.choice(target.valid)
        fn.bound = {target.name: value}
        src += f"\n\n{fn.name}_partial = functools.partial({fn.name}, {target.name}={value!r})\n"
    return src, fn


def module_source(seed: int, n: int) -> tuple[str, list[GenFn]]:
    """The source of a module of ``n`` generated functions, and their descriptions."""
    rng = random.Random(seed)
    future = seed % 2 == 1  # odd seeds: every annotation a string
    out = ["from __future__ import annotations\n" if future else "", HEADER]
    fns = []
    for i in range(n):
        src, fn = _one(rng, seed, i)
        fn.future = future
        out.append("\n\n" + src)
        fns.append(fn)
    return "".join(out), fns


def load(path: Path, source: str, name: str) -> ModuleType:
    """Write ``source`` to ``path`` and import it as module ``name``."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and `from __future__` hints resolve through it
    spec.loader.exec_module(module)
    return module


def target(module: ModuleType, fn: GenFn) -> Any:
    """The callable a tool is made of: the function, the bound method or the partial."""
    if fn.how == "method":
        return getattr(getattr(module, f"{fn.name}_obj"), fn.name)
    if fn.how == "partial":
        return getattr(module, f"{fn.name}_partial")
    return getattr(module, fn.name)


def arguments(rng: random.Random, fn: GenFn, count: int) -> list[dict[str, Any]]:
    """Valid and near-valid argument objects for ``fn`` (the partial's bound ones left out)."""
    params = [p for p in fn.params if p.name not in fn.bound]
    out: list[dict[str, Any]] = []
    for _ in range(count):
        args: dict[str, Any] = {}
        for p in params:
            if p.default is not None and rng.random() < 0.3:
                continue
            pool = p.near if p.near and rng.random() < 0.35 else p.valid
            args[p.name] = rng.choice(pool)
        roll = rng.random()
        if roll < 0.08:
            args["extra_key"] = 1
        elif roll < 0.16 and args:
            args.pop(rng.choice(list(args)))
        elif roll < 0.22 and args:
            args[rng.choice(list(args))] = None
        out.append(args)
    return out
