"""What JSON types a schema accepts, read leniently, and dropping the nulls strict mode
sends for "not given": the lax reading `jianmu.tools._arguments` checks with, and what a
function's and a schema's checks use to let a ``null`` mean the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jianmu import _schema_rules

__all__ = ("ANY", "UNFOLLOWED", "Budget", "drop_default_nulls", "json_type", "resolve",
           "schema_types")

ANY = "any"
UNFOLLOWED = _schema_rules.UNFOLLOWED
_REF_KEYS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})


class Budget:
    """How many more schema nodes one check may visit: a self-referencing schema (an anyOf of
    refs to itself) would otherwise take exponential time on the event loop."""

    __slots__ = ("left",)

    def __init__(self, value: Any) -> None:
        self.left = _schema_rules.steps_for(value)

    def spend(self, steps: int = 1) -> bool:
        """Take ``steps``; ``False`` once the budget is gone (every later step is refused)."""
        self.left -= steps
        return self.left >= 0

    @property
    def spent(self) -> bool:
        """Whether the check ran out of steps."""
        return self.left < 0


_MAX_CHAIN = 32


def resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """``schema`` with its references (``$ref``, ``$dynamicRef``, ``$recursiveRef``) followed
    in ``root`` as the validator follows them (`_schema_rules.followed`), up to 32 in a chain,
    a referring schema's other keywords kept over its target's; `UNFOLLOWED` for a reference
    that names nothing in ``root``, or a longer chain: what cannot be read is never read as
    "anything goes"."""
    extra: dict[str, Any] | None = None
    for _ in range(_MAX_CHAIN + 1):
        if not isinstance(schema, dict):
            break
        key = ("$ref" if "$ref" in schema else "$dynamicRef" if "$dynamicRef" in schema
               else "$recursiveRef" if "$recursiveRef" in schema else None)
        if key is None:
            break
        target = _schema_rules.followed(root, schema, key)
        if target is UNFOLLOWED:
            return UNFOLLOWED
        here = {k: v for k, v in schema.items() if k not in _REF_KEYS}
        extra = {**here, **extra} if extra else here  # the nearer schema's keywords win
        schema = target
    else:
        return UNFOLLOWED
    return _joined(schema, extra) if extra else schema


_BY_NAME = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def _joined(target: Any, here: dict[str, Any]) -> Any:
    """A reference's ``target`` and the referring schema's other keywords (``here``) as one
    schema, where both hold: merged where they do not overlap (``properties`` by name,
    ``required`` joined), else ``here`` with ``target`` as one more ``allOf`` branch. (Merged
    with ``here`` winning, an MCP tool's ``{"$ref": ..., "properties": {}}`` dropped every
    property the target names, and with them their checks.)"""
    if not isinstance(target, dict):
        return {**here, "allOf": [target, *here.get("allOf", ())]}
    joined = dict(target)
    for key, value in here.items():
        mine = joined.get(key, _ABSENT)
        if mine is _ABSENT or mine is value:
            joined[key] = value
        elif key in _BY_NAME and isinstance(mine, dict) and isinstance(value, dict) and (
                mine.keys().isdisjoint(value)):
            joined[key] = {**mine, **value}
        elif key == "required" and isinstance(mine, list) and isinstance(value, list) and all(
                isinstance(name, str) for name in (*mine, *value)):
            joined[key] = list(dict.fromkeys([*mine, *value]))
        elif mine != value:
            allof = here.get("allOf")
            return {**here, "allOf": [target, *(allof if isinstance(allof, list) else ())]}
    return joined


_ABSENT = object()


def schema_types(schema: Any, root: Mapping[str, Any]) -> set[str]:
    """JSON types a schema may accept; ``{"any"}`` when it does not restrict the type."""
    return set(_types(schema, root, {}, 0))


def _types(
    schema: Any, root: Mapping[str, Any], memo: dict[int, frozenset[str]], depth: int
) -> frozenset[str]:
    # Memoized per node: a schema whose anyOf refers to itself four times would otherwise
    # take 4**depth steps. A node met again while its own answer is pending (a cycle)
    # restricts nothing.
    key = id(schema)
    known = memo.get(key)
    if known is not None:
        return known
    memo[key] = _ANY_TYPE
    found = _types_of(resolve(schema, root), root, memo, depth)
    memo[key] = found
    return found


_ANY_TYPE = frozenset({ANY})


def _types_of(
    schema: Any, root: Mapping[str, Any], memo: dict[int, frozenset[str]], depth: int
) -> frozenset[str]:
    if not isinstance(schema, dict) or depth > 16:
        return _ANY_TYPE
    for key in ("anyOf", "oneOf"):
        if key in schema:
            out: set[str] = set()
            for sub in schema[key]:
                out |= _types(sub, root, memo, depth + 1)
            return frozenset(out)
    if schema.get("allOf"):
        return _types(schema["allOf"][0], root, memo, depth + 1)
    t = schema.get("type")
    if isinstance(t, str):
        return frozenset({t})
    if isinstance(t, list):
        return frozenset(str(x) for x in t)
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        if isinstance(values, list) and "enum" in schema:  # walked once per enum, not per value
            return _schema_rules.per_list(values, "types", _types_in)  # type: ignore[no-any-return]
        return frozenset(json_type(v) for v in values)
    if "properties" in schema:
        return frozenset({"object"})
    if "items" in schema or "prefixItems" in schema:
        return frozenset({"array"})
    return _ANY_TYPE


def drop_default_nulls(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    """Drop ``null`` for optional, non-nullable object fields at every level.

    OpenAI strict mode makes every field required and nullable, so a model sends ``null`` for
    "not given"; the field's default should apply rather than a type error. The walk spends a
    budget that grows with ``value`` (`Budget`), as a check does: past it ``value`` is kept as
    it is (an anyOf of 5,000 forms by a model's 2,000 items was 10,000,000 steps, 8 s).
    """
    budget = Budget(value)
    out = _drop_nulls(value, schema, root, 0, {}, budget)
    return value if budget.spent else out


def _drop_nulls(value: Any, schema: Any, root: Mapping[str, Any], depth: int,
                memo: dict[int, frozenset[str]], budget: Budget) -> Any:
    if not budget.spend():  # spent: every later step returns at once, the caller drops it all
        return value
    schema = resolve(schema, root)
    if not isinstance(schema, dict) or depth > 32:
        return value
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key, ()):
            # one memo for the walk: each schema's types are found once, not once per value
            if not budget.spend():
                return value
            if json_type(value) in _types(sub, root, memo, 0):
                return _drop_nulls(value, sub, root, depth + 1, memo, budget)
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        named = schema.get("required") or ()
        if not budget.spend(len(named) if isinstance(named, list) else 0):
            return value
        required = {r for r in named if isinstance(r, str)} if isinstance(named, list) else set()
        out: dict[str, Any] = {}
        for k, v in value.items():
            sub = props.get(k)
            if sub is None:
                out[k] = v
            elif v is None and k not in required and not _types(sub, root, memo, 0) & {
                "null", ANY
            }:
                continue
            else:
                out[k] = _drop_nulls(v, sub, root, depth + 1, memo, budget)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_drop_nulls(v, schema["items"], root, depth + 1, memo, budget) for v in value]
    return value


def _types_in(values: list[Any]) -> frozenset[str]:
    return frozenset(json_type(v) for v in values)


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "array"
    return "object"
