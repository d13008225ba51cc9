"""An edit is refused where nothing would run with it: ``approve(id, arguments=...)`` promises
the call runs with those arguments, and only a call the guard asked about can.

Before the fix, a request a node of the author's asked (``ApprovalRequest(id="deploy",
summary="deploy?")``, whose kind is ``tool_call`` by default, as README's own nodes write it)
took edited arguments: the decision was recorded and checkpointed with them, the
``interaction.approved`` event said ``edited=True``, and the node went on as approved, with
what it had asked about: a person who edited ``staging`` into a dry run saw it deployed as
asked. Now the edit is refused (`ApprovalEditError`), nothing is recorded, and a plain
approval of it still works.
"""

from __future__ import annotations

import pytest

from jianmu import ReactiveRunner, StateManager
from jianmu.errors import ApprovalEditError
from jianmu.runtime import ApprovalRequest, Interaction


def test_an_edit_of_a_nodes_own_request_is_refused_and_nothing_is_recorded() -> None:
    import py_trees

    runner = ReactiveRunner(py_trees.behaviours.Success("s"), StateManager())
    seen: list[str] = []
    runner.ctx.events.subscribe("*", lambda event: seen.append(event.name))
    runner.interaction.suspend(ApprovalRequest(
        id="deploy", summary="deploy staging?", payload={"target": "staging"}))
    with pytest.raises(ApprovalEditError, match="no tool call"):
        runner.approve("deploy", arguments={"target": "dry-run"})
    assert runner.interaction.decision("deploy") is None
    assert [r.id for r in runner.pending] == ["deploy"]
    assert "interaction.approved" not in seen
    runner.approve("deploy")  # a plain approval of it still works
    decision = runner.interaction.decision("deploy")
    assert decision is not None and decision.approved and not decision.edited


def test_an_edit_of_a_request_restored_without_its_call_is_refused() -> None:
    """A request restored from a checkpoint keeps what the guard asked: one that names a tool
    but was never the guard's (no fingerprint of the call) has no call an edit could reach."""
    interaction = Interaction()
    interaction.restore({"asked": [
        {"id": "x", "kind": "tool_call", "summary": "t?", "payload": {"tool": "t"}}],
        "pending": ["x"]})
    with pytest.raises(ApprovalEditError, match="no tool call"):
        interaction.approve("x", arguments={"a": 1})
    assert interaction.decision("x") is None

