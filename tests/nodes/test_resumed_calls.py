"""A tool call that waited for a person (a sub-agent's approval) and runs again says it goes on:
its second ``tool.call.started`` carries ``resumed=True``, in the same process and in a run
restored from its checkpoint, where the executor is a new one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.nodes import AgentState
from tests.support import agents_app

pytestmark = pytest.mark.anyio


def start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "Tides?"}]})


def starts(runner: ReactiveRunner) -> list[tuple[str, str, bool]]:
    """Every call start the run announces: (tool, call id, resumed)."""
    seen: list[tuple[str, str, bool]] = []
    runner.ctx.events.subscribe("tool.call.started", lambda e: seen.append(
        (e.fields["tool"], e.fields["call_id"], bool(e.fields.get("resumed")))))
    return seen


async def test_a_call_that_waited_goes_on_instead_of_starting_again(tmp_path: Path) -> None:
    lead = agents_app.build(tmp_path / "calls.log", agents_app.RESEARCHER, agents_app.LEAD)
    runner = ReactiveRunner(lead, start())
    seen = starts(runner)
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    runner.approve(first.pending[0].id)
    assert (await runner.run(timeout=30)).ok
    agent = [s for s in seen if s[0] == "researcher"]
    assert agent == [("researcher", "call_1", False), ("researcher", "call_1", True)]
    # the researcher's own calls started once each: the approved one had not run before
    assert [s for s in seen if s[0] != "researcher"] == [
        ("search", "call_1", False), ("write_note", "call_2", False)]
    assert runner.state.get("suspended_call_ids") == ["call_1"]


async def test_a_restored_run_says_the_call_goes_on(tmp_path: Path) -> None:
    log, db = tmp_path / "calls.log", tmp_path / "runs.sqlite"
    lead = agents_app.build(log, agents_app.RESEARCHER, agents_app.LEAD)
    runner = ReactiveRunner(lead, start(), checkpointer=SQLiteCheckpointer(db), run_id="r1")
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    # a new tree (a new executor and agent tool, nothing kept in memory), as in a new process
    again = agents_app.build(log, agents_app.RESEARCHER[2:], agents_app.LEAD[1:])
    restored = ReactiveRunner.restore(again, SQLiteCheckpointer(db), "r1",
                                      state_manager=StateManager(AgentState))
    seen = starts(restored)
    restored.approve(first.pending[0].id)
    result = await restored.run(timeout=30)
    assert result.ok, result.error
    assert [s for s in seen if s[0] == "researcher"] == [("researcher", "call_1", True)]


async def test_calls_that_never_waited_are_not_resumed(tmp_path: Path) -> None:
    researcher: list[Any] = [agents_app.RESEARCHER[0], "Tides come twice a day."]
    lead = agents_app.build(tmp_path / "calls.log", researcher, agents_app.LEAD)
    runner = ReactiveRunner(lead, start())
    seen = starts(runner)
    assert (await runner.run(timeout=30)).ok
    assert seen and not any(resumed for _, _, resumed in seen)
    assert runner.state.get("suspended_call_ids") == []
