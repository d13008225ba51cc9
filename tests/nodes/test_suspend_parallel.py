"""A suspend stops the run: when `run()` returns SUSPENDED, nothing of the run still executes.

Two sub-agents run in parallel under a lead agent (`tests/support/suspend_app.py`): the deployer
waits for approval of its deploy, while the writer, in flight, writes three notes and then asks
for its own deploy. The writer's calls finish (and are recorded) before `run()` returns; after
the decisions each approved deploy runs once and the run finishes, also through README's
approve-then-`run_sync` pattern and after a restore in another process.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.nodes import AgentState
from tests.support import suspend_app as app

REPO = Path(__file__).resolve().parents[2]
PENDING = ["deployer/c_deploy/dep", "writer/c_write/dep"]


def start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "Go."}]})


def runner_for(log: app.Log, **kwargs: object) -> ReactiveRunner:
    gate = app.Gate()
    runner = ReactiveRunner(app.build(log, gate), start(), **kwargs)  # type: ignore[arg-type]
    runner.ctx.events.subscribe("guard.decision", gate.on_event)
    return runner


def assert_finished(runner: ReactiveRunner, log: app.Log) -> None:
    """The run ended with both sub-agents' answers, and every effect happened once, in time."""
    assert runner.state.get("final_answer") == app.ANSWER
    assert sorted(log.lines()) == sorted(app.EFFECTS)
    results = [(m.tool_call_id, m.content) for m in runner.state.get("messages")
               if m.role == "tool"]
    assert results == [("c_deploy", "deployer: deployed a"),
                       ("c_write", "writer: 3 notes, deployed b")]


@pytest.mark.anyio
async def test_calls_in_flight_finish_and_are_recorded_before_run_returns(tmp_path: Path) -> None:
    log = app.Log(tmp_path / "effects.log")
    runner = runner_for(log)
    first = await runner.run(timeout=60)
    log.returned = True  # a side effect from here on is marked LATE
    assert first.status is RunStatus.SUSPENDED
    # the writer was in flight when the deployer asked: its notes are done, and it asks too
    assert [r.id for r in first.pending] == PENDING
    assert log.lines() == ["note n1", "note n2", "note n3"]
    writer = runner.state.scope("writer/c_write")
    assert writer.get("completed_call_ids") == ["note1", "note2", "note3"]
    # nothing of the run is left running in the loop
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not [t for t in others if t.get_name().startswith("jianmu:")]
    for request in first.pending:
        runner.approve(request.id)
    log.returned = False
    second = await runner.run(timeout=60)
    assert second.status is RunStatus.SUCCESS, second.error
    assert_finished(runner, log)


def test_readme_approve_then_run_sync_runs_each_approved_call_once(tmp_path: Path) -> None:
    log = app.Log(tmp_path / "effects.log")
    runner = runner_for(log)
    result = runner.run_sync(timeout=60)
    log.returned = True
    assert result.status is RunStatus.SUSPENDED
    assert [r.id for r in result.pending] == PENDING
    for request in result.pending:
        runner.approve(request.id)
    log.returned = False
    final = runner.run_sync(timeout=60)
    assert final.status is RunStatus.SUCCESS, final.error
    assert_finished(runner, log)


def test_a_run_restored_in_another_process_runs_each_approved_call_once(tmp_path: Path) -> None:
    log, db = app.Log(tmp_path / "effects.log"), tmp_path / "runs.sqlite"
    runner = runner_for(log, checkpointer=SQLiteCheckpointer(db), run_id="par1")
    first = runner.run_sync(timeout=60)
    assert first.status is RunStatus.SUSPENDED
    assert log.lines() == ["note n1", "note n2", "note n3"]
    script = textwrap.dedent(f"""
        from pathlib import Path
        from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
        from jianmu.nodes import AgentState
        from tests.support import suspend_app as app

        log = app.Log(Path({str(log.path)!r}))
        runner = ReactiveRunner.restore(app.build(log, app.Gate()), SQLiteCheckpointer(
            {str(db)!r}), "par1", state_manager=StateManager(AgentState))
        print(sorted(r.id for r in runner.pending))
        for request in runner.pending:
            runner.approve(request.id)
        result = runner.run_sync(timeout=60)
        print(result.status.value, result.error)
        print(runner.state.get("final_answer"))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines() == [str(PENDING), "success None", app.ANSWER]
    assert sorted(log.lines()) == sorted(app.EFFECTS)


def jianmu_tasks() -> list[asyncio.Task[object]]:
    """The run's node tasks still running in this loop."""
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("jianmu:") and not t.done()]


@pytest.mark.anyio
async def test_a_cancel_while_the_calls_finish_stops_them(tmp_path: Path) -> None:
    log = app.Log(tmp_path / "effects.log")
    runner = runner_for(log)
    runner.ctx.events.subscribe("run.suspended", lambda _event: runner.cancel())
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.CANCELLED
    assert not jianmu_tasks()  # cancelled and awaited: nothing of the run goes on


@pytest.mark.anyio
async def test_requests_decided_while_the_calls_finish_let_the_run_go_on(tmp_path: Path) -> None:
    log = app.Log(tmp_path / "effects.log")
    runner = runner_for(log)
    loop = asyncio.get_running_loop()
    suspended: list[str] = []

    def approve_all() -> None:
        for request in runner.pending:
            runner.approve(request.id)

    def decide(event: object) -> None:  # a person deciding while the calls still finish
        if getattr(event, "name", "") == "run.suspended" or suspended:
            suspended.append(getattr(event, "name", ""))
            loop.call_soon(approve_all)

    runner.ctx.events.subscribe("run.suspended", decide)
    runner.ctx.events.subscribe("agent.suspended", decide)
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert suspended[0] == "run.suspended" and "agent.suspended" in suspended
    assert_finished(runner, log)


@pytest.mark.anyio
async def test_a_sub_agent_stopped_mid_way_resumes_where_it_stood(tmp_path: Path) -> None:
    """A cancel while the writer is at work stops it; run again, it goes on from its last note
    (none written twice), as a sub-agent restored from a checkpoint does."""
    log = app.Log(tmp_path / "effects.log")
    runner = runner_for(log)

    def stop_after_the_first_note(event: Any) -> None:
        if event.fields.get("tool") == "write_note":
            runner.cancel()

    unsubscribe = runner.ctx.events.subscribe("tool.call.completed", stop_after_the_first_note)
    first = await runner.run(timeout=60)
    unsubscribe()
    assert first.status is RunStatus.CANCELLED
    assert not jianmu_tasks()
    written = log.lines()
    assert written and len(written) < app.NOTES  # stopped mid-way
    result = await runner.run(timeout=60)
    while result.status is RunStatus.SUSPENDED:
        for request in result.pending:
            runner.approve(request.id)
        result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert_finished(runner, log)
