"""A JSON Schema ``pattern`` as JSON Schema means it, read by RE2: ``\\uXXXX`` escapes kept
(a server's ``Field(pattern=r"^[\\u0020-\\u007e]+$")`` dropped the whole tool as "not RE2
syntax"), and a value holding a lone surrogate (JSON's ``"\\ud800"``) checked like any other
value: it gave a bare ``UnicodeEncodeError`` with no path."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import _schema_rules
from jianmu.errors import ToolInputError
from jianmu.tools import Tool


def _tool(properties: dict[str, Any]) -> Tool:
    return Tool.from_openai(
        {"type": "function", "function": {"name": "t", "description": "A tool.", "parameters": {
            "type": "object", "properties": properties, "required": list(properties)}}},
        lambda **kwargs: "ran",
    )


@pytest.mark.parametrize(("pattern", "syntax"), [
    (r"^[\u0020-\u007e]+$", r"^[\x{20}-\x{7E}]+$"),
    (r"\uD83D\uDE00", r"\x{1F600}"),
    (r"\u{1F600}", r"\x{1F600}"),
    (r"\\u0041", r"\\u0041"),  # an escaped backslash, then a plain u
    (r"a\d\.b", r"a\d\.b"),
    (r"\u12", r"\u12"),  # no escape RE2 can take: left for it to refuse
])
def test_a_unicode_escape_is_read_as_json_schema_means_it(pattern: str, syntax: str) -> None:
    assert _schema_rules.re2_syntax(pattern) == syntax


@pytest.mark.parametrize("key", ["pattern", "patternProperties"])
def test_a_tool_whose_pattern_has_a_unicode_escape_is_kept_and_checked(key: str) -> None:
    pattern = r"^[\u0020-\u007e]+$"
    if key == "pattern":
        tool = _tool({"code": {"type": "string", "pattern": pattern}})
        assert tool.validate_args({"code": "AB-1"}) == {"code": "AB-1"}
        with pytest.raises(ToolInputError, match=r"\$\.code"):
            tool.validate_args({"code": "é"})
    else:
        tool = _tool({"tags": {"type": "object", "additionalProperties": False,
                               "patternProperties": {pattern: {"type": "string"}}}})
        assert tool.validate_args({"tags": {"a": "x"}}) == {"tags": {"a": "x"}}
        with pytest.raises(ToolInputError, match=r"tags"):
            tool.validate_args({"tags": {"é": "x"}})


@pytest.mark.parametrize("value", ["\ud800", "A\udfffB", "\ud83d"])
def test_a_lone_surrogate_is_checked_against_a_pattern_with_its_path(value: str) -> None:
    tool = _tool({"code": {"type": "string", "pattern": "^[A-Z]{2}$"}})
    with pytest.raises(ToolInputError, match=r"\$\.code") as raised:
        tool.validate_args({"code": value})
    assert "UnicodeEncodeError" not in str(raised.value)
    tags = _tool({"tags": {"type": "object", "additionalProperties": False,
                           "patternProperties": {"^[a-z]+$": {"type": "string"}}}})
    with pytest.raises(ToolInputError) as raised:
        tags.validate_args({"tags": {value: "x"}})
    assert "UnicodeEncodeError" not in str(raised.value)
