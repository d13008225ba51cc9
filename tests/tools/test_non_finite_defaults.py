"""A default JSON cannot write (``float("inf")`` as "no limit", a NaN) is left out of the
schema: a model API refuses every request whose tool schema holds ``Infinity`` or ``NaN``
(they are not JSON). The parameter stays optional, and a call that leaves it out still gets the
default."""

from __future__ import annotations

import json
import math
from typing import Annotated

from pydantic import BaseModel, Field

from jianmu.tools import tool


class Limits(BaseModel):
    top: float = math.inf
    tags: list[str] = []


@tool
def search(query: str, max_price: float = math.inf, min_price: float = -math.inf,
           score: float = math.nan) -> str:
    """Search the shop."""
    return f"{query} {max_price} {min_price} {score}"


@tool
def ranked(
    limit: Annotated[float, Field(description="at most")] = math.inf,
    bounds: list[float] = [0.0, math.inf],  # noqa: B006 (never mutated)
    limits: Limits | None = None,
) -> str:
    """Rank."""
    return f"{limit} {bounds} {limits}"


def test_a_schema_never_holds_a_number_json_has_not() -> None:
    for made in (search, ranked):
        for definition in (made.to_openai(), made.to_anthropic(), made.to_mcp(),
                           made.to_openai(strict=True)):
            json.dumps(definition, allow_nan=False)  # raises on NaN or Infinity
    props = search.parameters["properties"]
    assert "default" not in props["max_price"] and props["max_price"]["type"] == "number"
    assert search.parameters["required"] == ["query"]
    assert ranked.parameters["properties"]["limit"]["description"] == "at most"
    assert "default" not in ranked.parameters["$defs"]["Limits"]["properties"]["top"]
    assert ranked.parameters["$defs"]["Limits"]["properties"]["tags"]["default"] == []


def test_a_call_that_leaves_the_parameter_out_gets_its_default() -> None:
    args = search.validate_args({"query": "tea"})
    assert args["max_price"] == math.inf and args["min_price"] == -math.inf
    assert math.isnan(args["score"])
    assert search.validate_args({"query": "tea", "max_price": 5})["max_price"] == 5
    got = ranked.validate_args({"limits": {}})
    assert got["limit"] == math.inf and got["bounds"] == [0.0, math.inf]
    assert got["limits"].top == math.inf
