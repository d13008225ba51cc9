"""A tool call that runs a long time shows in the studio while it runs: the call starts in its
own task after the tick that launched it, and its events (the guard's decision, "started")
waited for the next tick, which only the call's end brings. A person watching a run saw
nothing of the call it was waiting on."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager, tool
from jianmu.nodes import AgentState, create_react_node
from jianmu.studio import CheckpointRuns
from jianmu.studio.runs import Journal
from tests.support.durable import wait_for

WAIT_S = 60


def test_a_long_tool_call_shows_as_started_while_it_runs(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    gate = threading.Event()

    @tool(timeout_seconds=None)  # no end but the gate: only the gate makes a tick
    async def wait_gate(step: int) -> str:
        """Wait until the test opens the gate.

        Args:
            step: which step.
        """
        await asyncio.to_thread(gate.wait, 3 * WAIT_S)
        return f"step {step} done"

    llm = ScriptedLLM([[{"name": "wait_gate", "arguments": {"step": 1}}], "done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(create_react_node(llm, [wait_gate], name="gated"), state,
                            checkpointer=SQLiteCheckpointer(str(path)), run_id="gated")
    done: list[str] = []
    thread = threading.Thread(target=lambda: done.append(runner.run_sync(
        timeout=WAIT_S).status.value), daemon=True)
    thread.start()
    runs = CheckpointRuns(str(path), Journal(str(path)))
    try:
        def started() -> dict | None:
            try:
                view = runs.view("gated")
            except Exception:  # not recorded yet
                return None
            titles = [e["title"] for e in view["timeline"]]
            return view if "started: wait_gate" in titles else None

        view = wait_for(started, 20, "the call to show as started while it runs")
        assert not gate.is_set() and not done
        [call] = [e for e in view["timeline"] if e["title"] == "started: wait_gate"]
        assert '"step": 1' in call["text"]
        assert any(e["title"] == "guard allowed: wait_gate" for e in view["timeline"])
    finally:
        gate.set()
        thread.join(WAIT_S)
    assert done == ["success"]
    # the events are those of the point the call led to, as they were before
    finished = runs.view("gated")
    numbers = {p["n"] for p in finished["points"]}
    assert all(e["point"] in numbers for e in finished["timeline"] if e["point"] is not None)
    [call] = [e for e in finished["timeline"] if e["title"] == "started: wait_gate"]
    [result] = [e for e in finished["timeline"] if e["title"].startswith("result of wait_gate")]
    assert call["point"] <= result["point"]
    runs.close()
