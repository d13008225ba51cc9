"""Red team: a subschema that names its own ``$schema``.

Found here: jsonschema validates a subschema that names a ``$schema`` with that dialect's stock
class. Every rule Jianmu adds to the validator (RE2 for ``pattern``, hashed ``enum`` and
``uniqueItems``, the budget) was dropped below it: ``{"$schema": draft-07, "pattern":
"^(a+)+$"}`` as a property's schema ran Python's backtracking `re` on the model's argument (24
characters took a second, each one more doubling it), and draft 4's meta-schema compared every
pair of an ``enum``'s values when the tool was made (8,000 objects: 64 s). Now a switch of
dialect keeps the rules. Work is counted in calls (`sys.setprofile`), never timed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from jianmu import _schema_rules
from jianmu.errors import ToolInputError
from jianmu.tools import Tool

DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT4 = "http://json-schema.org/draft-04/schema#"


def ok(**arguments: Any) -> str:
    return "ok"


def calls_made(action: Callable[[], Any]) -> int:
    count = 0

    def counted(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        count += event == "call"

    sys.setprofile(counted)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count


def test_a_pattern_under_a_nested_dialect_is_matched_by_re2() -> None:
    seen: list[str] = []
    real = _schema_rules.pattern_search

    def watched(pattern: str, text: str) -> bool:
        seen.append(pattern)
        return real(pattern, text)

    schema = {"type": "object", "properties": {
        "a": {"$schema": DRAFT7, "type": "string", "pattern": "^(a+)+$"}}}
    tool = Tool.from_openai({"name": "t", "description": "d", "parameters": schema}, ok)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_schema_rules, "pattern_search", watched)
        with pytest.raises(ToolInputError, match="does not match"):
            tool.validate_args({"a": "a" * 40 + "!"})  # years for a backtracking engine
    assert seen == ["^(a+)+$"]  # RE2 decided it, not Python's re


def test_draft_4_s_unique_enum_is_checked_in_time_linear_in_its_size() -> None:
    def made(size: int) -> Callable[[], Any]:
        schema = {"$schema": DRAFT4, "type": "object", "properties": {
            "a": {"enum": [{"k": i} for i in range(size)]}}}
        return lambda: Tool.from_openai(
            {"name": f"t{size}", "description": "d", "parameters": schema}, ok)

    small, large = calls_made(made(200)), calls_made(made(2_000))
    assert large < 30 * small  # ten times the values: it was a hundred times the work


def test_a_person_s_edit_checks_the_schema_in_time_linear_in_its_size() -> None:
    # the edit's check ran jsonschema's own check_schema again: every pair of the enum's values
    from jianmu.errors import ApprovalEditError
    from jianmu.runtime.context import ApprovalRequest, check_edit

    def edit(size: int) -> Callable[[], Any]:
        schema = {"$schema": DRAFT4, "type": "object", "properties": {
            "a": {"enum": [{"k": i} for i in range(size)]}}}
        request = ApprovalRequest(id="r1", kind="tool_call",
                                  payload={"tool": "t", "fingerprint": "f", "parameters": schema})

        def refused() -> None:
            with pytest.raises(ApprovalEditError, match="is not one of"):
                check_edit(request, {"a": {"k": -1}})

        return refused

    small, large = calls_made(edit(200)), calls_made(edit(2_000))
    assert large < 30 * small
