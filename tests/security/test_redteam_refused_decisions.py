"""Red team, several decisions given together (``with runner.deciding():``), one refused.

``deciding()`` promises that when one decision of the block is refused, none of them was
taken: the CLI's ``jianmu resume RUN --approve c1 --approve c2 --arguments ...`` reports so.
Fixed here: that held only for what was saved. In the runner, the decisions made before the
refused one stood: a service that went on with the same runner (rejecting the refused request,
say) paid Alice, whose approval it had been told was not taken, and the next decision saved
that approval with its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, ToolExecutor, tool
from jianmu.errors import ApprovalEditError, InteractionError
from jianmu.runtime.checkpoint import SQLiteCheckpointer

PAID: list[tuple[str, int]] = []


@tool(confirm=True, read_only=False)
def pay(to: str, amount: int) -> str:
    """Pay someone (a person approves first).

    Args:
        to: who.
        amount: how much.
    """
    PAID.append((to, amount))
    return "paid"


def _waiting(tmp_path: Path) -> tuple[ReactiveRunner, SQLiteCheckpointer]:
    PAID.clear()
    state = StateManager(AgentState, {"actions": [
        {"id": "c1", "name": "pay", "arguments": {"to": "alice", "amount": 10}},
        {"id": "c2", "name": "pay", "arguments": {"to": "bob", "amount": 20}},
    ]})
    store = SQLiteCheckpointer(tmp_path / "runs.db")
    runner = ReactiveRunner(ToolExecutor(tools=[pay]), state, checkpointer=store)
    assert [r.id for r in runner.run_sync().pending] == ["c1", "c2"]
    return runner, store


@pytest.mark.parametrize("refused", [
    lambda runner: runner.approve("c2", arguments={"to": "bob", "amount": "twenty"}),
    lambda runner: runner.approve("c3"),
])
def test_a_refused_decision_takes_back_the_ones_given_with_it(tmp_path: Path, refused) -> None:
    runner, store = _waiting(tmp_path)
    with pytest.raises((ApprovalEditError, InteractionError)):
        with runner.deciding():
            runner.approve("c1")
            refused(runner)
    assert runner.interaction.decision("c1") is None
    assert [r.id for r in runner.interaction.pending] == ["c1", "c2"]
    runner.reject("c2", "not now")  # saved at once: the run's decisions so far
    saved = store.load(runner.run_id)
    assert saved is not None
    assert [d["request_id"] for d in saved["interaction"]["decisions"]] == ["c2"]
    result = runner.run_sync()
    assert PAID == [] and [r.id for r in result.pending] == ["c1"]
    runner.approve("c1")
    assert runner.run_sync().ok and PAID == [("alice", 10)]
    store.close()


def test_decisions_that_all_fit_are_all_taken(tmp_path: Path) -> None:
    runner, store = _waiting(tmp_path)
    with runner.deciding():
        runner.approve("c1")
        runner.approve("c2", arguments={"to": "bob", "amount": 2})
    assert runner.run_sync().ok and PAID == [("alice", 10), ("bob", 2)]
    store.close()
