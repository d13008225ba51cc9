"""What a tool's JSON Schema may use, checked once when the tool is made.

A schema may come from outside: an OpenAI definition, an MCP server's tool list, a skill. Two
keywords of JSON Schema reach past the document. ``$ref``: jsonschema's default registry fetches
any URL it names (``http://``, ``file://``) with no timeout. ``pattern``: Python's `re`
backtracks, so ``^(a+)+$`` against ``'a' * 40 + '!'`` takes years. Here a reference resolves only
inside the schema itself (``#/…``, ``$defs``/``definitions``, the ``$id``\\ s (draft 4's ``id``)
and anchors it declares, each read as its dialect reads it) and nothing is ever fetched; a
pattern is RE2's syntax, matched in linear time (no backreferences, no lookaround).
`schema_problems` names every reference or pattern that breaks these rules, for a
`ToolDefinitionError`; `validator_class` gives the jsonschema validator that matches with RE2,
retrieves nothing, hashes ``enum`` and ``uniqueItems``, decides ``multipleOf`` in decimal
(draft 3's ``divisibleBy`` too) and, run under `within_budget`, bounds its work by the value's
size.
Every check of a value against a schema goes through it: a tool's arguments, an MCP tool's
results, a person's edited arguments (the runtime's, hence a module of the bottom layer).
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal, localcontext
from types import MappingProxyType
from typing import Any
from urllib.parse import urldefrag, urljoin

import re2

from jianmu._json import nests_within
from jianmu.errors import SchemaBudgetError

__all__ = (
    "MAX_INT_BITS",
    "MAX_NESTING",
    "UNFOLLOWED",
    "PatternError",
    "followed", "format_checker", "local_registry", "meta_check", "meta_validator_class",
    "named_patterns", "nesting_problem", "not_json_number", "pattern_search", "schema_problems",
    "validator_class",
)

PatternError = re2.error
"""What RE2 raises for a pattern it does not accept."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported by us, not printed to stderr
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_MAX_NAMED = 200  # how much of a reference or pattern an error quotes
_IN_PLACE = ("anyOf", "allOf", "oneOf", "not", "if", "then", "else", "dependentSchemas",
             "dependencies", "extends", "disallow", "type")
"""Keywords whose schemas check the value itself, in every dialect jsonschema knows: draft 4 to
7's ``dependencies`` (2019-09 renamed it ``dependentSchemas``), draft 3's ``extends``,
``disallow`` and schemas in ``type``."""
_SCHEMA_MAPS_IN_PLACE = frozenset({"dependentSchemas", "dependencies"})
_NOT_JSON = "NaN"  # noted by the walk: a value JSON cannot carry
_UNEVALUATED = frozenset({"unevaluatedProperties", "unevaluatedItems"})
_BRANCHES = frozenset({"$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "if",
                       "dependentSchemas"})
_NOTED = _UNEVALUATED | _BRANCHES | {"patternProperties"}
"""Keywords the walk notes anywhere in a schema (every object counts, see `_walk`)."""
_MAX_IN_PLACE = 10_000
"""How many schemas one value may be checked against, through anyOf/allOf/$ref and the like,
before the check descends into a property or an item: a chain of anyOf's of four refs each is
4**depth checks of the same value, on the event loop."""


_HEX4 = frozenset("0123456789abcdefABCDEF")


def re2_syntax(pattern: str) -> str:
    """A JSON Schema (ECMA-262) ``pattern`` as RE2 reads it: its ``\\uXXXX`` and ``\\u{...}``
    escapes, which RE2 lacks, as ``\\x{...}`` (a surrogate pair as the one character it
    makes); anything else as written."""
    if "\\u" not in pattern:
        return pattern
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        if pattern[i + 1] != "u":
            out.append(pattern[i : i + 2])  # an escaped character, `\\\\` included
            i += 2
            continue
        code, end = _escaped_code(pattern, i)
        if code is None:
            out.append(pattern[i : i + 2])  # not an escape RE2 can take: let it refuse it
            i += 2
            continue
        if 0xD800 <= code < 0xDC00:  # a high surrogate: a low one after it makes one character
            low, after = _escaped_code(pattern, end)
            if low is not None and 0xDC00 <= low < 0xE000:
                code, end = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00), after
        out.append(f"\\x{{{code:X}}}")
        i = end
    return "".join(out)


def _escaped_code(pattern: str, i: int) -> tuple[int | None, int]:
    """The code point of a ``\\uXXXX`` or ``\\u{...}`` escape at ``i``, and where it ends."""
    if pattern.startswith("\\u{", i):
        close = pattern.find("}", i + 3)
        digits = pattern[i + 3 : close] if close > 0 else ""
        if digits and len(digits) <= 6 and set(digits) <= _HEX4 and int(digits, 16) <= 0x10FFFF:
            return int(digits, 16), close + 1
        return None, i
    digits = pattern[i + 2 : i + 6]
    if len(digits) == 4 and set(digits) <= _HEX4 and pattern.startswith("\\u", i):
        return int(digits, 16), i + 6
    return None, i


@functools.lru_cache(maxsize=2048)
def _compiled(pattern: str) -> Any:
    return re2.compile(re2_syntax(pattern), _OPTIONS)


def _searchable(text: str) -> str:
    """``text`` as RE2 can read it: UTF-8, so a lone surrogate (which JSON can carry, as
    ``\\ud800``) is read as U+FFFD; it matches what any other unknown character would."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def pattern_search(pattern: str, text: str) -> bool:
    """Whether RE2 finds ``pattern`` in ``text`` (linear time; compiled once per pattern).

    Raises:
        re2.error: ``pattern`` is not RE2 syntax (`schema_problems` refuses it beforehand).
    """
    compiled = _compiled(pattern)
    try:
        return compiled.search(text) is not None
    except UnicodeEncodeError:
        return compiled.search(_searchable(text)) is not None


def _retrieve_nothing(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    # nothing outside the schema itself is ever fetched
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


@functools.cache
def local_registry() -> Any:
    """The `referencing.Registry` every schema validator uses: it retrieves nothing."""
    from referencing import Registry

    return Registry(retrieve=_retrieve_nothing)  # type: ignore[call-arg]


def _quoted(text: str) -> str:
    return repr(text if len(text) <= _MAX_NAMED else text[:_MAX_NAMED] + "…")


def _id_of(id_of: Callable[[Any], Any], item: Mapping[str, Any]) -> str | None:
    """The base URI ``item`` sets, as its dialect reads it (draft 4's ``id``, ``$id`` beside a
    ``$ref`` ignored before 2019-09), so a reference resolves here as the validator will."""
    try:
        ident = id_of(item)
    except (AttributeError, TypeError):  # an id that is not a string: the meta-schema refuses
        return None
    return ident if isinstance(ident, str) else None


def _walk(node: Any, base: str, refs: list[tuple[Any, str, str, str]], patterns: list[str],
          keywords: set[str], id_of: Callable[[Any], Any]) -> None:
    # Every object in the document counts as a schema: a pointer ($ref: "#/x/y") can make any
    # of them one, whatever keyword holds it.
    stack: list[tuple[Any, str]] = [(node, base)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, list):
            if any(not_json_number(v) for v in item if type(v) in (float, int)):
                keywords.add(_NOT_JSON)
            stack.extend((v, where) for v in item if isinstance(v, (dict, list)))
            continue
        if not isinstance(item, dict):
            continue
        if any(not_json_number(v) for v in item.values() if type(v) in (float, int)):
            keywords.add(_NOT_JSON)
        ident = _id_of(id_of, item)
        if ident is not None:
            where = urljoin(where, ident)
        for key in _REFS:
            ref = item.get(key)
            if isinstance(ref, str):
                refs.append((item, key, ref, where))
        pattern = item.get("pattern")
        if isinstance(pattern, str):
            patterns.append(pattern)
        named = item.get("patternProperties")
        if isinstance(named, dict):
            patterns.extend(k for k in named if isinstance(k, str))
            keywords.add("patternProperties")
        keywords.update(k for k in _NOTED if k in item)
        # only containers go on the stack: most values are strings and numbers
        stack.extend((v, where) for v in item.values() if isinstance(v, (dict, list)))


MAX_INT_BITS = 14_000
"""How large an integer a schema may hold (about 4,200 digits): Python writes no int past
4,300 digits as text, so a larger one (a YAML ``0xfff…`` in a SKILL.md) failed every request
offering the tool and raised ValueError out of a call's check."""


def not_json_number(value: float | int) -> bool:
    """Whether ``value`` is a number no JSON text carries: NaN, an infinity, an integer past
    `MAX_INT_BITS`."""
    if type(value) is int:
        return value.bit_length() > MAX_INT_BITS
    return not math.isfinite(value)


MAX_NESTING = 128
"""How deep a schema's JSON may nest, counting every object and array (a property's schema
under ``properties`` is two levels down): about 60 levels of nested properties, far past any
real tool's. Every walk of a schema here, jsonschema's own included, recurses, so a deeper one
would end in a `RecursionError` (or end one later, at a call's validation, deep in a run)."""


def nesting_problem(schema: Any) -> str | None:
    """Why ``schema`` nests too deeply (or loops back into itself), or None; a walk with a
    stack of its own (`nests_within`), so it never runs out of Python's."""
    if nests_within(schema, MAX_NESTING):
        return None
    return (f"the schema nests deeper than {MAX_NESTING} levels of objects and arrays "
            "(or refers to itself as a Python object)")


def schema_problems(schema: Mapping[str, Any]) -> list[str]:
    """What in ``schema`` breaks the rules of this module, one line each; ``[]`` when nothing.

    A schema nests at most `MAX_NESTING` levels deep (checked first: the other rules walk it);
    its ``$schema``, if any, is a string;
    a ``$ref`` (or ``$dynamicRef``) must resolve inside ``schema``; a ``pattern`` or a
    ``patternProperties`` name must compile with RE2; ``patternProperties`` cannot be combined
    with ``unevaluatedProperties`` (jsonschema matches that pair with Python's `re`), nor
    ``unevaluated*`` with a ``$ref`` or a branch (anyOf ...: exponential time); no value
    is NaN or Infinity (JSON has no words for them: a model API refuses the request).
    """
    too_deep = nesting_problem(schema)
    if too_deep is not None:
        return [too_deep]
    dialect = schema.get("$schema", "")
    if not isinstance(dialect, str):  # jsonschema looks it up as a key, and fails
        return [f"$schema must be the URI of a JSON Schema dialect, got {_quoted(repr(dialect))}"]
    from referencing.jsonschema import DRAFT202012, specification_with

    refs: list[tuple[Any, str, str, str]] = []
    patterns: list[str] = []
    keywords: set[str] = set()
    dialect_of = specification_with(dialect, default=DRAFT202012) if dialect else DRAFT202012
    _walk(schema, "", refs, patterns, keywords, dialect_of.id_of)
    problems: list[str] = []
    for pattern in dict.fromkeys(patterns):
        try:
            _compiled(pattern)
        except re2.error as exc:
            problems.append(
                f"pattern {_quoted(pattern)} is not RE2 syntax (no backreferences or "
                f"lookaround): {_reason(exc)}"
            )
    if _NOT_JSON in keywords:
        problems.append(
            "the schema holds NaN or Infinity (which JSON has no words for) or an integer "
            "past 4,000 digits (which Python writes as no text): a model API refuses every "
            "request that offers the tool, or none can be sent"
        )
    unevaluated = sorted(keywords & _UNEVALUATED)
    branches = sorted(keywords & _BRANCHES)
    if unevaluated and branches:
        problems.append(
            f"{' and '.join(unevaluated)} cannot be combined with {', '.join(branches)}: to "
            "find what was evaluated, jsonschema validates every branch again at every level "
            "(arguments 16 levels deep took hours); use additionalProperties"
        )
    if {"patternProperties", "unevaluatedProperties"} <= keywords:
        problems.append("patternProperties cannot be combined with unevaluatedProperties")
    if refs:
        found, ref_problems = _resolved(schema, refs)
        problems += ref_problems
        if not problems:
            targets: dict[int, list[Any]] = {}
            for (node, _key), target in found.items():
                targets.setdefault(node, []).append(target)
            problems += _in_place_problems(schema, targets)
        _remember_targets(schema, found)
    return problems


def _resolved(
    schema: Mapping[str, Any], refs: list[tuple[Any, str, str, str]]
) -> tuple[dict[tuple[int, str], Any], list[str]]:
    """What each of ``refs`` (`_walk`'s) names in ``schema``, by the id of the object that
    holds it and its keyword, resolved as the validator resolves it; and why any names
    nothing in ``schema``."""
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS
    from referencing import Resource
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    try:
        resource = Resource.from_contents(schema, default_specification=DRAFT202012)
        resolver = SPECIFICATIONS.combine(local_registry()).resolver_with_root(resource)
    except Exception as exc:  # an unknown dialect or a malformed $id
        return {}, [f"the schema's references cannot be resolved: {exc}"]
    found: dict[tuple[int, str], Any] = {}
    problems: list[str] = []
    for node, key, ref, base in refs:
        try:
            found[id(node), key] = resolver.lookup(_target(base, ref)).contents
        except Unresolvable:
            problems.append(
                f"$ref {_quoted(ref)} does not point inside the schema; only references "
                "to the schema itself (#/…, $defs, its own $id) are followed, nothing is "
                "fetched"
            )
        except Exception as exc:  # a malformed pointer or URI
            problems.append(f"$ref {_quoted(ref)} cannot be resolved: {exc}")
    return found, problems


UNFOLLOWED: Mapping[str, Any] = MappingProxyType({})
"""What `followed` gives for a reference that names nothing in its schema."""

_TARGETS: dict[int, tuple[Any, dict[tuple[int, str], Any]]] = {}
_TARGETS_MAX = 512
_TARGETS_LOCK = threading.Lock()


def _remember_targets(root: Any, found: dict[tuple[int, str], Any]) -> None:
    with _TARGETS_LOCK:
        if len(_TARGETS) >= _TARGETS_MAX:
            _TARGETS.pop(next(iter(_TARGETS)), None)
        _TARGETS[id(root)] = (root, found)  # the root is kept: its id stays its own


def _targets_of(root: Any) -> dict[tuple[int, str], Any]:
    """Every reference of ``root`` resolved (`_resolved`); none when ``root`` breaks the
    rules, so that nothing of it is followed."""
    try:
        if nesting_problem(root) is not None or not isinstance(root.get("$schema", ""), str):
            return {}
        from referencing.jsonschema import DRAFT202012, specification_with

        dialect = root.get("$schema", "")
        dialect_of = specification_with(dialect, default=DRAFT202012) if dialect else DRAFT202012
        refs: list[tuple[Any, str, str, str]] = []
        _walk(root, "", refs, [], set(), dialect_of.id_of)
        return _resolved(root, refs)[0]
    except Exception:  # a schema no check has seen (a hand-written tool's): nothing followed
        return {}


def followed(root: Mapping[str, Any], node: Mapping[str, Any], key: str) -> Any:
    """The schema that ``node``'s reference under ``key`` (``$ref``, ``$dynamicRef``,
    ``$recursiveRef``) names in ``root``, as the validator and the check of the tool's making
    resolve it (anchors, ``$id``\\ s, ``#``, escaped pointers); `UNFOLLOWED` when it names
    nothing there. Resolved once per root."""
    known = _TARGETS.get(id(root))
    if known is None or known[0] is not root:
        found = _targets_of(root)
        _remember_targets(root, found)
    else:
        found = known[1]
    return found.get((id(node), key), UNFOLLOWED)


def _target(base: str, ref: str) -> str:
    """The URI ``ref`` names from a schema whose base is ``base``, as `referencing` finds it:
    a fragment alone (``#/definitions/a``) stays in the base's resource, whatever its scheme
    (`urljoin` would drop a ``urn:`` base, so the check looked in another resource than the
    validator)."""
    if not base:
        return ref
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    return urljoin(base, ref)


def _in_place_children(node: Any, targets: Mapping[int, list[Any]]) -> list[Any]:
    """The schemas ``node`` checks the same value against: its $ref targets, anyOf, not, …"""
    if not isinstance(node, dict):
        return []
    out = list(targets.get(id(node), ()))
    for key in _IN_PLACE:
        sub = node.get(key)
        if isinstance(sub, list):
            out += sub
        elif isinstance(sub, dict):
            out += sub.values() if key in _SCHEMA_MAPS_IN_PLACE else [sub]
    return [c for c in out if isinstance(c, dict)]


def _in_place_problems(schema: Mapping[str, Any], targets: Mapping[int, list[Any]]) -> list[str]:
    """A schema that refers to itself without descending into the value (jsonschema recurses
    forever), or whose refs and anyOf's multiply to more than `_MAX_IN_PLACE` checks."""
    nodes: list[Any] = []
    stack: list[Any] = [schema]
    while stack:  # every object of the document
        item = stack.pop()
        if isinstance(item, dict):
            nodes.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    size: dict[int, int] = {}
    pending: set[int] = set()
    for start in nodes:
        if id(start) in size:
            continue
        work: list[tuple[Any, bool]] = [(start, False)]
        while work:  # depth first, without recursion: a schema may nest thousands deep
            node, done = work.pop()
            key = id(node)
            children = _in_place_children(node, targets)
            if done:
                pending.discard(key)
                total = 1 + sum(size[id(c)] for c in children)
                size[key] = min(total, _MAX_IN_PLACE + 1)
                continue
            if key in size:
                continue
            if key in pending:
                return ["the schema refers to itself without descending into a property or "
                        "an item (through $ref, anyOf, allOf, oneOf or not): checking a value "
                        "would never end"]
            pending.add(key)
            work.append((node, True))
            for child in children:
                if id(child) in pending:
                    return ["the schema refers to itself without descending into a property "
                            "or an item (through $ref, anyOf, allOf, oneOf or not): checking "
                            "a value would never end"]
                if id(child) not in size:
                    work.append((child, False))
        if size[id(start)] > _MAX_IN_PLACE:
            return [f"the schema checks one value against more than {_MAX_IN_PLACE:,} schemas "
                    "(through $ref, anyOf, allOf or oneOf); make it simpler"]
    return []


def _reason(exc: BaseException) -> str:
    text = exc.args[0] if exc.args else exc
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)


# -- the jsonschema keywords that match patterns, with RE2 ----------------------------------


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not pattern_search(pattern, instance):
        shown = instance if len(instance) <= 80 else instance[:80] + "…"
        yield ValidationError(f"{shown!r} does not match {_quoted(pattern)}")


class _Patterns:
    """Which of a ``patternProperties``' patterns a key matches, in one pass over the key: a
    search per pattern and key made 200 patterns by a model's 20,000 keys 25 s on the event
    loop (an RE2 set, checked by one alternation of them all: a set that runs out of memory
    says "none", and then each pattern is searched)."""

    __slots__ = ("_any", "_set", "patterns")

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = patterns
        self._set: Any = None
        self._any: Any = None
        if not patterns:
            return
        try:
            found = re2.Set.SearchSet(_OPTIONS)
            for pattern in patterns:
                found.Add(re2_syntax(pattern))
            found.Compile()
            self._any = re2.compile("|".join(f"(?:{re2_syntax(p)})" for p in patterns),
                                    _OPTIONS)
            self._set = found
        except re2.error:  # too large for one program: a search per pattern
            self._set = self._any = None

    def matching(self, key: str) -> list[int]:
        """The indices of the patterns found in ``key``."""
        if not self.patterns:
            return []
        key = _searchable(key)
        if self._set is not None:
            hits = self._set.Match(key)
            if hits is not None:
                return sorted(hits)
            if self._any.search(key) is None:
                return []
        _spend(len(self.patterns))  # a search per pattern: the check's budget pays for each
        return [i for i, p in enumerate(self.patterns) if pattern_search(p, key)]


@functools.lru_cache(maxsize=256)
def _patterns(patterns: tuple[str, ...]) -> _Patterns:
    return _Patterns(patterns)


def named_patterns(named: Any) -> _Patterns:
    """The patterns of a ``patternProperties`` (``named``), to match keys against at once."""
    return _patterns(tuple(named) if isinstance(named, dict) else ())


def _pattern_properties(
    validator: Any, named: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    found = named_patterns(named)
    for key, value in instance.items():
        for index in found.matching(key):
            pattern = found.patterns[index]
            yield from validator.descend(value, named[pattern], path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    found = named_patterns(schema.get("patternProperties", {}))
    return [key for key in instance if key not in properties and not found.matching(key)]


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        names = sorted(extras, key=str)
        shown = ", ".join(repr(e) for e in names[:10]) + (", …" if len(names) > 10 else "")
        verb = "was" if len(names) == 1 else "were"
        yield ValidationError(
            f"Additional properties are not allowed ({shown} {verb} unexpected)"
        )


def _json_key(value: Any) -> Any:
    """A hashable key equal for JSON values JSON Schema calls equal: ``1`` and ``1.0`` one
    key, ``true`` and ``1`` two, objects whatever their keys' order, arrays in order."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)  # 1 == 1.0 and hash(1) == hash(1.0)
    if isinstance(value, (list, tuple)):  # a tuple is an array, as jsonschema reads it
        return ("array", tuple(_json_key(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _json_key(v)) for k, v in value.items()))
    return (type(value).__name__, value)


class PerObject:
    """``make(obj)`` remembered per object, by identity, and per purpose (``what``): the object
    is kept so that its id stays its own, the oldest let go past ``size``."""

    def __init__(self, size: int) -> None:
        self._made: dict[tuple[int, str], tuple[Any, Any]] = {}
        self._size = size
        self._lock = threading.Lock()

    def __call__(self, values: Any, what: str, make: Callable[[Any], Any]) -> Any:
        found = self._made.get((id(values), what))
        if found is not None and found[0] is values:
            return found[1]
        made = make(values)
        with self._lock:
            if len(self._made) >= self._size:
                self._made.pop(next(iter(self._made)), None)
            self._made[id(values), what] = (values, made)
        return made


per_list = PerObject(512)
"""``per_list(values, what, make)``: ``make(values)`` made once per list (or object) and
``what`` (a schema's lists live as long as the schema: an ``enum`` of 200,000 values is walked
once, not once per value checked)."""


def _keys_of(values: list[Any]) -> frozenset[Any] | None:
    try:
        return frozenset(_json_key(v) for v in values)
    except (TypeError, RecursionError):  # not JSON (unhashable), or nested past the stack
        return None


def in_enum(value: Any, values: list[Any]) -> bool:
    """Whether ``value`` is one of ``values`` by JSON Schema's equality, in constant time
    (jsonschema compares with each value in turn: 200,000 values by 1,000 items of a model's
    array held the event loop for 16 s)."""
    keys = per_list(values, "keys", _keys_of)
    if keys is not None:
        try:
            return _json_key(value) in keys
        except (TypeError, RecursionError):
            pass
    return value in values  # not JSON: Python's equality


def json_equal(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are one JSON value (``1`` and ``1.0`` are, ``true`` and ``1``
    are not, nor ``0`` and ``false``): JSON Schema's equality, for ``const``. ``b`` is the
    schema's: an object or array is keyed once, not once per value checked (a 100,000-item
    ``const`` against a model's 200 items was 5 s on the event loop)."""
    try:
        known = per_list(b, "key", _json_key) if isinstance(b, (dict, list)) else _json_key(b)
        return bool(_json_key(a) == known)
    except (TypeError, RecursionError):  # not JSON: Python's equality
        return bool(a == b)


def _enum(validator: Any, values: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    # a list, or the meta-schema refused the schema when the tool was made
    if isinstance(values, list) and not in_enum(instance, values):
        shown = repr(instance)
        yield ValidationError(f"{shown if len(shown) <= 80 else shown[:80] + '…'} is not one "
                              f"of {len(values):,} allowed values")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not unique or not validator.is_type(instance, "array"):
        return
    # jsonschema compares every pair of unhashable items: a model's 50,000 objects took an
    # hour on the event loop; one hash each here
    if _has_duplicate(instance):
        shown = repr(instance)
        shown = shown if len(shown) <= 80 else shown[:80] + "…"
        yield ValidationError(f"{shown} has non-unique elements")


def _has_duplicate(items: list[Any]) -> bool:
    seen: set[Any] = set()
    for item in items:
        key = _json_key(item)
        if key in seen:
            return True
        seen.add(key)
    return False


def _unique_in_schema(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``uniqueItems`` for checking a schema (its ``required``, draft 4's ``enum``), hashed,
    with jsonschema's own message (the schema's own value, quoted whole)."""
    from jsonschema.exceptions import ValidationError

    if unique and validator.is_type(instance, "array") and _has_duplicate(instance):
        yield ValidationError(f"{instance!r} has non-unique elements")


_MAX_DIGITS = 10_000
"""Digits a multipleOf quotient may need; past them a value is no multiple (1e308 by 1e-320
needs 629)."""


def is_multiple(value: int | float, divisor: int | float) -> bool:
    """Whether ``value`` is a whole number of ``divisor``s, in decimal as JSON writes them
    (``0.3`` is three ``0.1``), exactly: jsonschema divided floats, and a model's ``10**400``
    raised OverflowError out of the check."""
    try:
        a, b = Decimal(repr(value)), Decimal(repr(divisor))
        if not (a.is_finite() and b.is_finite()) or b <= 0:
            return False
        if a == 0:
            return True
        digits = max(a.adjusted() - b.adjusted() + 2, 28)
        if digits > _MAX_DIGITS:
            return False
        with localcontext() as context:
            context.prec = digits
            return bool(a % b == 0)
    except (ArithmeticError, ValueError):  # InvalidOperation; a repr past the digits limit
        return False


def _multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "number") and not is_multiple(instance, divisor):
        shown = repr(instance)
        yield ValidationError(f"{shown if len(shown) <= 80 else shown[:80] + '…'} is not a "
                              f"multiple of {divisor!r}")


_MAX_MISSING = 20
"""Missing names one ``required`` (or dependency) lists by name before it says how many more."""


def _names(values: list[Any]) -> frozenset[str]:
    _spend(len(values))  # made again if the cache let it go: the budget pays each time
    return frozenset(v for v in values if isinstance(v, str))


def _missing(
    names: list[Any], instance: Mapping[str, Any], said: Callable[[str], str]
) -> Iterator[Any]:
    """An error for each of ``names`` that ``instance`` lacks (the first `_MAX_MISSING`, then
    how many more), in work that grows with the smaller of the two: jsonschema tried every
    name on every object, and 2,000 required names by a model's 300 empty objects (1 KB) made
    600,000 errors, 2 GB."""
    from jsonschema.exceptions import ValidationError

    wanted = per_list(names, "names", _names)
    _spend(min(len(wanted), len(instance)) + _MAX_MISSING)
    if len(wanted) <= len(instance):
        present = sum(1 for name in wanted if name in instance)
    else:
        present = sum(1 for key in instance if key in wanted)
    lacking = len(wanted) - present
    if lacking <= 0:
        return
    shown = 0
    for name in names:  # meets at most `present` names before `_MAX_MISSING` missing ones
        if isinstance(name, str) and name not in instance:
            yield ValidationError(said(name))
            shown += 1
            if shown == _MAX_MISSING:
                break
    if lacking > shown:
        yield ValidationError(f"… and {lacking - shown:,} more missing")


def _shared_keys(instance: Mapping[str, Any], named: Mapping[str, Any]) -> list[str]:
    """The keys of ``instance`` that ``named`` names, walking the smaller of the two."""
    _spend(min(len(instance), len(named)))
    if len(instance) < len(named):
        return [key for key in instance if key in named]
    return [key for key in named if key in instance]


def _required(validator: Any, required: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if isinstance(required, list) and validator.is_type(instance, "object"):
        yield from _missing(required, instance, lambda name: f"{name!r} is a required property")


def _properties(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
    # jsonschema looked up every property of the schema in every object: 2,000 properties by
    # a model's 2,000 empty objects were 4,000,000 steps the budget never saw
    if not isinstance(properties, dict) or not validator.is_type(instance, "object"):
        return
    for key in _shared_keys(instance, properties):
        yield from validator.descend(instance[key], properties[key], path=key, schema_path=key)


def _depends(key: str, name: str) -> str:
    return f"{name!r} is a dependency of {key!r}"


def _dependent(validator: Any, dependencies: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``dependentRequired``, ``dependentSchemas`` and the older ``dependencies`` (names, a
    name or a schema per property), walking the smaller of the object and the keyword."""
    if not isinstance(dependencies, dict) or not validator.is_type(instance, "object"):
        return
    for key in _shared_keys(instance, dependencies):
        dependency = dependencies[key]
        if isinstance(dependency, str):  # draft 3: one name
            dependency = [dependency]
        if isinstance(dependency, list):
            yield from _missing(dependency, instance, functools.partial(_depends, key))
        else:
            yield from validator.descend(instance, dependency, schema_path=key)


@functools.lru_cache(maxsize=16)
def validator_class(cls: Any) -> Any:
    """The jsonschema validator class ``cls`` (one per dialect), matching patterns with RE2,
    checking ``uniqueItems`` and ``enum`` by hashing (linear time in the value) and
    ``multipleOf`` exactly in decimal (`is_multiple`)."""
    from jsonschema import validators

    ours = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
        "enum": _enum,
        "multipleOf": _multiple_of,
    }
    if "divisibleBy" in cls.VALIDATORS:  # draft 3's name for multipleOf
        ours["divisibleBy"] = _multiple_of
    else:  # draft 3's properties also read a "required" inside each: jsonschema's own
        ours["properties"] = _properties
    for key in ("required", "dependentRequired", "dependentSchemas", "dependencies"):
        if key in cls.VALIDATORS:
            ours[key] = _required if key == "required" else _dependent
    # every keyword counts against the check's budget (`within_budget`)
    extended = validators.extend(
        cls, {key: _counted(fn) for key, fn in {**cls.VALIDATORS, **ours}.items()}
    )
    extended.evolve = _staying(extended.evolve, validator_class)
    extended.JIANMU_MADE_BY = validator_class
    return extended


@functools.lru_cache(maxsize=16)
def meta_validator_class(cls: Any) -> Any:
    """The validator class ``cls`` of a meta-schema, checking a schema as jsonschema does (the
    same errors in the same order) but for ``uniqueItems``, hashed: draft 4's meta-schema wants
    an ``enum``'s values unique, and jsonschema compared every pair (an enum of 8,000 objects,
    a 100 KB schema from an MCP server, took 64 s)."""
    from jsonschema import validators

    extended = validators.extend(cls, {"uniqueItems": _unique_in_schema})
    extended.evolve = _staying(extended.evolve, meta_validator_class)
    extended.JIANMU_MADE_BY = meta_validator_class
    return extended


def meta_check(cls: Any, schema: Any, format_checker: Any = None) -> None:
    """``cls.check_schema(schema, format_checker=...)`` (its meta-schema's default checker
    when None) by `meta_validator_class`: the same first error, ``uniqueItems`` hashed.

    Raises:
        jsonschema.exceptions.SchemaError: the first error, as jsonschema's own check raises.
    """
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    meta = validators.validator_for(cls.META_SCHEMA, default=cls)
    checker = meta.FORMAT_CHECKER if format_checker is None else format_checker
    validator = meta_validator_class(meta)(cls.META_SCHEMA, format_checker=checker)
    for error in validator.iter_errors(schema):
        raise SchemaError.create_from(error)


def _staying(evolve: Callable[..., Any], made: Callable[[Any], Any]) -> Callable[..., Any]:
    """``evolve`` that keeps the rules of ``made`` (a class maker of this module) when a
    subschema names its own ``$schema``: jsonschema then switches to that dialect's stock
    class, and from there a ``pattern`` ran on Python's `re` (``^(a+)+$`` under a nested
    draft-07 ``$schema``: exponential time), with no budget."""

    def staying(self: Any, **changes: Any) -> Any:
        evolved = evolve(self, **changes)
        kind: Any = type(evolved)
        if getattr(kind, "JIANMU_MADE_BY", None) is made:  # no switch: the usual case
            return evolved
        from attrs import fields

        ours = made(kind)  # the dialect it switched to, with the same rules
        return ours(**{f.alias: getattr(evolved, f.name) for f in fields(kind) if f.init})

    return staying


TooComplex = SchemaBudgetError
"""What a check raises when it spends its budget (`within_budget`)."""


_BUDGET: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "jianmu_schema_budget", default=None
)


def _spend(steps: int) -> None:
    """Take ``steps`` from the running check's budget, if it has one.

    Raises:
        TooComplex: the budget ran out.
    """
    budget = _BUDGET.get()
    if budget is not None:
        budget[0] -= steps
        if budget[0] < 0:
            raise TooComplex


def _counted(fn: Callable[..., Any]) -> Callable[..., Any]:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            budget[0] -= 1
            if budget[0] < 0:
                raise TooComplex
        return fn(validator, value, instance, schema)

    return counted


def steps_for(value: Any) -> int:
    """The keyword steps a check of ``value`` may take: 10,000 and 64 per JSON value in it."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return 10_000 + 64 * count


_BRIEF = 80
"""Characters of a value an error message quotes."""


def brief(value: Any, room: int = _BRIEF) -> str:
    """``repr(value)``, at most about ``room`` characters, made without the rest."""
    if isinstance(value, (dict, list)):
        opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
        text = opening
        pairs = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        for key, item in pairs:
            if len(text) >= room:
                return text + "…" + closing
            text += ("" if text == opening else ", ") + (
                "" if key is None else brief(key, room - len(text)) + ": "
            )
            text += brief(item, room - len(text))
        return text + closing
    text = repr(value[: room + 1] if isinstance(value, str) else value)
    return text if len(text) <= room else text[: max(room, 1)] + "…"


class _BriefDict(dict):  # type: ignore[type-arg]
    __slots__ = ()

    def __repr__(self) -> str:
        return brief(self)


class _BriefList(list):  # type: ignore[type-arg]
    __slots__ = ()

    def __repr__(self) -> str:
        return brief(self)


def briefly(value: Any) -> Any:
    """``value`` with each object and array quoted briefly in a message (the same JSON to a
    validator): jsonschema's errors quote the value they are about, and an anyOf at each level
    of a model's 5 MB argument, 100 deep, quoted its whole subtree at each level: 1 GB."""
    kind = type(value)
    if kind is dict:
        return _BriefDict((k, briefly(v)) for k, v in value.items())
    if kind is list:
        return _BriefList(briefly(v) for v in value)
    return value


MAX_ERRORS = 1_000
"""How many errors one check collects; past them it stops looking."""


def within_budget(errors: Callable[[], Iterator[Any]], steps: int) -> list[Any]:
    """The errors ``errors()`` yields (the first `MAX_ERRORS`), its keywords applied at most
    ``steps`` times: an anyOf whose branches each descend into the same child checks a leaf
    40 levels down 2**40 times.

    Raises:
        TooComplex: the budget ran out (the value is refused).
    """
    token = _BUDGET.set([steps])
    try:
        # the first errors are what a message shows (20 of them): a model's value that fails
        # everywhere made one each, and their memory grew with it
        return list(itertools.islice(errors(), MAX_ERRORS))
    finally:
        _BUDGET.reset(token)


@functools.lru_cache(maxsize=16)
@functools.cache
def format_checker(cls: Any) -> Any:
    """``cls``'s format checker for checking a schema, with RE2 deciding the ``regex`` format
    (one per validator class: it is made once, then only read)."""
    from jsonschema import FormatChecker

    checker = FormatChecker(formats=())
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=re2.error)(
        lambda value: not isinstance(value, str) or _compiled(value) is not None
    )
    return checker
