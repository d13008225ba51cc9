"""Type names from other vocabularies (Python's, Java's, BFCL's function format) in a schema.

Read only when a tool is refused or its schema's root is no object: each ``type`` that JSON
Schema does not know is named with its path and the JSON Schema type that says the same
(``dict`` is ``object``), all at once, instead of the meta-schema's one line about the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jianmu._text import visible
from jianmu.errors import ToolDefinitionError, ToolValidationError

__all__ = ("JSON_TYPES", "refuse_problems", "type_problems")

JSON_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})

_ALIASES = {  # a lower-cased foreign type name -> the JSON Schema type that means it
    "dict": "object", "map": "object", "hashmap": "object", "hashtable": "object",
    "float": "number", "double": "number", "decimal": "number",
    "int": "integer", "long": "integer", "short": "integer", "byte": "integer",
    "bigint": "integer",
    "str": "string", "char": "string",
    "bool": "boolean",
    "list": "array", "tuple": "array", "set": "array", "arraylist": "array", "queue": "array",
    "stack": "array",
    "none": "null",
}
# only keywords whose values are schemas are walked: a "type" key of data (a default, an
# enum's value, dependentRequired's names) is no type name
_SCHEMAS = frozenset({
    "additionalItems", "additionalProperties", "allOf", "anyOf", "contains", "contentSchema",
    "else", "if", "items", "not", "oneOf", "prefixItems", "propertyNames", "then",
    "unevaluatedItems", "unevaluatedProperties",
})
# keywords whose values map names to schemas: no name there is a keyword
_SCHEMA_MAPS = frozenset({
    "$defs", "definitions", "dependentSchemas", "patternProperties", "properties",
})
_NONE = object()  # no "type" at all: any value
_MAX = 20  # problems listed; a schema in another vocabulary has one per property
_MAX_DEPTH = 64  # deeper nesting is refused by the schema rules, with their own message


def type_problems(schema: Any, what: str = "input schema") -> list[str]:
    """Each ``type`` in ``schema`` that JSON Schema does not know, its path and what to write."""
    problems: list[str] = []
    _walk(schema, [], problems, what, False, 0)
    return problems


def refuse_problems(name: str, schema: Mapping[str, Any], problems: list[str]) -> None:
    """Raise naming ``problems``, with every type of another vocabulary in ``schema``."""
    kind = schema.get("type")
    if problems or (kind is not None and kind != "object"):
        # a root such as BFCL's "dict" would be wrapped as `input` and refused as that; named
        # as the definition's own, with the name's problem too, all at once
        found = type_problems(schema)
        if found:
            raise ToolDefinitionError(name, [*problems, *found])
    if problems:
        raise ToolValidationError(name, problems)


def _advice(kind: Any) -> str:
    lower = kind.lower() if isinstance(kind, str) else ""
    if lower in JSON_TYPES:
        return f"write {lower!r} (JSON Schema's types are lower case)"
    if lower == "any":
        return "leave 'type' out to allow any value"
    if lower in _ALIASES:
        return f"write {_ALIASES[lower]!r}"
    return "use " + ", ".join(sorted(JSON_TYPES))


def _walk(node: Any, path: list[str], problems: list[str], what: str, names: bool,
          depth: int) -> None:
    if depth > _MAX_DEPTH or len(problems) >= _MAX:
        return
    if isinstance(node, Mapping):
        kind = node.get("type", _NONE) if not names else _NONE
        kinds = kind if isinstance(kind, list) else [kind]
        for i, each in enumerate(kinds):
            if each is not _NONE and (not isinstance(each, str) or each not in JSON_TYPES):
                where = "/".join([*path, "type"] + ([str(i)] if kind is kinds else []))
                problems.append(
                    f"{what} is not a valid JSON Schema at {where}: {each!r} is not a JSON "
                    f"Schema type; {_advice(each)}"
                )
        for key, value in node.items():
            if names or key in _SCHEMAS or key in _SCHEMA_MAPS:
                inner = not names and key in _SCHEMA_MAPS
                # a property's name is the schema author's: shown, never obeyed by a terminal
                _walk(value, [*path, visible(str(key))], problems, what, inner, depth + 1)
    elif isinstance(node, list) and not names:
        for i, item in enumerate(node):
            _walk(item, [*path, str(i)], problems, what, False, depth + 1)
