"""A run whose process was killed mid-run: its last checkpoint says "running" and nothing will
ever end it. The studio's list and page and ``jianmu runs show`` said "running" for ever; they
say "stopped", and how to go on (``jianmu resume``), which works from its last checkpoint."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from starlette.testclient import TestClient

from jianmu import AgentState, ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager
from jianmu._cli.points import run_points
from jianmu.nodes import create_react_node
from jianmu.tools import tool

SCRIPT = [[{"name": "quick", "arguments": {"x": "a"}}],
          [{"name": "slow", "arguments": {"x": "b"}}], "done"]

CHILD = """
import asyncio, json, sys
from jianmu import AgentState, ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager
from jianmu.nodes import create_react_node
from jianmu.tools import tool

@tool
def quick(x: str) -> str:
    \"\"\"Quick.\"\"\"
    return x

@tool
async def slow(x: str) -> str:
    \"\"\"Slow: the process is killed while it runs.\"\"\"
    print("running", flush=True)
    await asyncio.sleep(3600)
    return x

state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
runner = ReactiveRunner(create_react_node(ScriptedLLM(json.loads(sys.argv[2])), [quick, slow]),
                        state, checkpointer=SQLiteCheckpointer(sys.argv[1]), run_id="killed")
asyncio.run(runner.run(timeout=3600))
"""


@tool
def quick(x: str) -> str:
    """Quick."""
    return x


@tool
async def slow(x: str) -> str:
    """Slow."""
    return f"slow {x}"


def test_a_run_whose_process_was_killed_shows_as_stopped_and_resumes(
    client: TestClient, checkpoints: Path,
) -> None:
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD), str(checkpoints),
                              json.dumps(SCRIPT)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "running\n"
        store = SQLiteCheckpointer(checkpoints)
        assert store.load("killed")["status"] == "running"
        assert not store.stopped("killed")  # its process is alive: it runs
        assert client.get("/api/run/cp/killed").json()["status"] == "running"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(60)
    assert store.stopped("killed")
    page = client.get("/").text  # the runs list
    row = page[page.index('data-run="killed"'):]
    assert 'status-stopped">stopped<' in row[:row.index("</tr>")]
    assert 'status-stopped">stopped<' in client.get("/?status=stopped").text
    view = client.get("/api/run/cp/killed").json()
    assert view["status"] == "stopped" and "jianmu resume killed" in view["note"]
    # nothing runs any more: the nodes it was in are drawn stopped, not running for ever
    statuses = {n["name"]: n["status"] for n in view["nodes"]}
    assert "running" not in statuses.values(), statuses
    assert statuses["ReAct.tools"] == "stopped" and statuses["ReAct.llm"] == "success"
    assert run_points(store, "killed")["status"] == "stopped"
    # what the note says works: the run goes on from its last checkpoint
    runner = ReactiveRunner.restore(create_react_node(ScriptedLLM(SCRIPT), [quick, slow]),
                                    store, "killed", state_manager=StateManager(AgentState))
    result = runner.run_sync(timeout=60)
    assert result.ok and runner.state.get("final_answer") == "done"
    assert [m.content for m in runner.state.get("messages") if m.role == "tool"] == [
        "a", "slow b"]
    assert not store.stopped("killed") or store.load("killed")["status"] != "running"
    store.close()


def test_a_cancelled_runs_graph_shows_what_was_stopped_and_what_had_ended(
    client: TestClient, checkpoints: Path,
) -> None:
    """A run stopped mid-call drew every node as "not run": the runner's stop resets them to
    py_trees' INVALID. Its last point now says which were running (stopped) and keeps how
    the others had ended; a fork from there restores and runs on."""
    import asyncio

    from jianmu.runtime.fork import fork_run

    started = asyncio.Event()

    @tool
    async def hangs(x: str) -> str:
        """Waits until the run is stopped."""
        started.set()
        await asyncio.Event().wait()
        return x

    script = [[{"name": "hangs", "arguments": {"x": "b"}}], "done"]
    store = SQLiteCheckpointer(checkpoints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(create_react_node(ScriptedLLM(script), [hangs]), state,
                            checkpointer=store, run_id="halted")

    async def run_then_cancel() -> str:
        task = asyncio.get_running_loop().create_task(runner.run(timeout=3600))
        await started.wait()
        runner.cancel()
        return (await task).status.value

    assert asyncio.run(run_then_cancel()) == "cancelled"
    view = client.get("/api/run/cp/halted").json()
    statuses = {row["name"]: row["status"] for row in view["nodes"]}
    assert statuses == {"ReAct": "stopped", "ReAct.round": "stopped", "ReAct.llm": "success",
                        "ReAct.tools": "stopped"}
    assert "stopped</span>" in client.get("/run/cp/halted").text  # the legend says it
    last = store.history.points("halted")[-1].number
    fork = fork_run(store, "halted", last)

    @tool(name="hangs")
    async def answers(x: str) -> str:
        """Answers at once."""
        return f"answered {x}"

    restored = ReactiveRunner.restore(create_react_node(ScriptedLLM(script), [answers]),
                                      store, fork, state_manager=StateManager(AgentState))
    result = restored.run_sync(timeout=60)
    assert result.ok and restored.state.get("final_answer") == "done"
    store.close()
