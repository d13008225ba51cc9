"""The shape of an input schema a tool is given, rather than made from a signature.

A schema given to `Tool.from_schema`, ``@tool(input_schema=...)``, `Tool.from_openai`, an MCP
server's ``tools/list`` or a skill's ``inputs`` may come from another format: parameters named
at the root (xLAM's, ToolACE's, or one stray beside ``properties``) are unknown keywords to
JSON Schema, so the model is never told of them and any call passes; a root typed in another
vocabulary (BFCL's ``dict``) would be wrapped as one ``input``. `check_given_schema` is the one
check every such path runs before the schema's rules and meta-schema (`jianmu._schema_rules`,
`jianmu.tools._arguments`); for a schema of JSON Schema's own keywords only, as every schema
made from a signature is, it is one set comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jianmu.errors import ToolDefinitionError

__all__ = ("KEYWORDS", "check_given_schema", "not_an_object", "root_parameters")

KEYWORDS = frozenset({
    # every draft's core, applicator, validation, meta-data, format and content keywords
    "$anchor", "$comment", "$defs", "$dynamicAnchor", "$dynamicRef", "$id", "$recursiveAnchor",
    "$recursiveRef", "$ref", "$schema", "$vocabulary", "additionalItems",
    "additionalProperties", "allOf", "anyOf", "const", "contains", "contentEncoding",
    "contentMediaType", "contentSchema", "default", "definitions", "dependencies",
    "dependentRequired", "dependentSchemas", "deprecated", "description", "disallow",
    "divisibleBy", "else", "enum", "examples", "exclusiveMaximum", "exclusiveMinimum", "extends",
    "format", "id", "if", "items", "maxContains", "maxItems", "maxLength", "maxProperties",
    "maximum", "minContains", "minItems", "minLength", "minProperties", "minimum", "multipleOf",
    "not", "oneOf", "pattern", "patternProperties", "prefixItems", "properties",
    "propertyNames", "readOnly", "required", "then", "title", "type", "unevaluatedItems",
    "unevaluatedProperties", "uniqueItems", "writeOnly",
    # OpenAPI's schema object
    "discriminator", "example", "externalDocs", "nullable", "xml",
    # ajv-errors' messages by keyword ({"type": "must be an object"}), which JS servers send
    "errorMessage",
})
"""The keywords of JSON Schema (any draft), of OpenAPI's schema object and ajv's messages."""
_MAX_NAMED = 20


def not_an_object(schema: Any) -> str:
    """The problem of an input schema that is no JSON object."""
    text = f"input_schema must be a JSON Schema object, got {type(schema).__name__}"
    if isinstance(schema, (str, bytes)) and schema.strip()[:1] in ("{", b"{"):
        # datasets (ToolACE's, some of Hugging Face's) keep each schema as JSON text
        return f"{text} holding JSON text; give the object it spells (json.loads)"
    return text


def root_parameters(schema: Mapping[str, Any]) -> list[str]:
    """The keys at ``schema``'s root that read as parameters, not keywords: no keyword of
    JSON Schema or OpenAPI, no ``x-`` extension, and a schema with a ``type`` or a
    ``description`` as value."""
    return [k for k, v in schema.items() if k not in KEYWORDS and isinstance(v, Mapping)
            and not str(k).startswith("x-") and ("type" in v or "description" in v)]


def check_given_schema(name: str, schema: Any, problems: Sequence[str] = ()) -> None:
    """Refuse an input schema whose shape a model could not call by: no JSON object,
    parameters named outside ``properties``, or a root of another vocabulary's type (each
    named with what JSON Schema writes). ``problems`` are the tool's own (its name ...), named
    first; they alone raise `ToolValidationError`.

    Raises:
        ToolDefinitionError: naming the tool and every problem of its schema.
        ToolValidationError: ``problems`` only.
    """
    if type(schema) is not dict and not isinstance(schema, Mapping):  # no ABC check for a dict
        raise ToolDefinitionError(name, [*problems, not_an_object(schema)])
    if not schema.keys() <= KEYWORDS:  # one set comparison for every usual schema
        stray = root_parameters(schema)
        if stray:
            read = ("is read by JSON Schema as an unknown keyword (the model would never see "
                    "it as a parameter); put it") if len(stray) == 1 else (
                "are read by JSON Schema as unknown keywords (the model would never see them as "
                "parameters); put them")
            raise ToolDefinitionError(name, [*problems, (
                f"{', '.join(map(repr, stray[:_MAX_NAMED]))} at the schema's root {read} under "
                """'properties': {"type": "object", "properties": {...}}""")])
    if problems or schema.get("type") != "object":
        from jianmu.tools._type_names import refuse_problems  # read when something is wrong

        refuse_problems(name, schema, list(problems))
