"""Red team: a tool whose result or error cannot be turned into text the usual way.

Found here: a tool returning a dict nested 3,000 deep (parsed from a hostile file, say), an int
past Python's 4,300-digit limit, an object whose ``__str__`` raises, or raising an exception
whose ``__str__`` raises, failed the whole run ("ReAct.tools: RecursionError ..."), against
the rule that every failure of a call is an observation; and one returning an endless
generator hung the event loop for good (pydantic drew items from it to render it). Now the
rendering never raises and never draws from an iterator (`render_output`, `printable`): the
model is told what could be shown, and the run goes on.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.llm import LLMResponse, Message, ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime import SQLiteCheckpointer
from jianmu.tools import tool
from jianmu.tools.calls import printable, render_output

pytestmark = pytest.mark.anyio


def nested(levels: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no text")

    __str__ = __repr__


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


@tool
def deep_result() -> dict:
    """A result nested past Python's stack."""
    return nested(50_000)  # past the stack of 3.11 and 3.13 alike


@tool
def huge_int() -> int:
    """An int past the digits limit."""
    return 10**5000


@tool
def odd_object() -> object:
    """An object that cannot say what it is."""
    return Unprintable()


@tool
def odd_error() -> str:
    """Fails with an exception that cannot say what went wrong."""
    raise UnprintableError()


@tool
def endless() -> object:
    """Numbers without end."""
    return itertools.count()


@pytest.mark.parametrize(("name", "told"), [
    ("endless", "count(0)"),
    ("deep_result", "<dict that cannot be shown: RecursionError>"),
    ("huge_int", "<int that cannot be shown: ValueError>"),
    ("odd_object", "<Unprintable that cannot be shown: RuntimeError>"),
    ("odd_error", "UnprintableError: <UnprintableError that cannot be shown: RuntimeError>"),
])
async def test_the_call_is_an_observation_and_the_run_goes_on(
    name: str, told: str, tmp_path: Path
) -> None:
    reply = LLMResponse(message=Message(role="assistant", tool_calls=[
        {"id": "c1", "name": name, "arguments": {}}]))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(
        create_react_node(ScriptedLLM([reply, "done"]),
                          [deep_result, huge_int, odd_object, odd_error, endless]),
        state, checkpointer=SQLiteCheckpointer(os.fspath(tmp_path / "runs.sqlite")),
    )
    events = [event async for event in runner.stream(timeout=60)]
    result = events[-1].fields["result"]
    assert result.status is RunStatus.SUCCESS, result.error
    (observation,) = [m.content for m in state.get("messages") if m.role == "tool"]
    assert told in (observation or "")
    assert state.get("final_answer") == "done"


def test_rendering_never_raises() -> None:
    assert render_output(nested(50_000)) == "<dict that cannot be shown: RecursionError>"
    assert render_output(10**5000) == "<int that cannot be shown: ValueError>"
    assert printable(Unprintable()) == "<Unprintable that cannot be shown: RuntimeError>"
    assert render_output({"k": [1, "木"]}) == '{"k": [1, "木"]}'  # the usual, unchanged
    assert render_output(iter([1, 2])).startswith('"<list_iterator object')  # never drawn
