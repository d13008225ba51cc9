"""Signatures as other frameworks' tools and BFCL's functions are written, ported to `@tool`."""

from __future__ import annotations

import sys
import typing
from typing import NotRequired, Required

import pytest
from typing_extensions import TypedDict as CompatTypedDict

from jianmu.errors import ToolValidationError
from jianmu.tools import tool


class Address(typing.TypedDict):  # the spelling being tested
    street: str
    zip: str


class Order(CompatTypedDict, total=False):
    item: Required[str]
    note: str


class Line(CompatTypedDict):
    sku: str
    qty: NotRequired[int]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydantic reads it from 3.12")
def test_a_typing_typed_dict_is_refused_with_the_spelling_that_works() -> None:
    """pydantic refuses `typing.TypedDict` before Python 3.12; the error said the type 'has
    no JSON Schema' and listed types without TypedDict, though only its import was wrong."""

    def ship(to: Address, many: list[Address], order: Order) -> str:
        """Ship."""
        return to["street"]

    with pytest.raises(ToolValidationError) as caught:
        tool(ship)
    text = str(caught.value)
    assert "parameter 'to'" in text and "parameter 'many'" in text
    assert "parameter 'order'" not in text  # typing_extensions' is fine
    assert text.count("typing_extensions.TypedDict") == 2, text


def test_typed_dicts_with_required_and_not_required_keys() -> None:
    @tool
    def place(order: Order, lines: list[Line]) -> str:
        """Place an order."""
        return order["item"] + str(len(lines))

    defs = place.parameters["$defs"]
    assert defs["Order"]["required"] == ["item"] and defs["Line"]["required"] == ["sku"]
    assert defs["Order"]["additionalProperties"] is False
    args = place.validate_args({"order": {"item": "tea"}, "lines": [{"sku": "a", "qty": "2"}]})
    assert args == {"order": {"item": "tea"}, "lines": [{"sku": "a", "qty": 2}]}


def test_var_keyword_parameters_take_nothing_from_the_model_unless_a_schema_says() -> None:
    """As design.md says: ``*args`` is refused, ``**kwargs`` is left out of a closed schema,
    and ``input_schema=`` gives such a function what the model sends."""

    def spread(*items: int) -> int:
        """Sum."""
        return sum(items)

    with pytest.raises(ToolValidationError, match=r"\*items is not supported; take a list"):
        tool(spread)

    def search(query: str, **filters: str) -> str:
        """Search."""
        return query + repr(sorted(filters.items()))

    made = tool(search)
    assert made.parameters["properties"].keys() == {"query"}
    assert made.parameters["additionalProperties"] is False
    given = tool(input_schema={"type": "object", "properties": {
        "query": {"type": "string"}, "color": {"type": "string"}}})(search)
    assert given.validate_args({"query": "q", "color": "red"}) == {"query": "q", "color": "red"}
