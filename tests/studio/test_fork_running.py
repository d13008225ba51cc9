"""Fork, from the page of a run still going in another process that saved no checkpoint yet
(a `jianmu run` in a terminal): the page shows the run and its points and offers Fork, and the
refusal said "no run '...'", which the page in front of the person contradicts."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import py_trees
from py_trees.common import Status
from starlette.testclient import TestClient

from jianmu import AgentState, AsyncNode, ReactiveRunner, SQLiteCheckpointer, StateManager
from tests.studio.test_app import _csrf
from tests.support.durable import wait_for


def test_forking_a_run_still_going_elsewhere_says_why_not(client: TestClient, run_id: str,
                                                          checkpoints: Path) -> None:
    release = threading.Event()

    class Hold(AsyncNode):
        async def update_async(self) -> Status:
            self.state.update({"final_answer": "halfway"})
            await asyncio.to_thread(release.wait, 120)
            return Status.SUCCESS

    store = SQLiteCheckpointer(checkpoints)
    runner = ReactiveRunner(py_trees.composites.Sequence("busy", memory=True, children=[
        Hold("hold")]), StateManager(AgentState), checkpointer=store)
    thread = threading.Thread(target=runner.run_sync)
    thread.start()
    try:
        def going() -> dict | None:
            answer = client.get(f"/api/run/cp/{runner.run_id}")
            view = answer.json() if answer.status_code == 200 else None
            return view if view and view["points"] and view["status"] == "running" else None

        view = wait_for(going, 30, "the run to show as going")
        assert view["can_fork"]  # the page offers Fork
        answer = client.post(f"/run/cp/{runner.run_id}/fork", json={"point": 0},
                             headers={"X-CSRF-Token": _csrf(client, run_id)})
        assert answer.status_code == 400, answer.text
        said = answer.json()["error"]
        assert "no run" not in said and "still going" in said, said
    finally:
        release.set()
        thread.join(60)
        store.close()
