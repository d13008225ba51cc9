"""Type names from other vocabularies (Python's, Java's, BFCL's function format) in a schema.

Read only when a tool is refused or its schema's root is no object: each ``type`` that JSON
Schema does not know is named with its path and the JSON Schema type that says the same
(``dict`` is ``object``), all at once, instead of the meta-schema's one line about the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jianmu.errors import ToolDefinitionError, ToolValidationError

__all__ = ("JSON_TYPES", "refuse_problems", "refuse_shape", "type_problems")

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


_OBJECT_VALUED = frozenset({
    "$defs", "$vocabulary", "additionalItems", "additionalProperties", "const", "contains",
    "contentSchema", "default", "definitions", "dependencies", "dependentRequired",
    "dependentSchemas", "discriminator", "else", "externalDocs", "extends", "if", "items", "not",
    "patternProperties", "properties", "propertyNames", "then", "unevaluatedItems",
    "unevaluatedProperties", "xml",
})
"""Keywords of JSON Schema (any draft) and OpenAPI whose value may be an object."""
_DEFINITION_KEYS = frozenset({
    "_meta", "annotations", "cache_control", "description", "execution", "function", "icons",
    "name", "outputSchema", "output_schema", "response", "returns", "strict", "title", "type",
})
"""What OpenAI's, Anthropic's, MCP's and BFCL's tool definitions hold besides the schema."""


def refuse_shape(name: str, definition: Mapping[str, Any], parameters: Any) -> None:
    """Refuse a definition whose shape would drop the tool's parameters unseen: parameters given
    as a map of names to schemas at the schema's root (xLAM's, ToolACE's: no ``properties``,
    so jsonschema ignores them as unknown keywords), or a schema under a key no format uses
    (API-Bank's ``input_parameters``: read as no schema, a tool of no arguments).

    Raises:
        ToolDefinitionError: naming the keys.
    """
    if parameters is None:
        keys = [k for k, v in definition.items() if isinstance(v, Mapping)
                and k not in _DEFINITION_KEYS and not str(k).startswith("x-")]
        if keys:
            raise ToolDefinitionError(name, [
                f"the definition gives no 'parameters' (nor 'input_schema', 'inputSchema') but "
                f"{', '.join(map(repr, keys))}: its schema would be dropped and the tool take "
                "no arguments; give the schema as 'parameters'"])
        return
    if not isinstance(parameters, Mapping) or "properties" in parameters:
        return
    bare = [k for k, v in parameters.items() if isinstance(v, Mapping) and k not in
            _OBJECT_VALUED and not str(k).startswith("x-") and ("type" in v or "description" in v)]
    if bare:
        raise ToolDefinitionError(name, [
            f"{', '.join(map(repr, bare[:_MAX]))} at the schema's root "
            f"{'is' if len(bare) == 1 else 'are'} read by JSON Schema as unknown keywords (the "
            "model would never see them as parameters); put them under 'properties': "
            '{"type": "object", "properties": {...}}'])


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
                _walk(value, [*path, str(key)], problems, what, inner, depth + 1)
    elif isinstance(node, list) and not names:
        for i, item in enumerate(node):
            _walk(item, [*path, str(i)], problems, what, False, depth + 1)
