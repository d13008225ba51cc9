"""OpenAI strict mode refuses keywords pydantic writes for common signatures (``uniqueItems``
for a set, ``format: path`` for a Path, ``prefixItems`` for a tuple): the strict export leaves
out what only narrows a value (the tool's own validation still checks it), turns a tuple of
one type into ``items``, and names a tuple of mixed types instead of sending a request the API
answers 400."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, Field

from jianmu.errors import ToolValidationError
from jianmu.tools import tool
from jianmu.tools.spec import to_strict_schema

_REFUSED = {"uniqueItems", "prefixItems", "contains", "minContains", "maxContains",
            "minProperties", "maxProperties", "propertyNames"}
_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6",
            "uuid"}


def _walk(schema: Any) -> list[tuple[str, Any]]:
    """Every (keyword, value) pair of every schema object inside ``schema``."""
    found: list[tuple[str, Any]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.append((key, value))
            found += _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _walk(value)
    return found


def _refused_keywords(schema: dict[str, Any]) -> list[str]:
    pairs = _walk(schema)
    return sorted({k for k, _ in pairs if k in _REFUSED} | {
        f"format {v}" for k, v in pairs if k == "format" and isinstance(v, str)
        and v not in _FORMATS})


class Box(BaseModel):
    tags: set[str]
    corner: tuple[int, int]


@tool
def tag(labels: set[str], where: Path, box: Box, blob: bytes = b"",
        bbox: tuple[float, float, float, float] = (0, 0, 1, 1)) -> str:
    """Tag things."""
    return ",".join(sorted(labels))


def test_strict_export_of_a_set_a_path_bytes_and_tuples_of_one_type_has_no_refused_keyword(
) -> None:
    params = tag.to_openai(strict=True)["function"]["parameters"]
    assert _refused_keywords(params) == []
    bbox = params["properties"]["bbox"]
    assert bbox["items"] == {"type": "number"} and (bbox["minItems"], bbox["maxItems"]) == (4, 4)
    validator = jsonschema.Draft202012Validator(params)
    sample = {"labels": ["a", "b"], "where": "/tmp", "box": {"tags": ["x"], "corner": [1, 2]},
              "blob": None, "bbox": [0.0, 0.0, 2.0, 2.0]}
    assert validator.is_valid(sample)
    assert not validator.is_valid({**sample, "bbox": [0.0, 0.0, 2.0]})
    # the tool's own validation still reads the signature: the set is a set
    assert tag.validate_args({**sample, "labels": ["a", "a"]})["labels"] == {"a"}
    # the plain export is unchanged
    assert tag.to_openai()["function"]["parameters"]["properties"]["labels"]["uniqueItems"]


def test_strict_export_names_a_tuple_of_mixed_types() -> None:
    @tool
    def place(at: tuple[int, str]) -> str:
        """Place."""
        return str(at)

    with pytest.raises(ToolValidationError, match=r"parameter 'at' is a tuple of items of "
                       r"different types .*to_openai\(strict=False\)"):
        place.to_openai(strict=True)
    assert place.to_openai()["function"]["parameters"]["properties"]["at"]["prefixItems"]


def test_strict_export_of_a_given_schema_keeps_the_formats_strict_mode_takes() -> None:
    out = to_strict_schema({"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"},
        "site": {"type": "string", "format": "uri"},
        "meta": {"type": "object", "properties": {"k": {"type": "string"}},
                 "minProperties": 1, "propertyNames": {"pattern": "^k$"}},
    }}, tool="t")
    assert out["properties"]["when"]["format"] == "date-time"
    assert _refused_keywords(out) == []


class Address(BaseModel):
    city: str


class Person(BaseModel):
    home: Address = Field(description="where they live")
    boss: Person | None = Field(default=None, description="who they answer to")
    mentor: Person = Field(default=None, description="who taught them")  # type: ignore[assignment]


class Size(enum.StrEnum):
    SMALL = "s"
    LARGE = "l"


@tool
def hire(person: Person, size: Size = Size.SMALL, office: Address | None = None) -> str:
    """Hire someone.

    Args:
        person: who.
        size: the desk.
        office: where.
    """
    return person.home.city


def _refs_with_siblings(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if "$ref" in schema and len(schema) > 1:
            found.append(schema)
        for value in schema.values():
            found += _refs_with_siblings(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _refs_with_siblings(value)
    return found


def test_a_described_model_or_enum_parameter_is_no_ref_with_a_description() -> None:
    """pydantic writes ``{"$ref": ..., "description": ...}`` for every described model or enum
    parameter or field; strict mode refuses it ("$ref cannot have keywords {'description'}").
    The definition is written in place with its description; a model's own type, described
    inside itself, keeps its bare $ref."""
    params = hire.to_openai(strict=True)["function"]["parameters"]
    assert _refs_with_siblings(params) == []
    person = params["properties"]["person"]
    assert person["description"] == "who." and person["additionalProperties"] is False
    assert person["properties"]["home"]["description"] == "where they live"
    assert params["properties"]["size"]["description"] == "the desk."
    validator = jsonschema.Draft202012Validator(params)
    me = {"home": {"city": "Oslo"}, "boss": None, "mentor": {
        "home": {"city": "Rome"}, "boss": None, "mentor": None}}
    sample = {"person": me, "size": None, "office": None}
    assert validator.is_valid(sample)
    assert not validator.is_valid({**sample, "size": "medium"})
    assert not validator.is_valid({**sample, "person": {**me, "home": {"city": 1}}})
    assert hire.validate_args(sample)["person"].mentor.home.city == "Rome"
