"""The fast path of schema generation: an object schema from memoised per-type schemas.

Every per-type schema is still pydantic's; only the assembly into an object schema is done
here, exactly as pydantic's model would do it (a test compares both on every signature).
The validating model is then built on a tool's first call instead of at definition.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any

from pydantic import ConfigDict, TypeAdapter
from pydantic.fields import FieldInfo

from jianmu.tools._export import strip_titles

__all__ = ("fast_parameters", "has_field_info", "plain_json")

_FRAGMENTS: dict[Any, dict[str, Any] | None] = {}
_FRAGMENTS_MAX = 4096


def has_field_info(annotation: Any) -> bool:
    return typing.get_origin(annotation) is Annotated and any(
        isinstance(m, FieldInfo) for m in getattr(annotation, "__metadata__", ())
    )


def plain_json(value: Any) -> bool:
    return value is None or type(value) in (bool, int, float, str)


def _has_refs(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "$ref" in schema or "$defs" in schema or any(
            _has_refs(v) for v in schema.values()
        )
    if isinstance(schema, list):
        return any(_has_refs(v) for v in schema)
    return False


def _fragment(annotation: Any, config: ConfigDict) -> dict[str, Any] | None:
    """pydantic's JSON Schema of one type, memoised; ``None`` when it needs ``$defs``."""
    try:
        return _FRAGMENTS[annotation]
    except KeyError:
        pass
    except TypeError:  # unhashable annotation: no memo
        return None
    try:
        # Inside a list, a named type (enum, model, dataclass...) shows as a $ref exactly as
        # in the model's schema, so those go to the model path and keep their $defs.
        wrapped = TypeAdapter(list[annotation], config=config).json_schema()  # type: ignore[valid-type]
        schema: dict[str, Any] | None = strip_titles(wrapped.get("items", {}))
    except Exception:  # the model path reports the error with context
        schema = None
    if schema is not None and (_has_refs(schema) or "$defs" in wrapped):
        schema = None
    if len(_FRAGMENTS) >= _FRAGMENTS_MAX:
        _FRAGMENTS.clear()
    _FRAGMENTS[annotation] = schema
    return schema


def _copy_schema(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_schema(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_schema(v) for v in value]
    return value


def fast_parameters(
    params: list[tuple[str, Any, str | None, bool, Any]], config: ConfigDict
) -> dict[str, Any] | None:
    """The object schema pydantic's model would produce, from memoised per-type schemas."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for pname, annotation, description, has_default, default in params:
        fragment = _fragment(annotation, config)
        if fragment is None:
            return None
        prop = _copy_schema(fragment)  # memoised fragments are shared: never hand them out
        if description:
            prop["description"] = description
        if has_default:
            prop["default"] = default
        else:
            required.append(pname)
        props[pname] = dict(sorted(prop.items()))
    out: dict[str, Any] = {"additionalProperties": False, "properties": props}
    if required:
        out["required"] = required
    out["type"] = "object"
    return out
