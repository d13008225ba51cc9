"""Red team: a model's reply of thousands of calls under one id.

Each call's id is made unique in the run (``x``, ``x.1``, ``x.2``...): the k-th repeat of an
id tried ``x``, ``x.1``, ... ``x.k`` again, so a reply of 10,000 calls of one id was 50,000,000
tries, three times per batch: 19 s of the event loop, every timeout stopped. Now each id
goes on from the suffix it got last. Work is counted, not timed: the lines `unique_ids` runs.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest

from jianmu import ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.nodes.tool_executor import unique_ids
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
CALLS = 300


@tool
def note(text: str) -> str:
    """Take a note.

    Args:
        text: the note.
    """
    return "noted"


async def test_a_reply_repeating_one_id_is_numbered_in_work_linear_in_its_calls() -> None:
    lines = [0]

    def counting(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code is not unique_ids.__code__:
            return None
        lines[0] += event == "line"
        return counting

    batch = [{"id": "same", "name": "note", "arguments": {"text": str(i)}} for i in range(CALLS)]
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(create_react_node(ScriptedLLM([batch, "done"]), [note], name="a"),
                            state)
    previous = sys.gettrace()  # a coverage tool's, say: back once counted
    sys.settrace(counting)
    try:
        result = await runner.run(timeout=60)
    finally:
        sys.settrace(previous)
    assert result.ok, result.error
    ids = [m.tool_call_id for m in state.get("messages") if m.role == "tool"]
    assert ids == ["same"] + [f"same.{n}" for n in range(1, CALLS)]
    # a few dozen lines per call, each time the batch is numbered; trying every suffix again
    # was 135,000 for each
    assert lines[0] < 100 * CALLS, lines[0]
