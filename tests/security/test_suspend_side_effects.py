"""A side effect of a suspended run's other branch is never lost, nor done twice.

Two sub-agents run in parallel; one waits for a person's approval. The other's tool runs in a
worker thread, which nothing can stop. Before the fix, `run_sync()` returned SUSPENDED while
that call was in flight: the thread went on doing its work after the run had returned, nothing
recorded it, and after the approval the run did it again (a payment paid twice).
"""

from __future__ import annotations

from pathlib import Path

from jianmu import ReactiveRunner, RunStatus, StateManager
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
