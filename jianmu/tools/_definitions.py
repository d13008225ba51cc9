"""Tool definitions in other formats (OpenAI's, Anthropic's, MCP's, Bedrock's, BFCL's): the
name, description and input schema `Tool.from_openai` and `ToolSet.from_openai` make a tool of.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jianmu.errors import ToolDefinitionError

__all__ = ("openai_function", "read_function")

_DEFINITION_KEYS = frozenset({
    "_meta", "annotations", "cache_control", "description", "execution", "function", "icons",
    "name", "outputSchema", "output_schema", "response", "returns", "strict", "title", "type",
})
"""What OpenAI's, Anthropic's, MCP's and BFCL's tool definitions hold besides the schema."""


def openai_function(definition: Mapping[str, Any]) -> Mapping[str, Any]:
    """The inner ``{"name", "description", "parameters"}`` of an OpenAI tool definition.

    Raises:
        ToolDefinitionError: the definition is no dict, or of type function without one.
    """
    if not isinstance(definition, Mapping):
        raise ToolDefinitionError("?", [
            f"an OpenAI tool definition is a dict, got {type(definition).__name__}"
        ])
    if "function" in definition or (definition.get("type") == "function"
                                    and "name" not in definition):
        inner = definition.get("function")
        if not isinstance(inner, Mapping):
            raise ToolDefinitionError("?", [
                "an OpenAI tool definition of type 'function' needs a 'function' object (Chat "
                "Completions) or a 'name' beside its 'parameters' (the Responses API)"
            ])
        return inner
    return definition


def read_function(function: Mapping[str, Any]) -> tuple[str, str, Any]:
    """The name, description and input schema of a definition's inner function.

    Raises:
        ToolDefinitionError: no name, the schema given twice, or a schema under a key no
            format uses (read as none, the tool would take no arguments).
    """
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ToolDefinitionError("?", [
            f"the definition has no 'name' (keys: {', '.join(function) or 'none'})"
        ])
    description = function.get("description")
    if description is not None and not isinstance(description, str):
        # str() of it went to the model: an object's Python repr, a list of a million words
        raise ToolDefinitionError(name, [
            f"'description' must be text, got {type(description).__name__}"
        ])
    parameters = _parameters(name, function)
    if parameters is None:
        _refuse_unread_keys(name, function)
    return name, description or "", _arguments_object(parameters)


def _parameters(name: str, function: Mapping[str, Any]) -> Any:
    """A definition's input schema: ``parameters``, else the key Anthropic (``input_schema``),
    MCP (``inputSchema``) or Bedrock (``inputSchema.json``) give it under; read as no schema,
    it made a tool of no parameters that the model was never told of."""
    if "input_schema" not in function and "inputSchema" not in function:
        return function.get("parameters")  # OpenAI's shape, the usual one
    keys = [k for k in ("parameters", "input_schema", "inputSchema") if k in function]
    if len(keys) > 1:
        raise ToolDefinitionError(name, [
            f"the definition has both {keys[0]!r} and {keys[1]!r}; give its schema once"
        ])
    schema = function.get(keys[0]) if keys else None
    if keys == ["inputSchema"] and isinstance(schema, Mapping) and list(schema) == ["json"]:
        return schema["json"]
    return schema


def _refuse_unread_keys(name: str, definition: Mapping[str, Any]) -> None:
    """Refuse a definition that gives its schema under a key no format uses (API-Bank's
    ``input_parameters``: read as no schema, a tool of no arguments).

    Raises:
        ToolDefinitionError: naming the keys.
    """
    keys = [k for k, v in definition.items() if isinstance(v, Mapping)
            and k not in _DEFINITION_KEYS and not str(k).startswith("x-")]
    if keys:
        raise ToolDefinitionError(name, [
            f"the definition gives no 'parameters' (nor 'input_schema', 'inputSchema') but "
            f"{', '.join(map(repr, keys))}: its schema would be dropped and the tool take "
            "no arguments; give the schema as 'parameters'"])


def _arguments_object(parameters: Any) -> Any:
    """A function definition's ``parameters`` as the object schema they always describe (a
    function's arguments are a JSON object): none or ``{}`` is no arguments, a schema with
    ``properties`` but no ``type`` (or ``["object", "null"]``) an object; any other type is
    left for the tool to wrap as ``input``."""
    if parameters is None or (isinstance(parameters, Mapping) and not parameters):
        return {"type": "object", "properties": {}}
    if not isinstance(parameters, Mapping):
        return parameters  # refused by the tool, naming the type
    kind = parameters.get("type")
    if kind is None or (isinstance(kind, list) and "object" in kind):
        return {**parameters, "type": "object"}
    return parameters
