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
from jianmu._cli.targets import Launch, LaunchStore
from tests.studio.test_app import _csrf
from tests.support.durable import wait_for
from tests.support.studio import FLOW


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
    launches = LaunchStore(checkpoints)  # as `jianmu run` records it before the first tick
    launches.save(runner.run_id, Launch(kind="script", target=str(FLOW)))
    launches.close()
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


def test_a_run_made_in_python_offers_no_fork_and_says_why(client: TestClient,
                                                         checkpoints: Path) -> None:
    """A run a script made with a SQLiteCheckpointer (no 'jianmu run'): the studio cannot
    rebuild its tree, so the page offers no Fork that is always refused, and says why."""

    class Done(AsyncNode):
        async def update_async(self) -> Status:
            self.state.update({"final_answer": "done"})
            return Status.SUCCESS

    store = SQLiteCheckpointer(checkpoints)
    try:
        runner = ReactiveRunner(Done("done"), StateManager(AgentState), checkpointer=store)
        assert runner.run_sync().status.value == "success"
    finally:
        store.close()
    view = client.get(f"/api/run/cp/{runner.run_id}").json()
    assert view["points"] and not view["can_fork"]
    assert "jianmu run" in view["fork_note"], view["fork_note"]
    page = client.get(f"/run/cp/{runner.run_id}").text
    assert 'data-role="fork"' not in page and 'data-role="fork-note"' in page
