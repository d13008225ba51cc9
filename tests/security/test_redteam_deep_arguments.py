"""Red team: a model whose tool call nests its arguments hundreds of levels deep.

Found here: valid JSON arguments nested 300 objects deep, for a tool that takes any object,
were accepted; a run with a checkpointer then raised pydantic's "Maximum serialization depth
exceeded" out of ``run()`` (and a stream), saving its checkpoint. Now a model's arguments nest
at most `MAX_ARGUMENT_NESTING` deep: deeper ones are kept as text and refused like arguments
that are not JSON, the tool never runs, and the run goes on and ends as usual.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.llm import LLMResponse, Message, ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime import SQLiteCheckpointer
from jianmu.tools import tool
from jianmu.tools.calls import MAX_ARGUMENT_NESTING, ToolCall, nests_within

pytestmark = pytest.mark.anyio
STORED: list[Any] = []


@tool
def store(x: dict) -> str:
    """Store anything.

    Args:
        x: the thing.
    """
    STORED.append(x)
    return "stored"


def nested(levels: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def as_text(levels: int) -> str:
    return '{"x": ' + '{"a": ' * levels + "1" + "}" * levels + "}"


async def run_call(arguments: Any, tmp_path: Path) -> tuple[Any, list[Message], list[str]]:
    STORED.clear()
    reply = LLMResponse(message=Message(role="assistant", tool_calls=[
        {"id": "c1", "name": "store", "arguments": arguments}]))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(
        create_react_node(ScriptedLLM([reply, "done"]), [store]), state,
        checkpointer=SQLiteCheckpointer(str(tmp_path / "runs.db")),
    )
    names: list[str] = []
    async for event in runner.stream(timeout=60):
        names.append(event.name)
    result = event.fields["result"]
    return result, state.get("messages"), names


@pytest.mark.parametrize("arguments", [as_text(300), as_text(20_000), {"x": nested(300)}],
                         ids=["text-300", "text-20000", "object-300"])
async def test_arguments_nested_too_deep_are_refused_and_the_run_goes_on(
    arguments: Any, tmp_path: Path
) -> None:
    result, messages, names = await run_call(arguments, tmp_path)
    assert result.status is RunStatus.SUCCESS, result.error
    assert STORED == []  # the tool never ran
    (observation,) = [m.content for m in messages if m.role == "tool"]
    assert f"nest deeper than {MAX_ARGUMENT_NESTING} levels" in observation
    assert names[-1] == "run.finished"
    # the checkpoint was written and reads back
    saved = SQLiteCheckpointer(str(tmp_path / "runs.db")).load(result.run_id)
    assert saved is not None and saved["status"] == "success"
    json.dumps(saved)


async def test_arguments_nested_as_deep_as_allowed_still_reach_the_tool(tmp_path: Path) -> None:
    deepest = MAX_ARGUMENT_NESTING - 1  # inside the outer object
    result, _, _ = await run_call(as_text(deepest), tmp_path)
    assert result.status is RunStatus.SUCCESS, result.error
    assert STORED == [nested(deepest)]


def test_nesting_is_measured_without_python_s_stack() -> None:
    value: Any = []
    for _ in range(200_000):
        value = [value]
    assert not nests_within(value, MAX_ARGUMENT_NESTING)
    assert nests_within(nested(MAX_ARGUMENT_NESTING), MAX_ARGUMENT_NESTING)
    assert not nests_within(nested(MAX_ARGUMENT_NESTING + 1), MAX_ARGUMENT_NESTING)
    call = ToolCall.from_dict({"name": "store", "arguments": {"x": value}})
    assert isinstance(call.arguments, str)  # not the object: its text could not be made


@tool(category="write", permission="user_confirm")
def save(x: dict) -> str:
    """Save anything (asks a person first).

    Args:
        x: the thing.
    """
    STORED.append(x)
    return "saved"


def test_a_person_s_edit_nested_too_deep_is_refused_and_the_request_stays(
    tmp_path: Path,
) -> None:
    # the same bound holds for an edit: accepted, it made the checkpoint fail as the model's did
    from jianmu.errors import ApprovalEditError

    STORED.clear()
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(
        create_react_node(ScriptedLLM([[{"name": "save", "arguments": {"x": {"a": 1}}}],
                                       "done"]), [save]),
        state, checkpointer=SQLiteCheckpointer(str(tmp_path / "runs.db")),
    )
    first = runner.run_sync(timeout=60)
    assert first.status is RunStatus.SUSPENDED, first.error
    request = first.pending[0].id
    with pytest.raises(ApprovalEditError, match=f"nest deeper than {MAX_ARGUMENT_NESTING}"):
        runner.approve(request, arguments={"x": nested(300)})
    assert [r.id for r in runner.interaction.pending] == [request]  # still asked
    runner.approve(request, arguments={"x": nested(3)})
    assert runner.run_sync(timeout=60).ok
    assert STORED == [nested(3)]


@pytest.mark.parametrize("arguments", [as_text(20_000), as_text(300), {"x": nested(300)}],
                         ids=["text-20000", "text-300", "object-300"])
async def test_toolset_execute_refuses_arguments_nested_too_deep(arguments: Any) -> None:
    # ToolSet.execute never raises for a call: JSON text 20,000 deep raised RecursionError out
    # of its check of text arguments, and arguments 300 deep (as text or as an object) reached
    # the tool, where the executor refuses a model's
    from jianmu.tools import ToolSet

    STORED.clear()
    result = await ToolSet.from_tools([store]).execute("store", arguments)
    assert not result.ok and f"nest deeper than {MAX_ARGUMENT_NESTING} levels" in (
        result.error or "")
    assert STORED == []
