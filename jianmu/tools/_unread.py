"""What the lax checker (`jianmu.tools._arguments`) does not read of a schema, left to the
schema's own validator.

The lax checker reads the common keywords (type, enum, const, properties, required, items,
anyOf, allOf, references, bounds, pattern) and coerces as pydantic's lax mode does. Every other
assertion a schema may make (``not``, ``if``/``then``/``else``, ``multipleOf``,
``uniqueItems``, ``contains``, ``propertyNames``, ``min``/``maxProperties``, the dependency
keywords, ``prefixItems``, ``oneOf``'s "exactly one", draft 4's boolean exclusive bounds, an
unknown keyword ...) was never checked: an MCP tool's ``not: {const: "rm"}`` let ``"rm"`` reach
the server. A schema that uses any of them is checked again, after the lax pass, by the
validator a tool made from a schema uses (RE2, nothing fetched, its work bounded), on the
coerced arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jianmu import _schema_rules

__all__ = ("READ", "rest_validator", "unread")

READ = frozenset({
    "type", "enum", "const", "required", "properties", "patternProperties",
    "additionalProperties", "items", "anyOf", "allOf", "$ref", "$dynamicRef", "$recursiveRef",
    "$defs", "definitions", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "minItems", "maxItems", "pattern",
    # annotations and identifiers: they assert nothing
    "title", "description", "default", "examples", "format", "$comment", "$schema", "$id", "id",
    "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary", "deprecated", "readOnly",
    "writeOnly", "contentEncoding", "contentMediaType", "contentSchema",
})
"""Keywords the lax checker reads, or that assert nothing."""
_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
         "dependencies")
_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems", "items")
_ONES = ("not", "if", "then", "else", "additionalProperties", "contains", "propertyNames",
         "unevaluatedProperties", "unevaluatedItems", "additionalItems", "items")
_BOUNDS = ("exclusiveMinimum", "exclusiveMaximum")


def unread(schema: Any) -> bool:
    """Whether some subschema of ``schema`` asserts what the lax checker does not read."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if not READ.issuperset(node) or isinstance(node.get("items"), list) or any(
                isinstance(node.get(key), bool) for key in _BOUNDS):  # draft 4's flags
            return True
        for key in _MAPS:
            sub = node.get(key)
            if isinstance(sub, dict):
                stack.extend(sub.values())
        for key in _LISTS:
            sub = node.get(key)
            if isinstance(sub, list):
                stack.extend(sub)
        for key in _ONES:
            sub = node.get(key)
            if isinstance(sub, dict):
                stack.append(sub)
    return False


def _made(schema: Mapping[str, Any]) -> Any:
    if not unread(schema):
        return None
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import SchemaError

    from jianmu.tools._schema_check import check_schema

    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:  # a schema from outside passed this when its tool was made; a hand-written one may not
        check_schema(cls, schema, format_checker=_schema_rules.format_checker(cls))
    except SchemaError:
        return None  # no validator can read it: the lax pass is all there is
    if _schema_rules.schema_problems(schema):
        return None  # it reaches outside itself or matches with backtracking: never run it
    return _schema_rules.validator_class(cls)(schema, registry=_schema_rules.local_registry())


_MADE = _schema_rules.PerObject(1024)
"""The validators made (a cache of its own: one shared with the enums and names of every tool
let a large agent's schemas go, and each call made them again)."""


def rest_validator(schema: Mapping[str, Any]) -> Any:
    """The validator of ``schema``'s own dialect when the lax checker leaves some of it
    unread, else None; made once per schema."""
    return _MADE(schema, "rest", _made)
