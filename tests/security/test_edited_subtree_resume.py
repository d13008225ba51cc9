"""A run restored with a tree whose lazily built part (a skill's subtree, compiled on its first
tick) no longer matches the checkpoint leaves the run as it was.

Before the fix, the mismatch surfaced mid-run as a node's `CheckpointError`, which the runner
took for a store's failure: it saved the run as "running" over its checkpoint, with the subtree's
node statuses gone and the decision given consumed. Restored then with the right tree, the run
started the subtree afresh: a payment it had made ran a second time. Now `run()` raises the
mismatch and saves nothing: the right tree takes the run up where it was.
"""

from __future__ import annotations

from pathlib import Path

import py_trees
import pytest

from jianmu import AgentState, tool
from jianmu.errors import TreeMismatchError
from jianmu.nodes import ToolNode
from jianmu.runtime import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.skills.node import FlattenedAgentNode
from jianmu.state import StateManager
from tests.runtime.test_checkpoint import Ask

PAID: list[int] = []


@tool(category="write")
def pay(amount: int = 40) -> str:
    """Pay.

    Args:
        amount: how much.
    """
    PAID.append(amount)
    return f"paid {amount}"


class Subtree(FlattenedAgentNode):
    """Builds its steps on its first tick, as a skill does: ``ask`` asks a person, any other
    name is a payment step of that name."""

    def __init__(self, steps: tuple[str, ...]) -> None:
        super().__init__("subtree")
        self.steps = steps

    def compile_subtree(self) -> py_trees.behaviour.Behaviour:
        return py_trees.composites.Sequence("steps", memory=True, children=[
            Ask("ask") if step == "ask" else
            ToolNode(step, pay, input_key=None, output_key="receipt") for step in self.steps])


def flow(*steps: str) -> py_trees.behaviour.Behaviour:
    return py_trees.composites.Sequence("flow", memory=True, children=[
        Subtree(steps or ("pay", "ask"))])


@pytest.fixture(autouse=True)
def _no_payments() -> None:
    PAID.clear()


@pytest.mark.parametrize(("edited", "why"), [
    (("charge", "ask"), "node 0/0/0/0 is 'charge', the checkpoint has 'pay'"),
    (("pay",), "node 0/0/0/1 ('ask') of the checkpoint is not in this tree"),
])
def test_an_edited_subtree_changes_nothing_and_the_right_tree_pays_once(
    tmp_path: Path, edited: tuple[str, ...], why: str,
) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    first = ReactiveRunner(flow(), StateManager(AgentState), checkpointer=store)
    assert first.run_sync(timeout=60).status is RunStatus.SUSPENDED
    assert PAID == [40]
    saved = store.load(first.run_id)
    wrong = ReactiveRunner.restore(flow(*edited), store, first.run_id,
                                   state_manager=StateManager(AgentState))
    wrong.approve("deploy")
    with pytest.raises(TreeMismatchError) as raised:
        wrong.run_sync(timeout=60)
    assert str(raised.value) == f"the tree does not match the checkpoint: {why}"
    kept = store.load(first.run_id)
    assert kept is not None and saved is not None
    # nothing of the wrong tree was saved over the run: only the person's decision, saved
    # as it was made, on the run's own checkpoint
    assert {k: v for k, v in kept.items() if k not in ("interaction", "saved")} == {
        k: v for k, v in saved.items() if k not in ("interaction", "saved")}
    assert store.holder(first.run_id) is None  # and it was let go
    right = ReactiveRunner.restore(flow(), store, first.run_id,
                                   state_manager=StateManager(AgentState))
    assert right.pending == []  # decided already
    assert right.run_sync(timeout=60).status is RunStatus.SUCCESS
    assert PAID == [40]
