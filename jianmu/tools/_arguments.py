"""Argument handling shared by every tool: JSON decoding and schema checks.

`FunctionTool` and the built-ins validate with pydantic. A tool made from a JSON Schema
(`Tool.from_schema`, `Tool.from_openai`, ``@tool(input_schema=...)``) is checked by
`SchemaArguments`: exactly that schema, with the ``jsonschema`` library (the schema's own
``$schema`` dialect, JSON Schema 2020-12 when it names none). What arrives as a JSON Schema
from elsewhere (MCP tools, a `Tool` subclass with a hand-written ``input_schema``, a BT skill's
inputs and outputs) is checked here with pydantic's lax rules for the common keywords (type,
enum, const, required, properties, patternProperties, items, anyOf/oneOf/allOf, $ref, numeric
and length bounds), since a server or a skill validates again on its side.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import marshal
import math
import re
import threading
import types
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from jianmu import _schema_rules
from jianmu.errors import ToolDefinitionError, ToolInputError
from jianmu.tools._schema_check import check_schema, plain_schema
from jianmu.tools._schema_types import ANY as _ANY
from jianmu.tools._schema_types import UNFOLLOWED as _UNFOLLOWED
from jianmu.tools._schema_types import Budget as _Budget
from jianmu.tools._schema_types import drop_default_nulls, schema_types
from jianmu.tools._schema_types import resolve as _resolve
from jianmu.tools._unread import rest_validator, unread
from jianmu.tools.calls import decode_container, non_finite_problem, single_argument

__all__ = (
    "SchemaArguments",
    "accepted_names",
    "check_schema_rules",
    "drop_default_nulls",
    "input_error",
    "non_finite_problem",
    "one_of",
    "scalar_plan",
    "schema_types",
    "validate_planned",
    "validate_with_schema",
)

_MISSING = object()
_MAX_PROBLEMS = 20  # an error lists this many problems, then how many more there are
_MAX_NAMES = 30  # and this many allowed arguments
_MAX_VALUES = 5  # and this many allowed values of an enum, with their count
_MAX_SHOWN = 80  # characters of a value quoted back in a message


def _shown(value: Any) -> str:
    """``repr(value)``, cut to a few dozen characters: a message never echoes a whole blob (nor
    makes one first: an anyOf at each level of a deep argument quotes each subtree)."""
    return _schema_rules.brief(value, _MAX_SHOWN - 1)


def one_of(values: Any) -> str:
    """``one of 'a', 'b', 'c', … (200,000 values)``: a few allowed values, with their count."""
    values = list(values) if not isinstance(values, list) else values
    shown = ", ".join(_shown(v) for v in values[:_MAX_VALUES])
    if len(values) <= _MAX_VALUES:
        return f"one of {shown}"
    return f"one of {shown}, … ({len(values):,} values)"


def _some(names: list[str] | Mapping[str, Any]) -> str:
    # the first few only: an object's properties are named again for each unknown argument
    shown = ", ".join(itertools.islice(names, _MAX_NAMES))
    return shown if len(names) <= _MAX_NAMES else f"{shown}, … ({len(names):,} in all)"


def input_error(tool: str, problems: list[str], allowed: list[str]) -> ToolInputError:
    """A `ToolInputError` that lists the problems (the first 20, and how many more) and the
    allowed arguments."""
    listed = problems[:_MAX_PROBLEMS]
    if len(problems) > _MAX_PROBLEMS:
        listed.append(f"… and {len(problems) - _MAX_PROBLEMS:,} more problems")
    lines = "\n".join(f"  - {p}" for p in listed)
    hint = (
        f"\nallowed arguments: {_some(allowed)}" if allowed else "\nthe tool takes no arguments"
    )
    return ToolInputError(
        f"invalid arguments for tool {tool!r}:\n{lines}{hint}", tool=tool, problems=problems
    )


def _names_of(func: Callable[..., Any]) -> frozenset[str] | None:
    code = getattr(func, "__code__", None)
    if (type(func) is types.FunctionType and isinstance(code, types.CodeType)
            and not hasattr(func, "__wrapped__") and not hasattr(func, "__signature__")):
        # a plain function: its code object names what inspect.signature would, at a
        # fraction of the cost (a tool made per request from a new function paid it)
        if code.co_flags & inspect.CO_VARKEYWORDS:
            return None
        count = code.co_argcount + code.co_kwonlyargcount
        return frozenset(n for n in code.co_varnames[:count] if n != "self")
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    names = set()
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            return None
        if p.kind is not p.VAR_POSITIONAL and p.name != "self":
            names.add(p.name)
    return frozenset(names)


_accepted_names_of = lru_cache(maxsize=1024)(_names_of)


def accepted_names(fn: Callable[..., Any]) -> frozenset[str] | None:
    """Keyword names ``fn`` accepts; ``None`` when it takes ``**kwargs``."""
    target = getattr(fn, "__func__", fn)
    try:
        return _accepted_names_of(target)
    except TypeError:  # unhashable callable
        return _names_of(target)


# -- a small lax JSON Schema checker -------------------------------------------------------


# ASCII digits only, as JSON and pydantic read numbers: int() and float() take any script's
# digits ("١٢٣") and float() takes "1_000"
_INT_RE = re.compile(r"\s*[-+]?[0-9]+\s*", re.ASCII)
_NUMBER_RE = re.compile(r"\s*[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*", re.ASCII)
_TRUE = {"true", "yes", "on", "1", "t", "y"}
_FALSE = {"false", "no", "off", "0", "f", "n"}


def _coerce_type(value: Any, t: str) -> Any:
    """Coerce ``value`` to JSON type ``t`` the way pydantic's lax mode does, or _MISSING."""
    if t == "string":
        return value if isinstance(value, str) else _MISSING
    if t == "integer":
        if isinstance(value, bool):
            return _MISSING
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT_RE.fullmatch(value):
            try:
                return int(value)
            except ValueError:  # past Python's digits limit (4,300)
                return _MISSING
        return _MISSING
    if t == "number":
        if isinstance(value, bool):
            return _MISSING
        if isinstance(value, (int, float)):
            return value
        if isinstance(value, str) and _NUMBER_RE.fullmatch(value):
            f = float(value)
            return f if math.isfinite(f) else _MISSING
        return _MISSING
    if t == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        return _MISSING
    if t == "null":
        return None if value is None else _MISSING
    if t == "array":
        return list(value) if isinstance(value, (list, tuple)) else _MISSING
    if t == "object":
        return value if isinstance(value, dict) else _MISSING
    return value  # unknown type keyword: accept


_MAX_DEPTH = 64
"""Levels of a schema (a property, an item, a branch) the lax checker descends; past them a
call is refused: it recurses, and a chain of refs to allOf's may be thousands long."""
_OBJECT_KEYWORDS = frozenset({"properties", "additionalProperties", "patternProperties",
                              "required"})

_TOO_COMPLEX = (
    "the tool's schema is too complex to check these arguments (it refers to itself too many "
    "times); the call was not made"
)


def _check(value: Any, schema: Any, root: Mapping[str, Any], path: str, depth: int = 0,
           budget: _Budget | None = None, branch: bool = False) -> tuple[Any, list[str]]:
    # ``branch``: ``schema`` is one of an allOf/anyOf/oneOf, which checks the same object as
    # its siblings do: the names they define are not its to refuse (it is open unless it says)
    if budget is None:
        budget = _Budget(value)
    if not budget.spend():  # every check from here on fails at once: the work stays bounded
        return value, [_TOO_COMPLEX]
    schema = _resolve(schema, root)
    if schema is _UNFOLLOWED:  # never read as "anything goes"
        return value, [f"{path or '$'}: the tool's schema refers here to a schema it does not "
                       "hold (or through more than 32 references in a chain), so these "
                       "arguments cannot be checked; the call was not made"]
    if schema is False:
        return value, [f"{path or '$'}: the tool's schema allows no value here"]
    if not isinstance(schema, dict):
        return value, []
    if depth > _MAX_DEPTH:
        return value, [f"{path or '$'}: the tool's schema nests deeper than {_MAX_DEPTH} levels "
                       "here, past what the checker follows; the call was not made"]
    for key in ("anyOf", "oneOf"):  # a form that fits, then the schema's other keywords
        if key in schema:
            first: list[str] = []
            for sub in schema[key]:
                out, probs = _check(value, sub, root, path, depth + 1, budget, True)
                if not probs:
                    value = out
                    break
                first = first or probs
            else:
                return value, [
                    f"{path or '$'}: {_shown(value)} matches none of the allowed forms "
                    f"({first[0] if first else 'it has none'})"
                ]
    for sub in schema.get("allOf", ()):
        value, probs = _check(value, sub, root, path, depth + 1, budget, True)
        if probs:
            return value, probs
    types = schema_types(schema, root)
    if isinstance(value, str) and types & {"array", "object"} and not types & {"string", _ANY}:
        try:  # models often send a JSON string for a list or object
            value = json.loads(value)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
            pass
    t = schema.get("type")
    if t is not None:
        candidates = [t] if isinstance(t, str) else list(t)
        for cand in candidates:
            coerced = _coerce_type(value, cand)
            if coerced is not _MISSING or (cand == "null" and value is None):
                value = coerced
                break
        else:
            return value, [f"{path}: expected {' or '.join(candidates)}, got {_shown(value)}"]
    if "enum" in schema and isinstance(schema["enum"], list) and not _schema_rules.in_enum(
        value, schema["enum"]
    ):
        return value, [f"{path}: {_shown(value)} is not {one_of(schema['enum'])}"]
    if "const" in schema and not _schema_rules.json_equal(value, schema["const"]):
        return value, [f"{path}: must be {_shown(schema['const'])}, got {_shown(value)}"]
    problems = _bounds(value, schema, path)
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            out_list = []
            for i, item in enumerate(value):
                v, probs = _check(item, items, root, f"{path}[{i}]", depth + 1, budget)
                out_list.append(v)
                problems += probs
            value = out_list
    elif isinstance(value, dict) and not _OBJECT_KEYWORDS.isdisjoint(schema):
        value, probs = _check_object(value, schema, root, path, depth, budget, branch)
        problems += probs
    return value, problems


def _named_elsewhere(schema: Mapping[str, Any], root: Mapping[str, Any],
                     required: list[str]) -> frozenset[str]:
    """The names ``schema`` requires, and those its allOf/anyOf/oneOf branches define."""
    return frozenset(required).union(_branch_names(schema, root))


def _branch_names(schema: Mapping[str, Any], root: Mapping[str, Any]) -> dict[str, Any]:
    """The properties ``schema``'s allOf/anyOf/oneOf branches define, each once."""
    names: dict[str, Any] = {}
    for key in ("allOf", "anyOf", "oneOf"):
        branches = schema.get(key)
        for branch in branches if isinstance(branches, list) else ():
            branch = _resolve(branch, root)
            inner = branch.get("properties") if isinstance(branch, dict) else None
            if isinstance(inner, dict):
                names.update((k, v) for k, v in inner.items() if k not in names)
    return names


def _matching(patterns: Any, key: str) -> list[int]:
    """The indices of the ``patternProperties`` patterns found in ``key`` (none for a pattern
    RE2 refuses: a tool from outside is refused when made, `check_schema_rules`)."""
    try:
        return patterns.matching(key)  # type: ignore[no-any-return]
    except _schema_rules.PatternError:
        return []


def _bounds(value: Any, schema: Mapping[str, Any], path: str) -> list[str]:
    problems: list[str] = []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, ok, word in (
            ("minimum", lambda v, b: v >= b, ">="),
            ("maximum", lambda v, b: v <= b, "<="),
            ("exclusiveMinimum", lambda v, b: v > b, ">"),
            ("exclusiveMaximum", lambda v, b: v < b, "<"),
        ):
            bound = schema.get(key)  # a bool is draft 4's flag: the schema's validator reads it
            if type(bound) in (int, float) and not ok(value, bound):
                problems.append(f"{path}: must be {word} {bound}, got {value!r}")
    if isinstance(value, (str, list)):
        lo_key, hi_key = ("minLength", "maxLength") if isinstance(value, str) else (
            "minItems", "maxItems")
        lo, hi = schema.get(lo_key), schema.get(hi_key)
        unit = "characters" if isinstance(value, str) else "items"
        if isinstance(lo, int) and len(value) < lo:
            problems.append(f"{path}: needs at least {lo} {unit}, got {len(value)}")
        if isinstance(hi, int) and len(value) > hi:
            problems.append(f"{path}: allows at most {hi} {unit}, got {len(value)}")
    pattern = schema.get("pattern")
    if isinstance(value, str) and isinstance(pattern, str):
        try:  # RE2, in linear time: Python's re backtracks exponentially on ^(a+)+$
            if not _schema_rules.pattern_search(pattern, value):
                problems.append(
                    f"{path}: {_shown(value)} does not match pattern {_shown(pattern)}"
                )
        except _schema_rules.PatternError:
            pass  # not RE2 syntax: a tool from outside is refused when made (check_schema_rules)
    return problems


def _check_object(
    value: dict[str, Any], schema: Mapping[str, Any], root: Mapping[str, Any], path: str,
    depth: int, budget: _Budget, branch: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    props: Mapping[str, Any] = schema.get("properties") or {}
    named = schema.get("required") or ()
    # every name is looked up in every object: 2,000 names by a model's 2,000 empty objects
    # were 4,000,000 problems; the budget pays for each name
    if not budget.spend(len(named) if isinstance(named, list) else 0):
        return value, [_TOO_COMPLEX]
    required = [r for r in named if isinstance(r, str)]
    extra = schema.get("additionalProperties", False if props and not branch else True)
    # read as closed when the schema does not say (``additionalProperties`` left out), an object
    # refused, when given, a name it requires without defining it (and when missing: every
    # call) or one its allOf/anyOf/oneOf branches define: such names are never unknown
    undeclared = _named_elsewhere(schema, root, required).difference(props) if (
        extra is False and "additionalProperties" not in schema) else frozenset()
    forms = schema.get("patternProperties")
    # a key a pattern matches is checked by that pattern's schema (RE2, every pattern at once)
    patterns = _schema_rules.named_patterns(forms) if isinstance(forms, dict) and forms else None
    problems: list[str] = []
    out: dict[str, Any] = {}
    prefix = f"{path}." if path else ""
    for key, item in value.items():
        hits = _matching(patterns, key) if patterns is not None and key not in props else []
        if hits:
            out[key] = item
            for index in hits:
                form = forms[patterns.patterns[index]]  # type: ignore[index,union-attr]
                out[key], probs = _check(out[key], form, root, f"{prefix}{key}", depth + 1, budget)
                problems += probs
        elif key in props:
            sub = props[key]
            if item is None and key not in required and "null" not in schema_types(sub, root):
                continue  # strict-mode callers send null for "not given": use the default
            out[key], probs = _check(item, sub, root, f"{prefix}{key}", depth + 1, budget)
            problems += probs
        elif key in undeclared:
            out[key] = item
        elif extra is False:
            allowed = _some(props) or "none"
            problems.append(f"unknown argument {_shown(prefix + key)}; allowed: {allowed}")
        elif isinstance(extra, dict):
            out[key], probs = _check(item, extra, root, f"{prefix}{key}", depth + 1, budget)
            problems += probs
        else:
            out[key] = item
    missing = [key for key in required if key not in value]
    problems += [f"missing required argument {prefix + key!r}" for key in missing[:_MAX_PROBLEMS]]
    if len(missing) > _MAX_PROBLEMS:
        problems.append(f"… and {len(missing) - _MAX_PROBLEMS:,} more missing required arguments")
    return out, problems


def check_schema_rules(tool: str, schema: Mapping[str, Any]) -> None:
    """Refuse a schema that reaches outside itself or has a pattern RE2 cannot match in linear
    time (see `jianmu._schema_rules`); once, when the tool is made.

    Raises:
        ToolDefinitionError: naming each such reference or pattern.
    """
    problems = _schema_rules.schema_problems(schema)
    if problems:
        raise ToolDefinitionError(tool, problems)


def _meta_checked(tool: str, schema: Mapping[str, Any], what: str = "input schema") -> Any:
    """The jsonschema validator class of ``schema``'s dialect, once ``schema`` passes its
    meta-schema (RE2 deciding the ``regex`` format).

    Raises:
        ToolDefinitionError: naming where the schema breaks its meta-schema.
    """
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import SchemaError

    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        # cls.check_schema, faster for plain schemas; RE2 decides the regex format
        check_schema(cls, schema, format_checker=_schema_rules.format_checker(cls))
    except SchemaError as exc:
        # a type from another vocabulary (BFCL's "dict", Java's "String") is named with what
        # JSON Schema writes, every one at once: the meta-schema's line says only the first
        from jianmu._text import visible
        from jianmu.tools._type_names import type_problems

        # a property's name is the schema author's (an MCP server's): a terminal that shows
        # the error must not obey it
        where = "/".join(visible(str(p)) for p in exc.path) or "the root"
        raise ToolDefinitionError(tool, type_problems(schema, what) or [
            f"{what} is not a valid JSON Schema at {where}: {exc.message}"
        ]) from None
    return cls


def check_foreign_schema(
    tool: str, schema: Mapping[str, Any], *, what: str = "input schema"
) -> None:
    """Refuse a schema from outside (an MCP server's) that breaks the rules of
    `check_schema_rules` or its own meta-schema: the lax checker walks its keywords as the
    meta-schema shapes them (``anyOf: 5`` failed every call with a ``TypeError``).

    Raises:
        ToolDefinitionError: naming each problem, and ``what`` schema has it.
    """
    problems = _schema_rules.schema_problems(schema)
    if problems:
        raise ToolDefinitionError(tool, [f"{what}: {problem}" for problem in problems])
    if not plain_schema(schema):  # a plain schema passes its meta-schema (one walk says so)
        _meta_checked(tool, schema, what)


def validate_with_schema(tool: str, schema: Mapping[str, Any], args: Any,
                         root: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check ``args`` against an object ``schema`` with lax coercion; its references are
    read in ``root`` (the document ``schema`` was taken from), ``schema`` itself by default.

    Raises:
        ToolInputError: listing every problem and the allowed arguments.
    """
    args = single_argument(schema, decode_container(args))
    if not isinstance(args, dict):
        raise input_error(
            tool, [f"arguments must be a JSON object, got {type(args).__name__} {_shown(args)}"],
            _allowed(schema),
        )
    non_finite = non_finite_problem(args)
    if non_finite is not None:
        raise input_error(tool, [non_finite], _allowed(schema))
    budget = _Budget(args)
    # the root is a schema like any other: its $ref, allOf and anyOf hold too
    out, problems = _check(args, schema, schema if root is None else root, "", 0, budget)
    if budget.spent:
        problems = [_TOO_COMPLEX]
    if not problems and root is None:  # what the lax pass does not read, on what it made
        rest = rest_validator(schema)
        if rest is not None:
            problems = _bounded_errors(rest, out)
    if problems:
        raise input_error(tool, problems, _allowed(schema))
    return out


_SCALARS: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
}
_INERT = frozenset({
    "type", "title", "description", "default", "examples", "format", "deprecated",
    "readOnly", "writeOnly", "$comment",
})


_ROOT_RULES = frozenset({"$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf",
                         "enum", "const"})
Plan = tuple[dict[str, tuple[type, ...]], tuple[str, ...]]
"""`scalar_plan`'s answer: each property's accepted Python types, and the required names."""


def _asserts_elsewhere(schema: Mapping[str, Any]) -> bool:
    """Whether an object schema may assert something beside its properties (whose keywords
    `scalar_plan` allows one by one): only then is it walked for what the lax pass leaves
    unread (`jianmu.tools._unread`)."""
    return not schema.keys() <= _PLAIN_TOP or isinstance(schema.get("additionalProperties"), dict)


def scalar_plan(schema: Mapping[str, Any]) -> Plan | None:
    """For an object schema whose properties are plain scalars without bounds, each
    property's Python types that `validate_with_schema` accepts unchanged, and the required
    names; ``None`` for any other schema."""
    props = schema.get("properties") or {}
    if not isinstance(props, dict) or not _ROOT_RULES.isdisjoint(schema) or (
            _asserts_elsewhere(schema) and unread(schema)):
        return None  # the root's own refs and branches are the checker's
    kinds: dict[str, tuple[type, ...]] = {}
    for key, sub in props.items():
        # only keywords the checker ignores besides the type: anything else may refuse
        if not isinstance(sub, dict) or not sub.keys() <= _INERT:
            return None
        t = sub.get("type")
        if not isinstance(t, str) or t not in _SCALARS:
            return None
        kinds[key] = _SCALARS[t]
    required = tuple(r for r in schema.get("required") or () if isinstance(r, str))
    return kinds, required


def validate_planned(
    tool: str,
    schema: Mapping[str, Any],
    plan: Plan,
    args: Any,
) -> dict[str, Any]:
    """`validate_with_schema` with ``plan`` (`scalar_plan` of ``schema``) as a shortcut: a
    dict whose every value already has its property's type is accepted as it is."""
    kinds, required = plan
    if type(args) is dict and non_finite_problem(args) is None:  # else the checker says so
        for key, value in args.items():
            expected = kinds.get(key)
            if expected is None or type(value) not in expected:
                break  # an unknown name, a null, a value to coerce or refuse: the checker
        else:
            if all(key in args for key in required):
                return dict(args)
    return validate_with_schema(tool, schema, args)


def _allowed(schema: Mapping[str, Any], *, open_names: bool = True) -> list[str]:
    """The arguments an object ``schema`` allows, for an error message; with ``open_names``,
    what names it allows besides when it names none (else "the tool takes no arguments")."""
    if "properties" not in schema:  # a root $ref (pydantic v1's), or a union: their names
        schema = _resolve(schema, schema)
        if isinstance(schema, dict) and "properties" not in schema:
            schema = {**schema, "properties": _branch_names(schema, schema)}
    elif not schema.keys().isdisjoint(("allOf", "anyOf", "oneOf")) and isinstance(
            schema["properties"], dict):  # names only a branch defines are arguments too
        schema = {**schema, "properties": {
            **schema["properties"], **{k: v for k, v in _branch_names(schema, schema).items()
                                       if k not in schema["properties"]}}}
    if not isinstance(schema, dict):
        return []
    named = schema.get("required")
    # hashed: thousands of properties by thousands of required names were millions of steps
    required = ({r: None for r in named if isinstance(r, str)} if isinstance(named, list)
                else {})  # in their order, each once
    props = schema.get("properties") or {}
    out = [f"{k}{' (required)' if k in required else ''}" for k in props]
    # a required name the schema does not define is an argument the model must give too
    undeclared = required.keys() - props.keys() if isinstance(props, dict) else set()
    if undeclared:
        out += [f"{k} (required)" for k in required if k in undeclared]
    if not open_names:
        return out
    bare = not out  # "the tool takes no arguments" only when it is closed
    named = schema.get("patternProperties")
    if isinstance(named, dict):
        out += [f"names matching {_shown(p)}" for p in itertools.islice(named, _MAX_NAMES)]
    if bare and schema.get("additionalProperties", True) is not False:
        out.append("any other name" if out else "any name")
    return out


# -- exactly a JSON Schema ----------------------------------------------------------------------

_PLAIN_TOP = frozenset({
    "type", "properties", "required", "additionalProperties", "title", "description",
    "$schema", "$comment", "examples",
})
_MAX_PROBLEM = 300


_ENUM_KEYS = _INERT | {"enum"}
_ARRAY_KEYS = _INERT | {"items"}
_NESTED_TOP = _PLAIN_TOP - {"$schema"}
ExactPlan = tuple[dict[str, tuple[type, ...]], tuple[str, ...], dict[str, Callable[[Any], bool]]]
"""`_exact_plan`'s answer: each property's accepted Python types, the required names, and
the further check of some properties (an array's items, an enum's value, an object's keys)."""


def _exact_plan(schema: Mapping[str, Any]) -> ExactPlan | None:
    """`scalar_plan` for a schema whose top level says nothing else that could refuse, where
    a property may also be an array of plain scalars (``items`` and inert keywords only), a
    string enum, or an object that has such a plan itself: the shapes of most tool
    definitions, whose calls then need no validator (building one for a schema seen first
    costs 0.05-0.3 ms, its check 20 µs)."""
    if schema.get("type") != "object" or not schema.keys() <= _PLAIN_TOP:
        return None
    if not isinstance(schema.get("additionalProperties", True), bool):
        return None
    props = schema.get("properties") or {}
    # (nothing `unread` looks for can pass the keywords allowed here, at any depth)
    if not isinstance(props, dict) or not _ROOT_RULES.isdisjoint(schema):
        return None  # the root's own refs and branches are the checker's
    kinds: dict[str, tuple[type, ...]] = {}
    inner: dict[str, Callable[[Any], bool]] = {}
    for key, sub in props.items():
        if not isinstance(sub, dict):
            return None
        t = sub.get("type")
        if sub.keys() <= _INERT:  # a plain scalar, as `scalar_plan` has it
            if not isinstance(t, str) or t not in _SCALARS:
                return None
            kinds[key] = _SCALARS[t]
        elif "enum" in sub and sub.keys() <= _ENUM_KEYS:
            members = sub["enum"]
            if t not in (None, "string") or not isinstance(members, list):
                return None
            # a string is valid when it equals a string member (JSON equality is exact
            # there); any other value is left to the validator
            kinds[key] = (str,)
            inner[key] = frozenset(m for m in members if type(m) is str).__contains__
        elif t == "array" and "items" in sub and sub.keys() <= _ARRAY_KEYS:
            items = sub["items"]
            if not isinstance(items, dict) or not items.keys() <= _INERT:
                return None
            item_type = items.get("type")
            if not isinstance(item_type, str) or item_type not in _SCALARS:
                return None
            kinds[key] = (list,)
            inner[key] = functools.partial(_items_are, _SCALARS[item_type])
        elif t == "object" and sub.keys() <= _NESTED_TOP:
            nested = _exact_plan(sub)
            if nested is None:
                return None
            kinds[key] = (dict,)
            inner[key] = functools.partial(_fits, nested)
        else:
            return None
    required = schema.get("required") or []
    if not isinstance(required, list):  # draft 3's boolean ``required``: the validator's
        return None
    return kinds, tuple(r for r in required if isinstance(r, str)), inner


def _items_are(kinds: tuple[type, ...], items: list[Any]) -> bool:
    return all(type(item) in kinds for item in items)


def _fits(plan: ExactPlan, args: dict[str, Any]) -> bool:
    """Whether ``plan`` accepts ``args`` as they are (a dict): else the validator decides."""
    kinds, required, inner = plan
    for key, value in args.items():
        expected = kinds.get(key)
        if expected is None or type(value) not in expected:
            return False
    return all(key in args for key in required) and _inner_ok(inner, args)


def _inner_ok(inner: dict[str, Callable[[Any], bool]], args: dict[str, Any]) -> bool:
    """Whether the arrays, enums and objects of ``args`` pass their further checks (their
    own types already have)."""
    for key, check in inner.items():
        value = args.get(key, _MISSING)
        if value is not _MISSING and not check(value):
            return False
    return True


def _fresh(value: Any) -> Any:
    """A copy of JSON-shaped containers, so a tool never changes the model's stored call."""
    if type(value) is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if type(value) is list:
        return [_fresh(v) for v in value]
    return value


def _has_null(value: Any) -> bool:
    """Whether a ``null`` is anywhere in ``value`` (a strict-mode "not given" may be nested)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if item is None:
            return True
        if type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


class _Checked:
    """A checked schema: its validator (built on first use), exact plan and allowed names."""

    __slots__ = ("_cls", "_source", "_validator", "allowed", "plan")

    def __init__(
        self, cls: Any, source: Any, plan: ExactPlan | None, allowed: list[str]
    ) -> None:
        self._cls = cls
        self._source = source
        """The schema, or its JSON text (a private copy, parsed when the validator is made)."""
        self._validator: Any = None
        self.plan = plan
        self.allowed = allowed

    def validator(self) -> Any:
        """The jsonschema validator: patterns matched by RE2, a $ref resolved inside the schema
        only, nothing fetched. Made on first use: a call whose arguments the plan accepts
        never needs it, and a tool built per request is often called once."""
        validator = self._validator
        if validator is None:  # two threads may both build one: either is the same
            source = self._source
            schema = json.loads(source) if isinstance(source, str) else source
            cls = self._cls
            if cls is None:  # a plain schema's: 2020-12
                from jsonschema import Draft202012Validator

                cls = Draft202012Validator
            validator = _schema_rules.validator_class(cls)(
                schema, registry=_schema_rules.local_registry()
            )
            self._validator = validator
        return validator


_CHECKED: dict[str, _Checked] = {}
"""Checked schemas by their JSON text: an agent built per request (or per task) from the same
definitions checks each schema once per process, not once per build (the check and the
validator cost tens of µs a schema, most of building a tool)."""
_CHECKED_MAX = 1024
_CHECKED_LOCK = threading.Lock()
_KEY = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode
"""``json.dumps(schema, allow_nan=False, separators=(",", ":"))`` without making an encoder
per call."""


def schema_key(schema: Mapping[str, Any]) -> str | None:
    """The schema's JSON text, or None when it holds anything but JSON (never cached then)."""
    try:
        return _KEY(schema)
    except (TypeError, ValueError):
        return None


_KNOWN: dict[bytes, tuple[str, bool]] = {}
"""A schema's exact serialisation → its JSON text, and whether that text parses back to it."""
_KNOWN_BYTES = 64 * 1024
"""Schemas larger than this (a tool's is a few KiB) are not remembered by their bytes."""


def keyed_copy(schema: Mapping[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The schema's JSON text and a private copy of it, parsed from that text.

    Tools rebuilt from the same definitions (per request, per run) give the same schemas again:
    those are recognised by their `marshal` bytes, a C pass several times cheaper than the JSON
    text, and copied from them. The bytes are exact (``1``, ``1.0`` and ``True``, a list and a
    tuple, all differ), so equal bytes mean the same types and values in the same order, the
    same JSON text and the same copy. Anything but plain builtin data (a subclass, an object) is
    refused by `marshal` and takes the JSON path alone.

    Returns:
        ``(text, copy)``: `schema_key`'s text (None when the schema is not JSON), and the copy,
        None when the text would not give the same schema back (a tuple, a key that is not a
        string): the caller then copies the schema otherwise.
    """
    try:
        # version 2: no shared references (a part given twice is copied twice)
        packed: bytes | None = marshal.dumps(schema, 2)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # not builtin data, or nested past marshal's own limit
        packed = None
    if packed is not None:
        known = _KNOWN.get(packed)
        if known is not None:
            text, parses_back = known
            return text, marshal.loads(packed) if parses_back else None
    key = schema_key(schema)
    if key is None:
        return None, None
    parsed = json.loads(key)
    copy = parsed if type(parsed) is dict and parsed == schema else None
    if packed is not None and len(packed) <= _KNOWN_BYTES:  # never kept huge, however many
        with _CHECKED_LOCK:
            if len(_KNOWN) >= _CHECKED_MAX:
                _KNOWN.pop(next(iter(_KNOWN)), None)
            _KNOWN[packed] = (key, copy is not None)
    return key, copy


def _checked_schema(tool: str, schema: Mapping[str, Any], key: str | None) -> _Checked:
    """Check ``schema`` and take its plan; its validator is built from ``key`` (its JSON text)
    when given, else from ``schema`` itself.

    Raises:
        ToolDefinitionError: the schema is not a valid JSON Schema, or breaks the rules.
    """
    if plain_schema(schema):
        # one walk says both checks below would pass (on the copy too: JSON's own types only,
        # which the copy keeps); the validator (2020-12's) waits for its first use
        source = key if key is not None else schema
        return _Checked(None, source, _exact_plan(schema), _allowed(schema))
    if key is not None:  # checked as JSON, as the validator's private copy will read it
        schema = json.loads(key)
    check_schema_rules(tool, schema)
    cls = _meta_checked(tool, schema)
    checked = _Checked(cls, schema, _exact_plan(schema), _allowed(schema))
    checked.validator()  # any other schema's validator is made now: a failure is the tool's
    return checked


def _error_lines(errors: Any) -> list[str]:
    """jsonschema's errors, one line each with its JSON path, in the order of the paths."""
    lines: list[str] = []
    for err in sorted(errors, key=lambda e: list(e.absolute_path)):
        message = err.message
        if err.validator == "enum" and isinstance(err.validator_value, list):
            message = f"{_shown(err.instance)} is not {one_of(err.validator_value)}"
        elif err.validator in ("anyOf", "oneOf") and err.context:
            message = f"{message}; {_forms(err)}"
        text = f"{err.json_path}: {message}"
        lines.append(text if len(text) <= _MAX_PROBLEM else text[: _MAX_PROBLEM - 1] + "…")
    return lines


def _forms(err: Any) -> str:
    """What each branch of a failed ``anyOf``/``oneOf`` missed (its first error), so that
    the model reads what would fit, not only that nothing did."""
    firsts: dict[Any, str] = {}
    for sub in err.context:
        branch = sub.relative_schema_path[0] if sub.relative_schema_path else None
        if branch not in firsts:
            where = "" if sub.json_path == err.json_path else f"{sub.json_path}: "
            firsts[branch] = where + sub.message
    return "the forms it may take, and what each missed: " + "; ".join(
        f"{i}. {text}" for i, text in enumerate(firsts.values(), 1))


def value_problems(tool: str, schema: Mapping[str, Any], value: Any) -> list[str]:
    """Where ``value`` breaks ``schema`` (a tool's output schema, say), one line each with its
    JSON path; the schema is checked and its validator made once, as for `SchemaArguments`
    (patterns matched by RE2, references resolved inside the schema only).

    Raises:
        ToolDefinitionError: the schema breaks the rules of `check_schema_rules` or its
            meta-schema.
    """
    checked = SchemaArguments(tool, schema, accepted=None)._checked
    return _bounded_errors(checked.validator(), value)


def _bounded_errors(validator: Any, value: Any) -> list[str]:
    """jsonschema's errors for ``value`` as lines, its work bounded by the value's size (as
    the lax checker's, `_Budget`): branches that each descend multiply it."""
    try:
        errors = _schema_rules.within_budget(
            lambda: validator.iter_errors(_schema_rules.briefly(value)), _Budget(value).left
        )
    except (_schema_rules.TooComplex, RecursionError):
        # RecursionError: a loop through a keyword the rules do not know of yet; the call is
        # refused with a reason, not failed with Python's
        return ["$: " + _TOO_COMPLEX]
    return _error_lines(errors)


class SchemaArguments:
    """Checks a call's arguments against exactly one JSON Schema.

    The schema's dialect is its ``$schema``, JSON Schema 2020-12 when it names none; nothing
    is coerced (``"2"`` is not an integer) and the tool receives a copy of exactly what the
    model sent, but for ``null`` given to an optional field the schema does not let be null:
    that field counts as not given (where the schema refused it with the ``null``), as for a
    function's own signature. Every problem is reported with its JSON path (``$.items[0].qty``).

    Args:
        tool: the tool's name, for messages.
        schema: the object schema of the arguments.
        accepted: the keyword names the function accepts, ``None`` when it takes
            ``**kwargs``: an argument it cannot take is refused by name, even where the schema
            allows more properties.

    Raises:
        ToolDefinitionError: the schema is not a valid JSON Schema.
    """

    def __init__(
        self, tool: str, schema: Mapping[str, Any], *, accepted: frozenset[str] | None,
        key: str | None = None,
    ) -> None:
        self.tool = tool
        self.schema = schema
        self.accepted = accepted
        if key is None:  # given by a caller that has just made it (`schema_key(schema)`)
            key = schema_key(schema)
        found = _CHECKED.get(key) if key is not None else None
        if found is not None:
            checked = found
        elif key is None:
            checked = _checked_schema(tool, schema, None)
        else:
            # the validator is built on a private copy (parsed from the key): a later change
            # to this tool's schema cannot reach the validator of another tool with the same
            # schema
            checked = _checked_schema(tool, schema, key)
            with _CHECKED_LOCK:  # tools are built in threads too
                if len(_CHECKED) >= _CHECKED_MAX:
                    _CHECKED.pop(next(iter(_CHECKED)), None)
                _CHECKED[key] = checked
        self._checked = checked
        self._plan = checked.plan

    @property
    def _allowed(self) -> list[str]:
        """The arguments an error names (read only when there is one)."""
        if self.accepted is not None:  # the function's names bound what the schema leaves open
            return _allowed(self.schema, open_names=False)
        return self._checked.allowed

    def validate(self, args: Any) -> dict[str, Any]:
        """The arguments, copied, when the schema accepts them.

        Raises:
            ToolInputError: listing every problem with its JSON path.
        """
        args = decode_container(args)
        if not isinstance(args, dict):
            raise input_error(
                self.tool,
                [f"$: arguments must be a JSON object, got {type(args).__name__} {_shown(args)}"],
                self._allowed,
            )
        non_finite = non_finite_problem(args)
        if non_finite is not None:  # before the plan: a NaN is a float, and passes bounds
            raise input_error(self.tool, [non_finite], self._allowed)
        plan = self._plan
        if plan is not None:
            kinds, required, inner = plan
            for key, value in args.items():
                expected = kinds.get(key)
                if expected is None or type(value) not in expected:
                    break
            else:
                if all(key in args for key in required):
                    if not inner:
                        return dict(args)  # scalars only: a shallow copy is a copy
                    if _inner_ok(inner, args):
                        return _fresh(args)  # the arrays copied too
        problems: list[str] = []
        accepted = self.accepted
        if accepted is not None:
            problems += [
                f"unknown argument {key!r}; the tool takes {', '.join(sorted(accepted)) or 'none'}"
                for key in args if key not in accepted
            ]
        errors = _bounded_errors(self._checked.validator(), args)
        if errors and not problems and _has_null(args):
            # ``null`` for an optional field that is not nullable means "not given" (OpenAI's
            # strict mode makes every field required and nullable, at every level), as for a
            # function's own signature: the schema decides again without it, only where it
            # refused
            given = drop_default_nulls(args, self.schema, self.schema)
            if given != args:
                left = _bounded_errors(self._checked.validator(), given)
                if not left:
                    return _fresh(given)  # type: ignore[no-any-return]
                errors = left  # the nulls count as not given: not named as problems
        problems += errors
        if problems:
            raise input_error(self.tool, problems, self._allowed)
        return _fresh(args)  # type: ignore[no-any-return]
