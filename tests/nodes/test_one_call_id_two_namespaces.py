"""Two agents in separate namespaces whose models give a call the same id (``call_0``: local
models and OpenAI-compatible servers number ids per turn, as `ScriptedLLM` does when told).

Fixed here: the run keyed approvals by the bare call id, so when both calls needed a person's
confirmation they asked under one id; the second was denied as "asked about a call of another
node" (or took the other's place as the one request shown). Now a request id is qualified by
the namespace that owns the call (``left/call_0``, ``right/call_0``): each call is asked, decided
and run on its own, also after a restore; a bare ``call_0`` still names a request when it names
one pending request only. Durable step keys are qualified the same way.
"""

from __future__ import annotations

from pathlib import Path

import py_trees
import pytest
from py_trees.common import ParallelPolicy

from jianmu import Constraints, ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.errors import InteractionError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node
from jianmu.tools import tool
from tests.runtime.test_context import FakeSteps

PAID: list[tuple[str, int]] = []
CONFIRM = Constraints.model_validate({"guard": {"tool_policy": {"pay": "confirm"}}})
WHO = {"left": ("alice", 5), "right": ("bob", 7)}


@tool
def pay(to: str, amount: int) -> str:
    """Pay someone.

    Args:
        to: who.
        amount: how much.
    """
    PAID.append((to, amount))
    return f"paid {to} {amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    PAID.clear()


def agent(namespace: str, policy: Constraints | None = CONFIRM) -> py_trees.behaviour.Behaviour:
    """An agent in ``namespace`` whose model pays once under the id ``call_0``, then answers."""
    to, amount = WHO[namespace]
    llm = ScriptedLLM([
        [{"id": "call_0", "name": "pay", "arguments": {"to": to, "amount": amount}}],
        f"{namespace} done",
    ])
    node = create_react_node(llm, [pay], name=namespace, constraints=policy)
    for part in node.iterate():
        part.namespace = namespace  # type: ignore[attr-defined]
    return node


def tree(policy: Constraints | None = CONFIRM) -> py_trees.behaviour.Behaviour:
    return py_trees.composites.Parallel(
        "team", policy=ParallelPolicy.SuccessOnAll(),
        children=[agent("left", policy), agent("right", policy)],
    )


def state() -> StateManager:
    made = StateManager(AgentState)
    for namespace in WHO:
        made.scope(namespace).update({"messages": [{"role": "user", "content": "pay"}]})
    return made


def observation(runner: ReactiveRunner, namespace: str) -> str:
    [result] = [m for m in runner.state.scope(namespace).get("messages") if m.role == "tool"]
    return str(result.content)


def suspended(runner: ReactiveRunner) -> list[str]:
    result = runner.run_sync(timeout=30)
    assert result.status is RunStatus.SUSPENDED, result.error
    assert PAID == []
    return sorted(r.id for r in result.pending)


def test_both_calls_are_asked_and_each_approved_call_runs_once_with_its_arguments() -> None:
    runner = ReactiveRunner(tree(), state())
    assert suspended(runner) == ["left/call_0", "right/call_0"]
    for request in runner.pending:
        assert request.payload["arguments"] == dict(zip(("to", "amount"),
                                                        WHO[request.id.split("/")[0]],
                                                        strict=True))
        runner.approve(request.id)
    result = runner.run_sync(timeout=30)
    assert result.status is RunStatus.SUCCESS, result.error
    assert sorted(PAID) == [("alice", 5), ("bob", 7)]
    assert observation(runner, "left") == "paid alice 5"
    assert observation(runner, "right") == "paid bob 7"
    for namespace in WHO:
        assert runner.state.scope(namespace).get("final_answer") == f"{namespace} done"
        assert runner.state.scope(namespace).get("completed_call_ids") == ["call_0"]
    assert runner.interaction.consumed("left/call_0")
    assert runner.interaction.consumed("right/call_0")


def test_approve_one_reject_the_other_runs_the_right_one() -> None:
    runner = ReactiveRunner(tree(), state())
    suspended(runner)
    runner.approve("right/call_0")
    runner.reject("left/call_0", "not alice")
    assert runner.run_sync(timeout=30).ok
    assert PAID == [("bob", 7)]
    assert observation(runner, "right") == "paid bob 7"
    assert "not alice" in observation(runner, "left")


def test_a_bare_call_id_names_a_request_only_when_one_request_has_it() -> None:
    """Pending or decided: once left/call_0 is decided, a repeated "call_0" (meant for it) must
    not approve right/call_0, which nobody named."""
    runner = ReactiveRunner(tree(), state())
    suspended(runner)
    with pytest.raises(InteractionError, match=r"left/call_0, right/call_0"):
        runner.approve("call_0")
    assert runner.interaction.decision("left/call_0") is None
    assert runner.interaction.decision("right/call_0") is None
    runner.reject("left/call_0")
    with pytest.raises(InteractionError, match=r"left/call_0, right/call_0"):
        runner.approve("call_0")
    assert runner.interaction.decision("right/call_0") is None
    assert runner.approve("right/call_0") == "right/call_0"
    assert runner.run_sync(timeout=30).ok
    assert PAID == [("bob", 7)]


def test_the_two_requests_survive_a_restore_in_a_fresh_runner(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    runner = ReactiveRunner(tree(), state(), checkpointer=SQLiteCheckpointer(db), run_id="two")
    assert suspended(runner) == ["left/call_0", "right/call_0"]

    restored = ReactiveRunner.restore(tree(), SQLiteCheckpointer(db), "two",
                                      state_manager=StateManager(AgentState))
    assert sorted(r.id for r in restored.pending) == ["left/call_0", "right/call_0"]
    restored.approve("left/call_0")
    restored.approve("right/call_0")
    result = restored.run_sync(timeout=30)
    assert result.status is RunStatus.SUCCESS, result.error
    assert sorted(PAID) == [("alice", 5), ("bob", 7)]
    assert observation(restored, "left") == "paid alice 5"
    assert observation(restored, "right") == "paid bob 7"

    # the run is over: restored again, nothing waits and nothing is paid twice
    again = ReactiveRunner.restore(tree(), SQLiteCheckpointer(db), "two",
                                   state_manager=StateManager(AgentState))
    assert again.pending == []
    assert again.run_sync(timeout=30).ok
    assert sorted(PAID) == [("alice", 5), ("bob", 7)]


def test_durable_steps_of_the_two_calls_are_two_steps() -> None:
    """A durable run's record of executed calls must not take the two calls for one (the
    second numbered as a repeat of the first, whose recorded result it could be given)."""
    runner = ReactiveRunner(tree(policy=None), state())
    steps = FakeSteps()
    runner.ctx.steps = steps
    assert runner.run_sync(timeout=30).ok
    calls = sorted(k for k in steps.keys if "tool:" in k)
    assert calls == ["left/tool:call_0", "right/tool:call_0"]
    assert sorted(steps.started) == calls
    assert sorted(PAID) == [("alice", 5), ("bob", 7)]

    # recovered with only the right call's step recorded (the left one had not run): the
    # left call runs, with its own arguments, and the right one is replayed, not run again
    PAID.clear()
    kept = {k: v for k, v in steps.recorded.items() if not k.startswith("left/tool:")}
    again = ReactiveRunner(tree(policy=None), state())
    again.ctx.steps = FakeSteps(kept)
    assert again.run_sync(timeout=30).ok
    assert PAID == [("alice", 5)]
    assert observation(again, "left") == "paid alice 5"
    assert observation(again, "right") == "paid bob 7"


def lead(namespace: str) -> py_trees.behaviour.Behaviour:
    """A lead agent in ``namespace`` that asks its researcher (``call_0``), whose model pays
    under ``call_0`` too: the leads' sub-agents' requests meet unless qualified."""
    to, amount = WHO[namespace]

    def researcher() -> py_trees.behaviour.Behaviour:
        return create_react_node(ScriptedLLM([
            [{"id": "call_0", "name": "pay", "arguments": {"to": to, "amount": amount}}],
            lambda messages: f"researched: {messages[-1].content}",
        ]), [pay], name="researcher", constraints=CONFIRM)

    helper = agent_tool(researcher, name="researcher", description="Finds things out.")
    llm = ScriptedLLM([
        [{"id": "call_0", "name": "researcher", "arguments": {"input": "pay"}}],
        lambda messages: f"{namespace}: {messages[-1].content}",
    ])
    node = create_react_node(llm, [helper], name=namespace)
    for part in node.iterate():
        part.namespace = namespace  # type: ignore[attr-defined]
    return node


def test_two_leads_sub_agents_with_one_call_id_are_asked_apart(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"

    def team() -> py_trees.behaviour.Behaviour:
        return py_trees.composites.Parallel(
            "leads", policy=ParallelPolicy.SuccessOnAll(), children=[lead("left"), lead("right")]
        )

    runner = ReactiveRunner(team(), state(), checkpointer=SQLiteCheckpointer(db), run_id="leads")
    assert suspended(runner) == ["left/researcher/call_0/call_0",
                                 "right/researcher/call_0/call_0"]

    restored = ReactiveRunner.restore(team(), SQLiteCheckpointer(db), "leads",
                                      state_manager=StateManager(AgentState))
    # the id each had before ids were qualified names both; a sub-agent's call id alone, none
    with pytest.raises(InteractionError, match="names 2 requests"):
        restored.approve("researcher/call_0/call_0")
    with pytest.raises(InteractionError, match="no approval request 'call_0'"):
        restored.approve("call_0")
    restored.approve("left/researcher/call_0/call_0")
    restored.reject("right/researcher/call_0/call_0", "no")
    result = restored.run_sync(timeout=30)
    assert result.status is RunStatus.SUCCESS, result.error
    assert PAID == [("alice", 5)]
    assert restored.state.scope("left").get("final_answer") == (
        "left: researched: paid alice 5")
    assert "no" in str(restored.state.scope("right").get("final_answer"))
