"""The input schema kept in an approval request, to check a person's edited arguments as the
tool itself will (`jianmu.runtime.context.check_edit`, where the tool is not at hand).

Tools whose arguments are checked by Jianmu's own dialect (`Tool.validate_args`, an MCP
tool's) take no argument that an object's ``properties`` do not name, unless the object says
``additionalProperties``; JSON Schema takes any. The kept schema says so explicitly, so an
edit with an argument the tool would refuse is refused when it is approved, not taken and
then failed when the call runs.
"""

from __future__ import annotations

from typing import Any

from jianmu.tools.base import Tool

__all__ = ("closed_objects", "input_schema_of")

_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMAS = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_MAX_NODES = 10_000
"""Schema nodes closed at most: a server's schema is bounded, this walk is too."""


def input_schema_of(tool: Tool | None) -> dict[str, Any] | None:
    """The tool's input schema as its own check reads it, as JSON; None if it has none."""
    if tool is None:
        return None
    try:
        schema = tool.parameters
    except Exception:  # a tool whose schema cannot be built: its own check runs later
        return None
    if not isinstance(schema, dict):
        return None
    if getattr(tool, "checks_closed_objects", False) or (
        type(tool).validate_args is Tool.validate_args
    ):
        return closed_objects(schema)
    return dict(schema)


def closed_objects(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` whose every object schema that names ``properties`` and says no
    ``additionalProperties`` takes no others (``additionalProperties: false``)."""
    out = _copied(schema)
    stack: list[Any] = [out]
    seen = 0
    while stack and seen < _MAX_NODES:
        node = stack.pop()
        seen += 1
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("properties"), dict) and node["properties"] \
                and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for key in _SCHEMA_LISTS:
            if isinstance(node.get(key), list):
                stack.extend(node[key])
        for key in _SCHEMA_MAPS:
            if isinstance(node.get(key), dict):
                stack.extend(node[key].values())
        for key in _SCHEMAS:
            stack.append(node.get(key))
    return out


def _copied(value: Any) -> Any:
    """A copy of a JSON value's dicts and lists (iterative: a deep schema is no recursion)."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if isinstance(item, dict):
            copy: Any = dict(item)
            stack.extend((copy, k, v) for k, v in item.items())
        elif isinstance(item, list):
            copy = list(item)
            stack.extend((copy, i, v) for i, v in enumerate(item))
        else:
            continue
        parent[key] = copy
    return root[0]
