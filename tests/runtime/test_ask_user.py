"""Asking the user (issue 36, item 4): the ``ask_user`` tool, `AskUser` and ``runner.answer``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import py_trees
import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.errors import CheckpointError, InteractionError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AskUser, create_react_node
from jianmu.nodes.state import AgentState
from jianmu.runtime import ApprovalRequest, SQLiteCheckpointer
from jianmu.tools import ToolSet

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]


def respond(messages: list) -> object:  # type: ignore[type-arg]
    """Ask once; then answer with what the user said (a restored run's model asks afresh)."""
    said = [m.content for m in messages if m.role == "tool"]
    if said:
        return f"Booking a trip to {said[-1]}."
    return [{"id": "q1", "name": "ask_user", "arguments": {"question": "Which city?"}}]


def agent(**kwargs: object) -> ReactiveRunner:
    node = create_react_node(ScriptedLLM([respond, respond]), ToolSet.resolve(["ask_user"]))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "book a trip"}]})
    return ReactiveRunner(node, state, **kwargs)  # type: ignore[arg-type]


async def test_the_model_asks_and_reads_the_answer() -> None:
    runner = agent()
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    (request,) = first.pending
    assert request.kind == "question" and request.question == "Which city?"
    assert request.id == "ask:q1"

    with pytest.raises(InteractionError, match="is a question"):
        runner.approve(request.id)
    with pytest.raises(InteractionError, match="is a question"):
        runner.reject(request.id, "no")
    runner.answer(request.id, "Lisbon")
    with pytest.raises(InteractionError, match="already answered"):
        runner.answer(request.id, "Porto")

    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS, result.error
    assert runner.state.get("final_answer") == "Booking a trip to Lisbon."
    tool_messages = [m for m in runner.state.get("messages") if m.role == "tool"]
    assert [m.content for m in tool_messages] == ["Lisbon"]


async def test_answering_an_approval_is_refused() -> None:
    runner = agent()
    runner.interaction.suspend(ApprovalRequest(id="deploy", summary="deploy?"))
    with pytest.raises(InteractionError, match="asks for approval"):
        runner.answer("deploy", "yes")
    assert runner.interaction.decision("deploy") is None
    with pytest.raises(InteractionError, match="no approval request 'nope'"):
        runner.answer("nope", "x")


async def test_a_run_nobody_can_answer_tells_the_model() -> None:
    runner = agent(interactive=False)
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    assert "nobody can answer" in runner.state.get("final_answer")


async def test_an_askuser_node_writes_the_answer_to_the_state() -> None:
    tree = py_trees.composites.Sequence("Root", memory=True, children=[
        AskUser("ask", question="Which city?", output_key="city"),
        AskUser("again", question_key="follow_up", output_key="when"),
    ])
    runner = ReactiveRunner(tree, StateManager(initial={"follow_up": "When do you leave?"}))
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    (city,) = first.pending
    assert city.question == "Which city?"
    runner.answer(city.id, "Lisbon")
    second = await runner.run(timeout=30)
    assert second.status is RunStatus.SUSPENDED
    (when,) = second.pending
    assert when.question == "When do you leave?"
    runner.answer(when.id, "Friday")
    assert (await runner.run(timeout=30)).status is RunStatus.SUCCESS
    assert runner.state.get("city") == "Lisbon" and runner.state.get("when") == "Friday"


def test_askuser_needs_exactly_one_source_of_question() -> None:
    with pytest.raises(ValueError, match="either"):
        AskUser("ask")
    with pytest.raises(ValueError, match="either"):
        AskUser("ask", question="a", question_key="b")


def test_an_old_snapshot_without_kinds_still_restores() -> None:
    from jianmu.runtime import Interaction

    old = {"asked": [{"id": "c", "kind": "tool_call", "summary": "s", "payload": {},
                      "node": None, "created": 1.0}],
           "pending": [], "decisions": [{"request_id": "c", "approved": True, "message": None}],
           "consumed": []}
    interaction = Interaction()
    interaction.restore(old)
    decision = interaction.decision("c")
    assert decision is not None and decision.approved and not decision.edited
    assert interaction.request("c").question is None  # type: ignore[union-attr]


RESUME = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from test_ask_user import agent
from jianmu import ReactiveRunner
from jianmu.runtime import SQLiteCheckpointer

fresh = agent()
store = SQLiteCheckpointer(sys.argv[2])
runner = ReactiveRunner.restore(fresh.root, store, sys.argv[3], state_manager=fresh.state)
(request,) = runner.pending
runner.answer(request.id, "Kyoto")
result = runner.run_sync(timeout=30)
print(json.dumps({"status": result.status.value, "kind": request.kind,
                  "question": request.question, "answer": runner.state.get("final_answer")}))
'''


async def test_a_question_answered_after_a_restore_in_another_process(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(db)
    first = agent(checkpointer=store)
    assert (await first.run(timeout=30)).status is RunStatus.SUSPENDED
    store.close()

    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RESUME), str(Path(__file__).parent), str(db),
         first.run_id],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"status": "success", "kind": "question", "question": "Which city?",
                      "answer": "Booking a trip to Kyoto."}


async def test_a_sub_agent_asks_through_the_callers_channel() -> None:
    from jianmu.nodes import agent_tool

    helper = create_react_node(ScriptedLLM([respond, respond]), ToolSet.resolve(["ask_user"]),
                               name="helper")
    lead = ScriptedLLM([
        [{"id": "h1", "name": "planner", "arguments": {"input": "plan a trip"}}],
        lambda messages: "lead: " + messages[-1].content,
    ])
    tools = [agent_tool(helper, name="planner", description="Plans trips.")]
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "trip"}]})
    runner = ReactiveRunner(create_react_node(lead, tools), state)
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    (request,) = first.pending
    assert request.kind == "question" and request.question == "Which city?"
    assert request.id.endswith("ask:q1") and request.id != "ask:q1"
    runner.answer(request.id, "Oslo")
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS, result.error
    assert state.get("final_answer") == "lead: Booking a trip to Oslo."


async def test_an_answer_the_state_cannot_hold_is_asked_again_not_a_stuck_run(
    tmp_path: Path,
) -> None:
    """`AskUser` wrote "five" to an ``int`` key: the run failed, and every later run failed
    the same way, since the answer stood and could not be given again. It asks again, saying
    why, also after a restore."""
    from pydantic import BaseModel

    class Order(BaseModel):
        count: int = 0

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    runner = ReactiveRunner(AskUser("ask", question="How many?", output_key="count"),
                            StateManager(Order), checkpointer=store)
    (first,) = (await runner.run(timeout=30)).pending
    runner.answer(first.id, "five")
    again = await runner.run(timeout=30)
    assert again.status is RunStatus.SUSPENDED, again.error
    (second,) = again.pending
    assert second.id != first.id and second.kind == "question"
    assert (second.question or "").startswith("How many?")
    assert "'five'" in (second.question or "") and "integer" in (second.question or "")
    restored = ReactiveRunner.restore(AskUser("ask", question="How many?", output_key="count"),
                                      store, runner.run_id, state_manager=StateManager(Order))
    restored.answer(second.id, "5")
    done = await restored.run(timeout=30)
    assert done.status is RunStatus.SUCCESS, done.error
    assert restored.state.get("count") == 5


async def test_a_huge_answer_the_state_cannot_hold_is_quoted_clipped_in_the_next_question(
) -> None:
    """The question asked again quoted the refused answer whole: a pasted page (or a
    megabyte) became the text of the question, kept in the run and shown to the person."""
    from pydantic import BaseModel

    class Order(BaseModel):
        count: int = 0

    runner = ReactiveRunner(AskUser("ask", question="How many?", output_key="count"),
                            StateManager(Order))
    (first,) = (await runner.run(timeout=30)).pending
    runner.answer(first.id, "five " * 20_000)
    (second,) = (await runner.run(timeout=30)).pending
    question = second.question or ""
    assert question.startswith("How many?") and "five five" in question
    assert len(question) < 2_000


async def test_an_answer_given_after_a_restore_without_a_state_keeps_the_conversation(
    tmp_path: Path,
) -> None:
    """``ReactiveRunner.restore(tree, checkpointer, run_id)``, as the README writes it, gave a
    state without a schema: the answer replaced the whole conversation, and the model was asked
    with the answer alone (here the script's ``[]`` -> IndexError; a real model answered it)."""
    db = str(tmp_path / "runs.db")
    runner = agent(checkpointer=SQLiteCheckpointer(db))
    (question,) = (await runner.run(timeout=30)).pending
    llm = ScriptedLLM([respond])
    node = create_react_node(llm, ToolSet.resolve(["ask_user"]))
    restored = ReactiveRunner.restore(node, SQLiteCheckpointer(db), runner.run_id)
    restored.answer(question.id, "Lisbon")
    done = await restored.run(timeout=30)
    assert done.status is RunStatus.SUCCESS, done.error
    assert [m.role for m in llm.requests[0].messages] == ["user", "assistant", "tool"]
    assert restored.state.get("final_answer") == "Booking a trip to Lisbon."


def test_a_state_schema_not_imported_is_named_not_restored_without_it(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(str(tmp_path / "runs.db"))
    runner = agent(checkpointer=store)
    runner.run_sync(timeout=30)
    saved = store.load(runner.run_id)
    assert saved is not None and saved["state_schema"] == "jianmu.nodes.state:AgentState"
    store.save(runner.run_id, {**saved, "state_schema": "not_imported_app.states:Trip"})
    with pytest.raises(CheckpointError, match=r"has the schema not_imported_app\.states:Trip, "
                                              r"not a schema imported here: pass ReactiveRunner"
                                              r"\.restore\(\.\.\., state_manager=StateManager"
                                              r"\(Trip\)\)"):
        ReactiveRunner.restore(agent().root, store, runner.run_id)
    assert "not_imported_app" not in sys.modules  # a checkpoint never makes a module load
    store.save(runner.run_id, {**saved, "state_schema": "os:system"})  # imported, no schema
    with pytest.raises(CheckpointError, match="has the schema os:system, not a schema"):
        ReactiveRunner.restore(agent().root, store, runner.run_id)
