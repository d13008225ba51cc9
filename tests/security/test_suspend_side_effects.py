"""A side effect of a suspended run's other branch is never lost, nor done twice.

Two sub-agents run in parallel; one waits for a person's approval. The other's tool runs in a
worker thread, which nothing can stop. Before the fix, `run_sync()` returned SUSPENDED while
that call was in flight: the thread went on doing its work after the run had returned, nothing
recorded it, and after the approval the run did it again (a payment paid twice).
"""

from __future__ import annotations

import threading
from pathlib import Path

import py_trees

from jianmu import ReactiveRunner, RunStatus, StateManager, ToolExecutor, tool
from jianmu.nodes import AgentState
from tests.support import suspend_app as app


def test_a_threaded_call_in_flight_at_a_suspend_is_done_once_and_before_run_returns(
    tmp_path: Path,
) -> None:
    log, gate = app.Log(tmp_path / "effects.log"), app.Gate()
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Go."}]})
    runner = ReactiveRunner(app.build(log, gate, threaded=True), state)
    runner.ctx.events.subscribe("guard.decision", gate.on_event)
    result = runner.run_sync(timeout=60)
    log.returned = True  # whatever the run does from here until the next run_sync is LATE
    # every note written so far is recorded as done, so no later run writes it again
    notes = [line for line in log.lines() if line.startswith("note")]
    recorded = state.scope("writer/c_write").get("completed_call_ids") or []
    assert [f"note n{c.removeprefix('note')}" for c in recorded if c.startswith("note")] == notes
    while result.status is RunStatus.SUSPENDED:
        for request in result.pending:
            runner.approve(request.id)
        log.returned = False
        result = runner.run_sync(timeout=60)
        log.returned = True
    assert not [line for line in log.lines() if line.startswith("LATE")], log.lines()
    assert result.status is RunStatus.SUCCESS, result.error
    assert sorted(log.lines()) == sorted(app.EFFECTS)  # every note and deploy exactly once
    assert state.get("final_answer") == app.ANSWER


def test_a_threaded_call_stopped_with_the_run_is_recorded_and_never_run_again(
    tmp_path: Path,
) -> None:
    """A cancel (or the run's timeout) while a suspended run's calls finish stops them; a call
    in a worker thread cannot be stopped, so it is recorded as maybe done, not run again."""
    log = app.Log(tmp_path / "effects.log")
    release, finished = threading.Event(), threading.Event()
    runner: ReactiveRunner | None = None

    @tool(read_only=False)
    def pay(amount: int) -> str:
        """Pay (it takes a while).

        Args:
            amount: how much.
        """
        assert runner is not None
        runner.cancel()  # someone stops the run while the payment is under way
        assert release.wait(60)
        log.write(f"pay {amount}")
        finished.set()
        return "paid"

    state = StateManager(AgentState, {"actions": [
        {"id": "p1", "name": "pay", "arguments": {"amount": 30}}]})
    root = py_trees.composites.Parallel(
        "both", policy=py_trees.common.ParallelPolicy.SuccessOnAll(),
        children=[app.Asker("ask"), ToolExecutor(tools=[pay])],
    )
    runner = ReactiveRunner(root, state)
    first = runner.run_sync(timeout=60)
    assert first.status is RunStatus.CANCELLED
    release.set()
    assert finished.wait(60)  # the thread did its work after the run had stopped
    assert state.get("completed_call_ids") == ["p1"]  # ...and that was recorded
    runner.approve("ask")
    assert runner.run_sync(timeout=60).ok
    assert log.lines() == ["pay 30"]  # once
    (said,) = [m.content for m in state.get("messages") if m.role == "tool"]
    assert "may or may not have taken effect" in (said or "")
