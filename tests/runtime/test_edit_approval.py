"""Editing a call at approval (issue 36, item 3): ``runner.approve(id, arguments={...})``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.errors import ApprovalEditError, InteractionError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import create_react_node
from jianmu.nodes.state import AgentState
from jianmu.runtime import SQLiteCheckpointer
from jianmu.tools import Tool, ToolSet, tool

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]

PAID: list[tuple[int, str]] = []


@tool
def transfer(amount: int, to: str) -> str:
    """Send money.

    Args:
        amount: how much.
        to: to whom.
    """
    PAID.append((amount, to))
    return f"sent {amount} to {to}"


def last_tool(messages: list) -> str:  # type: ignore[type-arg]
    return [m.content for m in messages if m.role == "tool"][-1]


def agent_runner(**kwargs: object) -> ReactiveRunner:
    llm = ScriptedLLM([
        [{"id": "pay", "name": "transfer", "arguments": {"amount": 100, "to": "bob"}}],
        lambda messages: "done: " + last_tool(messages),
    ])
    constraints = Constraints.model_validate({"guard": {"tool_policy": {"transfer": "confirm"}}})
    node = create_react_node(llm, [transfer], constraints=constraints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pay bob"}]})
    return ReactiveRunner(node, state, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _clear() -> None:
    PAID.clear()


async def test_an_edited_call_runs_with_the_new_arguments_and_is_recorded() -> None:
    runner = agent_runner()
    events: list[tuple[str, dict]] = []  # type: ignore[type-arg]
    runner.ctx.events.subscribe("interaction.*", lambda e: events.append((e.name, dict(e.fields))))
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    (request,) = first.pending
    assert request.payload["parameters"]["required"] == ["amount", "to"]

    runner.approve("pay", arguments={"amount": 5, "to": "bob"})
    result = await runner.run(timeout=30)

    assert result.status is RunStatus.SUCCESS, result.error
    assert PAID == [(5, "bob")]
    decision = runner.interaction.decision("pay")
    assert decision is not None and decision.edited and decision.arguments == {
        "amount": 5, "to": "bob"}
    approved = [f for name, f in events if name == "interaction.approved"]
    assert approved == [{"request_id": "pay", "edited": True,
                         "arguments": {"amount": 5, "to": "bob"}}]
    messages = runner.state.get("messages")
    # the model's own call stays as it asked; its observation says what ran instead
    assistant = next(m for m in messages if m.role == "assistant" and m.tool_calls)
    assert assistant.tool_calls[0].arguments == {"amount": 100, "to": "bob"}
    observation = last_tool(messages)
    assert observation.startswith("[a person edited this call's arguments to ")
    assert '"amount": 5' in observation and observation.endswith("sent 5 to bob")
    assert runner.state.get("final_answer").endswith("sent 5 to bob")


async def test_an_edit_the_schema_refuses_is_not_recorded_and_nothing_runs() -> None:
    runner = agent_runner()
    assert (await runner.run(timeout=30)).status is RunStatus.SUSPENDED

    with pytest.raises(ApprovalEditError) as caught:
        runner.approve("pay", arguments={"amount": "lots", "to": "bob", "memo": "x"})
    text = str(caught.value)
    assert "'transfer'" in text and "$.amount" in text and "memo" in text
    assert caught.value.problems and isinstance(caught.value, InteractionError)
    with pytest.raises(ApprovalEditError, match=r"'to' is a required property"):
        runner.approve("pay", arguments={"amount": 1})
    with pytest.raises(ApprovalEditError, match="JSON object"):
        runner.approve("pay", arguments=[1, 2])  # type: ignore[arg-type]
    assert runner.interaction.decision("pay") is None
    assert [r.id for r in runner.pending] == ["pay"]
    assert PAID == []

    # the request still waits: a fitting edit is taken
    runner.approve("pay", arguments={"amount": 7, "to": "carol"})
    assert (await runner.run(timeout=30)).status is RunStatus.SUCCESS
    assert PAID == [(7, "carol")]


async def test_an_edit_the_policy_denies_does_not_run(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "victim").write_text("keep me\n")
    from jianmu.tools.builtin import BashTool

    llm = ScriptedLLM([
        [{"id": "sh", "name": "bash", "arguments": {"command": "ls"}}],
        lambda messages: "saw: " + last_tool(messages),
    ])
    constraints = Constraints.model_validate({
        "guard": {"tool_policy": {"bash": "confirm", "bash(rm *)": "deny"}},
        "execution": {"workdir": str(ws)},
    })
    node = create_react_node(llm, [BashTool()], constraints=constraints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "look"}]})
    runner = ReactiveRunner(node, state)
    assert (await runner.run(timeout=60)).status is RunStatus.SUSPENDED

    runner.approve("sh", arguments={"command": "rm -rf victim"})  # fits bash's schema
    result = await runner.run(timeout=60)

    assert result.status is RunStatus.SUCCESS, result.error
    assert (ws / "victim").read_text() == "keep me\n"
    observation = last_tool(runner.state.get("messages"))
    assert "the guard denied this call" in observation and "bash(rm *)" in observation
    assert "a person edited" in observation


async def test_approving_a_question_or_editing_a_non_call_is_refused() -> None:
    from jianmu.runtime import ApprovalRequest

    runner = agent_runner()
    runner.interaction.suspend(ApprovalRequest(id="step", kind="deploy", summary="deploy?"))
    with pytest.raises(ApprovalEditError, match="kind 'deploy' has no arguments"):
        runner.approve("step", arguments={"x": 1})
    runner.approve("step")  # a plain approval of it still works
    assert runner.interaction.decision("step").approved  # type: ignore[union-attr]


async def test_an_edit_of_one_call_does_not_carry_over_to_another_call() -> None:
    call = {"id": "pay", "name": "transfer", "arguments": {"amount": 100, "to": "bob"}}
    llm = ScriptedLLM([[call], [call], "ok"])  # the model replays the same call id
    constraints = Constraints.model_validate({"guard": {"tool_policy": {"transfer": "confirm"}}})
    node = create_react_node(llm, [transfer], constraints=constraints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pay bob"}]})
    runner = ReactiveRunner(node, state)
    assert (await runner.run(timeout=30)).status is RunStatus.SUSPENDED
    runner.approve("pay", arguments={"amount": 5, "to": "bob"})
    second = await runner.run(timeout=30)
    assert second.status is RunStatus.SUSPENDED
    (request,) = second.pending
    assert request.id == "pay.1" and request.payload["arguments"] == {"amount": 100, "to": "bob"}
    runner.reject("pay.1", "no more")
    assert (await runner.run(timeout=30)).status is RunStatus.SUCCESS
    assert PAID == [(5, "bob")]


BUILD = '''
from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import create_react_node
from jianmu.nodes.state import AgentState
from jianmu.tools import Tool, ToolSet, tool

PAID = []

@tool
def transfer(amount: int, to: str) -> str:
    """Send money.

    Args:
        amount: how much.
        to: to whom.
    """
    PAID.append((amount, to))
    return f"sent {amount} to {to}"

def respond(messages):
    # a script that reads the conversation: a restored run's model is asked afresh
    seen = [m.content for m in messages if m.role == "tool"]
    if seen:
        return "done: " + seen[-1]
    return [{"id": "pay", "name": "transfer", "arguments": {"amount": 100, "to": "bob"}}]

def build():
    llm = ScriptedLLM([respond, respond])
    constraints = Constraints.model_validate({"guard": {"tool_policy": {"transfer": "confirm"}}})
    node = create_react_node(llm, [transfer], constraints=constraints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pay bob"}]})
    return node, state
'''

RESUME = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from edit_tree import PAID, build
from jianmu import ReactiveRunner
from jianmu.errors import ApprovalEditError
from jianmu.runtime import SQLiteCheckpointer

node, state = build()
store = SQLiteCheckpointer(sys.argv[2])
runner = ReactiveRunner.restore(node, store, sys.argv[3], state_manager=state)
try:
    runner.approve("pay", arguments={"amount": -1.5, "to": "bob"})
except ApprovalEditError as exc:
    refused = str(exc)
runner.approve("pay", arguments={"amount": 3, "to": "dan"})
result = runner.run_sync(timeout=30)
print(json.dumps({"status": result.status.value, "pending": [r.id for r in result.pending],
                  "err": result.error, "paid": PAID, "refused": refused,
                  "answer": runner.state.get("final_answer")}))
'''


async def test_an_edit_after_a_restore_in_another_process(tmp_path: Path) -> None:
    (tmp_path / "edit_tree.py").write_text(BUILD)
    sys.path.insert(0, str(tmp_path))
    try:
        import edit_tree  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    db = tmp_path / "runs.sqlite"
    node, state = edit_tree.build()
    store = SQLiteCheckpointer(db)
    first = ReactiveRunner(node, state, checkpointer=store)
    assert (await first.run(timeout=30)).status is RunStatus.SUSPENDED
    store.close()

    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RESUME), str(tmp_path), str(db), first.run_id],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == "success", report
    assert report["paid"] == [[3, "dan"]]
    assert "$.amount" in report["refused"]
    assert report["answer"].endswith("sent 3 to dan")
    assert edit_tree.PAID == []  # nothing ran in the first process

    saved = SQLiteCheckpointer(db)
    try:
        data = saved.load(first.run_id)
    finally:
        saved.close()
    assert data is not None
    (decision,) = data["interaction"]["decisions"]
    assert decision["arguments"] == {"amount": 3, "to": "dan"}


async def test_a_tool_node_runs_an_edited_call() -> None:
    from jianmu.nodes import ToolNode

    node = ToolNode("pay", transfer, input_key="args", output_key="receipt",
                    constraints=Constraints.model_validate(
                        {"guard": {"tool_policy": {"transfer": "confirm"}}}))
    runner = ReactiveRunner(node, StateManager(initial={"args": {"amount": 100, "to": "bob"}}))
    first = await runner.run(timeout=30)
    (request,) = first.pending
    runner.approve(request.id, arguments={"amount": 1, "to": "bob"})
    assert (await runner.run(timeout=30)).status is RunStatus.SUCCESS
    assert PAID == [(1, "bob")] and runner.state.get("receipt") == "sent 1 to bob"


def test_an_edit_must_be_plain_json_and_a_broken_schema_leaves_the_check_to_the_tool() -> None:
    from jianmu.runtime import ApprovalRequest, Interaction

    interaction = Interaction()
    interaction.suspend(ApprovalRequest(id="a", payload={"tool": "t", "fingerprint": "f",
                                                         "parameters": {
        "type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}}))
    with pytest.raises(ApprovalEditError, match="plain JSON"):
        interaction.approve("a", arguments={"x": float("nan")})
    interaction.approve("a", arguments={"x": 1})  # the tool's own check runs before it does
    assert interaction.decision("a").arguments == {"x": 1}  # type: ignore[union-attr]


@pytest.mark.parametrize(("edit", "key"), [
    ({"x": {1: "a"}}, "1"), ({"x": [{"ok": 1}, {None: 2}]}, "None"), ({"x": {2.5: 1}}, "2.5"),
])
def test_an_edit_with_a_key_that_is_not_text_is_refused(edit: dict, key: str) -> None:  # type: ignore[type-arg]
    # json.dumps made it text: the call ran with {1: "a"} here, and with {"1": "a"} after a
    # restore (and the observation said so), two calls for one decision
    from jianmu.runtime import ApprovalRequest, Interaction

    interaction = Interaction()
    interaction.suspend(ApprovalRequest(id="a", payload={"tool": "t", "fingerprint": "f",
                                                         "parameters": {
        "type": "object"}}))
    with pytest.raises(ApprovalEditError, match=f"plain JSON: the key {key} is not text"):
        interaction.approve("a", arguments=edit)
    assert interaction.decision("a") is None and [r.id for r in interaction.pending] == ["a"]


class Post(Tool):
    """A class tool: its own check (`Tool.validate_args`) takes no argument its schema does
    not name, in an object at any depth, though the schema says nothing of others."""

    name = "post"
    description = "Post a message."
    input_schema = {"type": "object", "required": ["to", "meta"], "properties": {
        "to": {"type": "string"},
        "meta": {"type": "object", "properties": {"tag": {"type": "string"}}},
    }}

    def run(self, to: str, meta: dict) -> str:  # type: ignore[type-arg]
        POSTED.append(to)
        return f"posted to {to}"


POSTED: list[str] = []


@pytest.mark.parametrize("edit", [
    {"to": "bob", "meta": {}, "cc": "eve"},
    {"to": "bob", "meta": {"tag": "x", "cc": "eve"}},
])
async def test_an_edit_with_an_argument_the_tool_refuses_is_refused_when_approved(
    edit: dict,  # type: ignore[type-arg]
) -> None:
    """Fixed here: the edit was checked by the schema as JSON Schema (open objects), taken,
    and the call then failed in the tool's own check: the person was told it was approved."""
    POSTED.clear()
    llm = ScriptedLLM([
        [{"id": "p", "name": "post", "arguments": {"to": "ann", "meta": {}}}], "ok"])
    node = create_react_node(llm, [Post()], constraints=Constraints.model_validate(
        {"guard": {"tool_policy": {"post": "confirm"}}}))
    runner = ReactiveRunner(node, StateManager(
        AgentState, {"messages": [{"role": "user", "content": "post"}]}))
    assert (await runner.run(timeout=30)).status is RunStatus.SUSPENDED

    with pytest.raises(ApprovalEditError, match="'cc' was unexpected"):
        runner.approve("p", arguments=edit)
    assert runner.interaction.decision("p") is None and [r.id for r in runner.pending] == ["p"]
    runner.approve("p", arguments={"to": "bob", "meta": {"tag": "x"}})
    assert (await runner.run(timeout=30)).status is RunStatus.SUCCESS
    assert POSTED == ["bob"]


async def test_a_request_names_its_tool_and_whole_arguments_to_show_or_edit() -> None:
    """What a person must see before deciding (the summary may be shortened) was reachable
    only as ``payload["tool"]`` and ``payload["arguments"]``; a question has no arguments."""
    runner = agent_runner()
    (request,) = (await runner.run(timeout=30)).pending
    assert (request.tool, request.arguments) == ("transfer", {"amount": 100, "to": "bob"})
    runner.approve(request.id, arguments={**request.arguments, "amount": 5})
    assert (await runner.run(timeout=30)).ok and PAID == [(5, "bob")]
    asking = create_react_node(ScriptedLLM([
        [{"name": "ask_user", "arguments": {"question": "Who?"}}], "Thanks."]),
        ToolSet.resolve(["ask_user"]))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pay"}]})
    (question,) = (await ReactiveRunner(asking, state).run(timeout=30)).pending
    assert (question.question, question.tool, question.arguments) == ("Who?", "ask_user", None)
