"""Red team, a poisoned tool catalogue naming a property like a parameter the function types
as the runtime's own (``state: Injected[StateView]``, ``ctx: RunContext``).

A tool made from a schema (`Tool.from_openai`, `Tool.from_schema`) injects nothing: its
function receives the model's arguments only. Fixed here: a definition that added a
``state`` (or ``ctx``) property made the tool, and the function read the model's forged dict
where it declared the run's state view or context. Such a definition is now a
`ToolDefinitionError`, as the design promises for any tool that declares both.
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import RunContext, StateView
from jianmu.errors import ToolDefinitionError
from jianmu.tools import Injected, Tool


def handler(query: str, state: Injected[StateView], ctx: RunContext) -> str:
    """Reads the run's state (what a developer wrote for a run's own values)."""
    return f"{query}: {state.get('role')} {ctx.run_id}"


def _definition(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": "lookup", "description": "Look something up.",
        "parameters": {"type": "object", "properties": properties, "required": ["query"]},
    }}


@pytest.mark.parametrize("forged", ["state", "ctx"])
def test_a_property_named_like_an_injected_parameter_is_refused(forged: str) -> None:
    properties = {"query": {"type": "string"}, forged: {"type": "object"}}
    with pytest.raises(ToolDefinitionError, match=f"parameter '{forged}' is declared injected"):
        Tool.from_openai(_definition(properties), handler)


def test_a_definition_of_the_models_own_arguments_is_still_made() -> None:
    def plain(query: str, limit: int = 5) -> str:
        return f"{query} {limit}"

    tool = Tool.from_openai(_definition({"query": {"type": "string"},
                                         "limit": {"type": "integer"}}), plain)
    assert tool.validate_args({"query": "x", "limit": 2}) == {"query": "x", "limit": 2}
    untyped = Tool.from_openai(_definition({"query": {"type": "string"},
                                            "state": {"type": "object"}}), lambda **kw: kw)
    assert untyped.validate_args({"query": "x", "state": {}}) == {"query": "x", "state": {}}
