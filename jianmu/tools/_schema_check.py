"""Checking a tool's input schema against its dialect's meta-schema, at the cost of a dict walk.

jsonschema's ``check_schema`` for 2020-12 follows the meta-schema's ``$dynamicRef`` chains
through the ``referencing`` registry: about 1.5 ms for a five-property schema, more than the
rest of a one-call agent run. Almost every tool schema uses a handful of keywords whose
meta-schema rules are plain (``type`` is one of seven names, ``required`` is an array of
distinct strings, ``properties`` maps names to schemas ...). `check_schema` decides those
schemas by walking them, and hands anything else (another dialect, ``$ref``, ``pattern``, any
keyword or value it does not know exactly) to jsonschema, remembering the schemas jsonschema
accepted, so an agent built again with the same tools checks them once.

The walk only ever says "valid": a schema it is not sure of goes to jsonschema, which gives the
error message, so both paths refuse exactly what the meta-schema refuses.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ("check_schema", "plain_schema")

_SIMPLE_TYPES = frozenset(
    {"array", "boolean", "integer", "null", "number", "object", "string"}
)
_STRINGS = frozenset({"title", "description", "$comment", "format"})
"""Keywords whose value the 2020-12 meta-schema wants to be a string (and nothing else)."""
_ANY = frozenset({"default", "const"})
"""Keywords whose value may be any JSON value."""
_NUMBERS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties",
                     "maxProperties"})
_FLAGS = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})
_SUBSCHEMA = frozenset({"items", "additionalProperties", "not", "contains", "propertyNames"})
_SCHEMA_ARRAYS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_MAPS = frozenset({"properties", "$defs"})
_REFERRING = frozenset({"$ref", "if", "then", "else", "pattern", "patternProperties",
                        "dependentSchemas", "multipleOf"})
"""What the meta-schema walk reads beyond a plain schema's keywords (`check_schema` only)."""


def _meta_valid(key: str, value: Any, depth: int, refs: bool) -> bool:
    """True when ``value`` surely passes the meta-schema as ``key``'s (one of `_REFERRING`)."""
    if key == "$ref":
        return isinstance(value, str)
    if key == "pattern":
        return _regex(value)
    if key == "multipleOf":
        return type(value) in (int, float) and _finite(value) and value > 0
    if key in ("patternProperties", "dependentSchemas"):
        return isinstance(value, dict) and all(
            isinstance(k, str) and (key != "patternProperties" or _regex(k))
            and _plainly_valid(v, depth + 1, refs) for k, v in value.items())
    return _plainly_valid(value, depth + 1, refs)  # if, then, else


def _regex(value: Any) -> bool:
    """True when ``value`` is a pattern both Python's `re` and RE2 compile: the ``regex``
    format holds by either checker (jsonschema's own, or the rules' RE2)."""
    if not isinstance(value, str):
        return False
    import re

    from jianmu import _schema_rules  # only for a schema with a pattern: not a plain call's

    try:
        re.compile(value)
        _schema_rules.pattern_search(value, "")
    except (re.error, _schema_rules.PatternError, RecursionError, OverflowError):
        return False
    return True
_MAX_DEPTH = 32
_REMEMBERED = 4096
_RULED = frozenset({"$ref", "$dynamicRef", "$recursiveRef", "$id", "pattern",
                    "patternProperties", "unevaluatedProperties"})
"""Keys `jianmu._schema_rules` looks for in every object of a schema, data included: a
plain schema has none anywhere, so those rules have nothing to refuse in it."""


def _plainly_valid(schema: Any, depth: int = 0, refs: bool = False) -> bool:
    """True when ``schema`` surely passes the 2020-12 meta-schema; False when unsure. With
    ``refs``, a ``$ref``, ``if``/``then``/``else`` and any ``$defs`` name are read too (for the
    meta-schema alone: jsonschema took 3.6 s over a server's 1,000 models that ``$ref`` each
    other, 500 KB, on the event loop)."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return False
    for key, value in schema.items():
        if refs and key in _REFERRING:
            if not _meta_valid(key, value, depth, refs):
                return False
        elif key in _STRINGS:
            if not isinstance(value, str):
                return False
        elif key == "type":
            if isinstance(value, str):
                if value not in _SIMPLE_TYPES:
                    return False
            elif not (isinstance(value, list) and value
                      and all(isinstance(v, str) and v in _SIMPLE_TYPES for v in value)
                      and len(set(value)) == len(value)):
                return False
        elif key in _SCHEMA_MAPS:
            if not isinstance(value, dict) or (not refs and not _RULED.isdisjoint(value)) or (
                    not all(isinstance(k, str) and _plainly_valid(v, depth + 1, refs)
                            for k, v in value.items())):
                return False
        elif key in _SUBSCHEMA:
            if not _plainly_valid(value, depth + 1, refs):
                return False
        elif key == "required":
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)
                    and len(set(value)) == len(value)):
                return False
        elif key in ("enum", "examples"):
            if not isinstance(value, list) or not all(_is_json(v, depth + 1) for v in value):
                return False
        elif key in _ANY:
            if not _is_json(value, depth + 1):
                return False
        elif key in _SCHEMA_ARRAYS:
            if not (isinstance(value, list) and value
                    and all(_plainly_valid(v, depth + 1, refs) for v in value)):
                return False
        elif key in _NUMBERS:
            if not (type(value) in (int, float) and _finite(value)):
                return False
        elif key in _COUNTS:
            if type(value) is not int or value < 0 or value.bit_length() > _MAX_INT_BITS:
                return False
        elif key in _FLAGS:
            if not isinstance(value, bool):
                return False
        else:  # $schema, $ref, pattern, a keyword of another vocabulary ...: ask jsonschema
            return False
    return True


_MAX_INT_BITS = 14_000  # `jianmu._schema_rules.MAX_INT_BITS`, not imported: a plain call's path


def _finite(value: int | float) -> bool:
    """Whether JSON text can carry the number ``value``."""
    if type(value) is int:
        return value.bit_length() <= _MAX_INT_BITS
    return math.isfinite(value)


def _is_json(value: Any, depth: int) -> bool:
    """True when ``value`` is made of JSON's own types only (so jsonschema sees it as JSON)."""
    if value is None or type(value) in (str, bool):
        return True
    if type(value) in (int, float):
        return _finite(value)  # NaN, Infinity, 5,000 digits are not JSON: the rules refuse them
    if depth > _MAX_DEPTH:
        return False
    if type(value) is list:
        return all(_is_json(v, depth + 1) for v in value)
    if type(value) is dict:
        return _RULED.isdisjoint(value) and all(
            type(k) is str and _is_json(v, depth + 1) for k, v in value.items()
        )
    return False


def plain_schema(schema: Any) -> bool:
    """True when ``schema`` names no dialect, surely passes the 2020-12 meta-schema, and holds
    none of the keys `jianmu._schema_rules` refuses anywhere (``$ref``, ``$id``,
    ``pattern`` ..., in data values too): such a schema needs neither check (one walk instead
    of two) and its validator cannot fail to build. False when unsure."""
    return isinstance(schema, dict) and "$schema" not in schema and _plainly_valid(schema)


def _key(value: Any, depth: int = 0) -> Hashable | None:
    """A hashable copy of a JSON value that tells its types apart, or None for anything
    else (a tuple, a mapping of another class ... which jsonschema may judge otherwise)."""
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return (kind.__name__, value)
    if depth > _MAX_DEPTH:
        return None
    if kind is list:
        items = tuple(_key(v, depth + 1) for v in value)
        return None if None in items else ("list", items)
    if kind is dict:
        pairs = tuple((k, _key(v, depth + 1)) for k, v in value.items())
        if any(type(k) is not str or v is None for k, v in pairs):
            return None
        return ("dict", frozenset(pairs))
    return None


_accepted: OrderedDict[tuple[type, Hashable], None] = OrderedDict()
_lock = threading.Lock()


@functools.cache
def _refs_read() -> bool:
    """Whether the walk may read a ``$ref`` as any string, as jsonschema does here: its
    ``uri-reference`` format is checked only with a URI library installed."""
    from jsonschema import Draft202012Validator

    return "uri-reference" not in Draft202012Validator.FORMAT_CHECKER.checkers



def check_schema(cls: Any, schema: Any, *, format_checker: Any = None) -> None:
    """Check ``schema`` against the meta-schema of validator class ``cls``, as
    ``cls.check_schema(schema, format_checker=...)`` does.

    Raises:
        jsonschema.exceptions.SchemaError: the schema is not valid (jsonschema's own error).
    """
    from jsonschema import Draft202012Validator

    if cls is Draft202012Validator and _plainly_valid(schema, refs=_refs_read()):
        return
    key = _key(schema)
    if key is not None:
        with _lock:
            if (cls, key) in _accepted:
                _accepted.move_to_end((cls, key))
                return
    _meta_check(cls, schema, format_checker)
    if key is not None:
        with _lock:
            _accepted[cls, key] = None
            if len(_accepted) > _REMEMBERED:
                _accepted.popitem(last=False)


def _meta_check(cls: Any, schema: Any, format_checker: Any) -> None:
    """``cls.check_schema(schema, format_checker=...)`` with ``uniqueItems`` hashed
    (`jianmu._schema_rules.meta_check`: draft 4's meta-schema wants an ``enum``'s values unique,
    and jsonschema compared every pair; 8,000 objects took 64 s).

    Raises:
        jsonschema.exceptions.SchemaError: the first error, as jsonschema's own check raises.
    """
    from jianmu import _schema_rules

    _schema_rules.meta_check(cls, schema, format_checker)
