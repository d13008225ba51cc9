"""Red team, tool definitions from outside (an OpenAI definitions file): what is not text is
refused, and what is refused is named briefly.

Broke: a ``description`` that was an object, a list or a number was made text with ``str()``
and sent to the model with every request (an object's Python repr; a list of a million
words); a definition naming its tool with a megabyte made a two-megabyte error.
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu.errors import ToolDefinitionError, ToolValidationError
from jianmu.tools.registry import ToolSet


def _definition(name: Any, description: Any) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {}},
    }}


@pytest.mark.parametrize("description", [{"a": 1}, ["word"] * 1_000, 5, True])
def test_a_description_that_is_not_text_is_refused(description: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="'description' must be text"):
        ToolSet.from_openai([_definition("t", description)], {"t": lambda: "ran"})


def test_no_description_is_still_an_empty_one() -> None:
    tools = ToolSet.from_openai([_definition("t", None)], {"t": lambda: "ran"})
    assert tools.get("t").description == ""


def test_a_megabyte_name_is_refused_in_a_few_hundred_characters() -> None:
    name = "t" * 1_000_000
    with pytest.raises(ToolValidationError) as refused:
        ToolSet.from_openai([_definition(name, "d")], {name: lambda: "ran"})
    assert len(str(refused.value)) < 1_000
    assert "must match" in str(refused.value)
