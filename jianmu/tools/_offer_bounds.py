"""What a model is offered of a schema another process wrote (an MCP server's): bounded.

A tool's schema goes with every model request. A server's megabyte in it (a parameter's
description, an enum of 200,000 values, a huge default, const or example) would be sent, and
paid for, at each turn, or make the model API refuse every request that offers the tool. What
is offered keeps each such part small; the tool still checks calls against its whole schema,
and its errors say what a call missed (an enum's error names how many values it takes, with
the first few).
"""

from __future__ import annotations

import json
from typing import Any

from jianmu.tools._schema_types import json_type

__all__ = ("MAX_ENUM", "MAX_TEXT", "MAX_VALUE", "bounded")

MAX_TEXT = 2_000
"""Characters of a description or title inside the schema that are offered."""
MAX_ENUM = 100
"""Values of an ``enum`` offered as they are; a longer one is said in words, with a few."""
SHOWN_ENUM = 10
"""Values of a longer ``enum`` named in those words."""
MAX_VALUE = 2_000
"""Characters of JSON of a ``default``, ``const`` or ``examples`` offered; past it, left out."""

_SCHEMA = frozenset({
    "items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
    "unevaluatedItems", "unevaluatedProperties", "additionalItems",
})
"""Keywords whose value is one schema."""
_SCHEMAS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
"""Keywords whose value is a list of schemas."""
_NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Keywords whose value maps names to schemas."""
_DATA = frozenset({"default", "const", "examples"})
"""Keywords whose value is data a schema holds, not a schema."""


def bounded(schema: Any) -> Any:
    """``schema`` with its large parts cut (see the module): a copy where anything was cut,
    ``schema`` itself where nothing was."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] | None = None
    notes: list[str] = []
    for key, value in schema.items():
        new = value
        if key in ("description", "title") and isinstance(value, str) and len(value) > MAX_TEXT:
            new = f"{value[:MAX_TEXT]}… [cut: {len(value):,} characters]"
        elif key == "enum" and isinstance(value, list) and len(value) > MAX_ENUM:
            new = _DROPPED
            shown = ", ".join(_short(v) for v in value[:SHOWN_ENUM])
            notes.append(f"One of {len(value):,} values, such as {shown}.")
        elif key in _DATA and _too_long(value):
            new = _DROPPED
            if key == "const":
                notes.append("A fixed value, too long to show.")
        elif key in _SCHEMA:
            new = bounded(value) if isinstance(value, dict) else _each(value)
        elif key in _SCHEMAS:
            new = _each(value)
        elif key in _NAMED and isinstance(value, dict):
            cut = {name: bounded(sub) for name, sub in value.items()}
            new = value if all(cut[n] is value[n] for n in value) else cut
        if new is not value:
            if out is None:
                out = dict(schema)
            if new is _DROPPED:
                del out[key]
            else:
                out[key] = new
    if out is None:
        return schema
    if notes:
        if "enum" in schema and "enum" not in out and "type" not in out:
            kinds = {json_type(v) for v in schema["enum"]}
            if len(kinds) == 1:  # the values' one type, so the offer still says it
                out["type"] = kinds.pop()
        said = out.get("description")
        out["description"] = " ".join([said, *notes] if isinstance(said, str) else notes)
    return out


_DROPPED = object()


def _each(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    cut = [bounded(sub) for sub in value]
    return value if all(a is b for a, b in zip(cut, value, strict=True)) else cut


def _too_long(value: Any) -> bool:
    if isinstance(value, str | int | float | bool) or value is None:
        return isinstance(value, str) and len(value) > MAX_VALUE
    try:
        return len(json.dumps(value, default=str)) > MAX_VALUE
    except (ValueError, RecursionError):  # not writable as JSON at all: not offered either
        return True


def _short(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 40 else f"{text[:40]}…"

