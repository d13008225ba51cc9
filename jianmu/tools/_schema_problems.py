"""Say which parameters of a tool's signature have no JSON Schema, and what to do instead."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ConfigDict, create_model

__all__ = ("schema_problems",)

_WAY_OUT = (
    "use str, int, float, bool, a list or dict of them, an Enum, a pydantic model, a "
    "dataclass or a TypedDict; or bind it with functools.partial, so that the model neither "
    "sees nor gives it"
)
_OLD_TYPED_DICT = (
    "a typing.TypedDict, which pydantic reads only on Python 3.12 and later; define it with "
    "typing_extensions.TypedDict (the same class, with Required and NotRequired too)"
)
"""pydantic's ``typed-dict-version`` error: the type is fine, its spelling is not."""


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        module = annotation.__module__
        return annotation.__qualname__ if module == "builtins" else (
            f"{module}.{annotation.__qualname__}")
    return repr(annotation)


def schema_problems(
    error: Exception,
    fields: Mapping[str, tuple[Any, ...]],
    make_field: Callable[..., tuple[Any, Any]],
    config: ConfigDict,
    names: Sequence[tuple[str, str]],
) -> list[str]:
    """One problem per parameter whose type pydantic cannot describe (``fields`` as
    `jianmu.tools.schema.function_schema` holds them), else ``error``'s first line."""
    public = dict(names)
    problems: list[str] = []
    for internal, spec in fields.items():
        try:  # one field at a time: pydantic's error names the type, never the parameter
            field: Any = make_field(*spec)
            create_model("probe", __config__=config, **{internal: field}).model_json_schema()
        except Exception as exc:
            advice = _WAY_OUT
            if getattr(exc, "code", None) == "typed-dict-version":
                advice = f"it is or holds {_OLD_TYPED_DICT}"
            problems.append(
                f"parameter {public.get(internal, internal)!r}: its type "
                f"{_type_name(spec[0])} has no JSON Schema; {advice}"
            )
    if problems:
        return problems
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return [f"cannot build a schema from the signature: {first}"]
