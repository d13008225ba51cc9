"""Red team: a model that sends ``NaN``, ``Infinity`` or ``1e309`` for a bounded number.

Found here: Python's `json` reads ``NaN`` and ``Infinity`` (JSON has neither) and reads
``1e309`` as inf. A NaN passes every ``minimum`` and ``maximum`` (each comparison is false), so
a refund tool whose schema bounds ``amount`` to 0..100 ran with ``amount=nan``; tools checked by
a plan of plain scalars (a function's ``float``, an MCP server's ``number``) took NaN and
infinities without a look. Now such a number anywhere in a model's arguments is refused by
every check, with its path, and the tool never runs.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from jianmu import ReactiveRunner, StateManager
from jianmu.errors import ToolInputError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import ToolSet, tool
from jianmu.tools._arguments import scalar_plan, validate_planned
from jianmu.tools.calls import non_finite_at

pytestmark = pytest.mark.anyio

BOUNDED = {"type": "object", "required": ["amount"], "properties": {
    "amount": {"type": "number", "minimum": 0, "maximum": 100},
    "parts": {"type": "array", "items": {"type": "number", "exclusiveMaximum": 10}},
}}
PAID: list[Any] = []


def refund(**arguments: Any) -> str:
    PAID.append(arguments)
    return "refunded"


@tool
def scale(factor: float) -> str:
    """Scale by a factor.

    Args:
        factor: the factor.
    """
    PAID.append(factor)
    return "scaled"


@pytest.mark.parametrize("text", [
    '{"amount": NaN}', '{"amount": Infinity}', '{"amount": -Infinity}', '{"amount": 1e309}',
    '{"amount": 5, "parts": [1, NaN]}',
])
def test_a_bounded_number_given_nan_or_infinity_never_reaches_the_tool(text: str) -> None:
    PAID.clear()
    tools = ToolSet.from_openai(
        [{"name": "refund", "description": "Refund.", "parameters": BOUNDED}], [refund])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "refund"}]})
    script: list[Any] = [[{"id": "c1", "name": "refund", "arguments": text}], "Done."]
    runner = ReactiveRunner(create_react_node(ScriptedLLM(script), tools), state)
    assert runner.run_sync(timeout=60).ok
    assert PAID == []
    observed = [m.content for m in state.get("messages") if m.role == "tool"]
    assert len(observed) == 1 and "not JSON numbers" in observed[0]
    assert ("$.parts[1]" if "parts" in text else "$.amount") in observed[0]


async def test_every_check_refuses_a_non_finite_number_with_its_path() -> None:
    PAID.clear()
    tools = ToolSet.from_tools([scale])
    for value in (math.nan, math.inf):
        result = await tools.execute("scale", {"factor": value})
        assert not result.ok and "$.factor: NaN and Infinity" in (result.error or "")
    plan = scalar_plan({"type": "object", "properties": {"x": {"type": "number"}}})
    assert plan is not None
    with pytest.raises(ToolInputError, match=r"\$\.x: NaN"):  # an MCP server's plain number
        validate_planned("remote", {"type": "object", "properties": {"x": {"type": "number"}}},
                         plan, {"x": math.nan})
    assert PAID == []
    assert (await tools.execute("scale", {"factor": -0.0})).ok  # finite: a number as any


def test_the_search_is_bounded_by_nesting_even_for_a_value_holding_itself() -> None:
    looped: dict[str, Any] = {"n": 1.5}
    looped["a"] = looped
    looped["b"] = looped  # 2**depth paths: the walk gives up at the nesting limit
    assert non_finite_at(looped) is None
    assert non_finite_at({"a": [{"b": 1.0}, {"c": [math.nan]}]}) == "$.a[1].c[0]"
