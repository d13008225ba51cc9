"""Red team, a tool catalogue's ``patternProperties`` against a model's many-keyed argument.

Each pattern is matched by RE2 in linear time, but once per pattern and key: 200 patterns (a
60 KB schema) by 20,000 keys (a 300 KB argument) were 8,000,000 searches, 25 s on the event
loop, and a 10 MB argument hours. Fixed here: a key is matched against every pattern at once
(an RE2 set), so the searches grow with the keys alone. The work is counted, never timed.
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import _schema_rules
from jianmu.errors import ToolInputError
from jianmu.tools import Tool

PATTERNS = 200
KEYS = 20_000


def _tool(parameters: dict[str, Any]) -> Tool:
    return Tool.from_openai(
        {"type": "function", "function": {"name": "t", "description": "A tool.",
                                          "parameters": parameters}},
        lambda **kwargs: "ran",
    )


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times one pattern is searched in one key."""
    count = [0]
    search = _schema_rules.pattern_search

    def counted(pattern: str, text: str) -> bool:
        count[0] += 1
        return search(pattern, text)

    monkeypatch.setattr(_schema_rules, "pattern_search", counted)
    return count


def test_many_patterns_by_many_keys_take_a_pass_per_key(searches: list[int]) -> None:
    tool = _tool({"type": "object", "additionalProperties": False, "patternProperties": {
        f"^p{i}_[a-z]+$": {"type": "string"} for i in range(PATTERNS)
    }})
    arguments = {f"k{i}": 1 for i in range(KEYS)}
    with pytest.raises(ToolInputError, match="Additional properties are not allowed"):
        tool.validate_args(arguments)
    assert searches[0] <= KEYS  # was 2 * PATTERNS * KEYS


def test_each_matching_pattern_still_checks_its_keys() -> None:
    tool = _tool({"type": "object", "additionalProperties": False, "patternProperties": {
        "^n_": {"type": "integer"}, "_x$": {"minimum": 10}, "é": {"type": "string"},
    }})
    assert tool.validate_args({"n_a": 1, "n_b_x": 12, "café": "ok"}) is not None
    with pytest.raises(ToolInputError) as caught:
        tool.validate_args({"n_b_x": 3, "café": 1, "other": True})
    text = str(caught.value)
    assert "3 is less than the minimum of 10" in text  # n_b_x: both patterns apply
    assert "1 is not of type 'string'" in text and "'other' was unexpected" in text


def test_a_set_that_gives_up_falls_back_to_each_pattern_within_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class GivesUp:  # what RE2's set answers when its DFA runs out of memory
        def Match(self, text: str) -> None:  # RE2's name
            return None

    found = _schema_rules._Patterns(("^a", "b$"))
    monkeypatch.setattr(found, "_set", GivesUp())
    assert found.matching("ab") == [0, 1] and found.matching("zz") == []
    with pytest.raises(_schema_rules.TooComplex):
        _schema_rules.within_budget(lambda: iter([found.matching("ab")]), 1)
