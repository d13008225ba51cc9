"""Red team: a ``null`` beside a large argument, under a schema with a wide anyOf.

Found here: when a check fails and an argument is ``null``, the nulls that strict mode sends
for "not given" are dropped and the check runs again. That walk looked at every anyOf form for
every item, with no budget: 2,000 items (6 KB) under an anyOf of 5,000 forms were 10,000,000
steps, 8 s on the event loop, where the check itself is bounded by the argument's size. Now the
walk spends a budget of the same size, and past it keeps the arguments as they are. Work is
counted in Python calls (`sys.setprofile`), never timed.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from jianmu.errors import ToolInputError
from jianmu.tools import Tool

WIDE = {"type": "object", "properties": {
    "xs": {"type": "array", "items": {"anyOf": [
        *({"type": "string", "maxLength": i + 1} for i in range(2000)), {"type": "integer"}]}},
    "note": {"type": "string"},
}}


def ok(**arguments: Any) -> str:
    return "ok"


def calls_made(tool: Tool, arguments: dict[str, Any]) -> int:
    count = 0

    def counted(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        count += event == "call"

    sys.setprofile(counted)
    try:
        with pytest.raises(ToolInputError):
            tool.validate_args(arguments)
    finally:
        sys.setprofile(None)
    return count


def test_dropping_nulls_costs_no_more_than_the_check_it_follows() -> None:
    tool = Tool.from_openai({"name": "wide", "description": "d", "parameters": WIDE}, ok)
    items = [1] * 300  # each item checked against 2,001 forms: past the check's budget
    plain = calls_made(tool, {"xs": items, "note": "x"})
    with_null = calls_made(tool, {"xs": items, "note": None})
    assert with_null < 2 * plain  # it was 9 times the check's work, growing with the anyOf


def test_a_null_for_an_optional_field_still_means_not_given() -> None:
    tool = Tool.from_openai({"name": "wide", "description": "d", "parameters": WIDE}, ok)
    assert tool.validate_args({"xs": [1, "a"], "note": None}) == {"xs": [1, "a"]}
