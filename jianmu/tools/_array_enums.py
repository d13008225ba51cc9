"""An ``enum`` of single values on an array schema, read as the allowed values of its items.

Hand-written tool definitions often put the allowed values of a list's items on the list
itself: ``{"type": "array", "items": {"type": "string"}, "enum": ["temperature", "humidity"]}``.
By the letter of JSON Schema no array is one of those strings, so every call would be refused,
``["temperature"]`` included, with a message naming values the model did send. Arguments are
checked by the schema with such an ``enum`` moved onto ``items``, the only reading under which
the schema accepts anything; the schema itself, as exported to models, stays as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ("with_item_enums",)

_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions",
                          "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMAS = frozenset({"items", "additionalProperties", "not", "contains", "propertyNames", "if",
                      "then", "else", "additionalItems", "unevaluatedItems",
                      "unevaluatedProperties"})
_MAX_DEPTH = 32  # deeper schemas are refused when the tool is made (`nesting_problem`)


def with_item_enums(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with each array's ``enum`` of non-arrays moved onto its ``items``; the same
    object when it has none (the common case costs one walk, and no copy)."""
    return _fixed(schema, 0)  # type: ignore[no-any-return]


def _fixed(node: Any, depth: int) -> Any:
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return node
    changed: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            inner = {k: _fixed(v, depth + 1) for k, v in value.items()}
            if any(inner[k] is not v for k, v in value.items()):
                changed[key] = inner
        elif (key in _SCHEMA_LISTS or key == "items") and isinstance(value, list):
            parts = [_fixed(v, depth + 1) for v in value]
            if any(p is not v for p, v in zip(parts, value, strict=True)):
                changed[key] = parts
        elif key in _SCHEMAS:
            fixed = _fixed(value, depth + 1)
            if fixed is not value:
                changed[key] = fixed
    enum = node.get("enum")
    items = changed.get("items", node.get("items", {}))
    if (node.get("type") == "array" and isinstance(enum, list) and enum
            and "prefixItems" not in node  # `items` would cover only the items after those
            and not any(isinstance(v, list | tuple) for v in enum)
            and isinstance(items, Mapping) and "enum" not in items and "const" not in items):
        # no array can equal a single value: the list names its items' allowed values
        return {**{k: v for k, v in node.items() if k != "enum"}, **changed,
                "items": {**items, "enum": enum}}
    return {**node, **changed} if changed else node
