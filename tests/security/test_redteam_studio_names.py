"""Red team, the studio's names: a run id, a tree's name and its nodes' names (which a skill,
an agent or whoever started the run chose) holding a bidi override, an ANSI escape or a
zero-width space. The studio shows them as escapes (``\\u202e``), as it shows a tool's
arguments and as the CLI shows every name; raw, a bidi override makes one run's id read as
another's in the list a person picks a run to approve from.

Fixed here: the runs list, the run page's heading and title, the graph, a node's details and
the point labels showed them raw.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from jianmu.studio import CheckpointRuns, create_app
from jianmu.studio.runs import Journal
from tests.support.studio import (
    chromium_problem,
    make_driver,
    script_errors,
    serve,
    skip_or_fail,
)

HIDDEN = "\u202egnp.exe\x1b[2J\u200b"
RAW = ("\u202e", "\x1b", "\u200b")
TOKEN = "names-token"


def _raw(text: str) -> list[str]:
    return [c for c in RAW if c in text]


def _text(page: str) -> str:
    """What a page shows: its markup without the tags (an attribute keeps the id it names)."""
    return html.unescape(re.sub(r"<[^>]*>", "", page))


@pytest.fixture
def studio(tmp_path: Path) -> Any:
    """An app over a finished run whose id, tree and node names hold hidden characters."""
    import py_trees

    from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
    from jianmu.nodes import AgentState

    path = tmp_path / "checkpoints.sqlite"
    tree = py_trees.composites.Sequence(f"tree{HIDDEN}", memory=True, children=[
        py_trees.behaviours.Success(f"node{HIDDEN}")])
    with SQLiteCheckpointer(str(path)) as store:
        # a key of the state's data (a call's arguments, as a model wrote them) too
        state = StateManager(AgentState, {"actions": [
            {"id": "a", "name": "t", "arguments": {f"key{HIDDEN}": 1}}]})
        runner = ReactiveRunner(tree, state, checkpointer=store, run_id=f"run{HIDDEN}")
        assert runner.run_sync(timeout=60).ok
    return create_app([CheckpointRuns(str(path), Journal(str(path)))], TOKEN, by="tester",
                      project=str(tmp_path))


def test_names_with_hidden_characters_are_shown_as_escapes(studio: Any) -> None:
    with TestClient(studio, base_url="http://127.0.0.1") as client:
        client.get(f"/?token={TOKEN}")
        listed = client.get("/?scope=all").text
        assert not _raw(_text(listed)) and "run\\u202egnp.exe\\u001b[2J\\u200b" in listed
        assert "tree\\u202egnp.exe" in listed
        page = client.get(f"/run/cp/{quote(f'run{HIDDEN}', safe='')}")
        assert page.status_code == 200
        assert not _raw(_text(page.text)), _raw(_text(page.text))
        view = client.get(f"/api/run/cp/{quote(f'run{HIDDEN}', safe='')}").json()
        for point in view["points"]:
            assert not _raw(point["label"]), point
        # the data keeps the names as they are (they name the nodes); the page shows escapes
        assert {n["name"] for n in view["nodes"]} == {f"tree{HIDDEN}", f"node{HIDDEN}"}


def test_the_graph_and_details_show_hidden_characters_as_escapes(studio: Any) -> None:
    problem = chromium_problem()
    if problem is not None:
        skip_or_fail(problem)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = make_driver()
    try:
        with serve(studio) as url:
            driver.get(f"{url}/?token={TOKEN}")
            driver.get(f"{url}/run/cp/{quote(f'run{HIDDEN}', safe='')}")
            wait = WebDriverWait(driver, 60, poll_frequency=0.1)
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tree [data-node]")) == 2,
                       "the graph")
            driver.find_element(By.CSS_SELECTOR, '#tree [data-key="0/0"]').click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#details .node-name"),
                       "the node's details")
            shown = driver.execute_script(
                "return document.body.innerText + Array.from(document.querySelectorAll("
                "'#tree text, #tree title')).map(t => t.textContent).join(' ')")
            assert not _raw(shown), _raw(shown)
            assert "node\\u202egnp.exe" in driver.find_element(
                By.CSS_SELECTOR, "#details .node-name").text
            assert not script_errors(driver)
            driver.get("about:blank")
    finally:
        driver.quit()


def test_a_call_id_with_hidden_characters_is_shown_as_escapes(tmp_path: Path) -> None:
    """A call's id is the model's: the approval box and the answer show it escaped, and the
    decision still names the call by its real id."""
    import py_trees
    from py_trees.common import Status

    from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager, ToolExecutor
    from jianmu.nodes import AgentState
    from tests.studio.studio_flow import Plan, deploy

    class Odd(Plan):
        async def update_async(self) -> Any:
            self.state.update({"actions": [{"id": f"call{HIDDEN}", "name": "deploy",
                                            "arguments": {"target": self.target}}]})
            return Status.SUCCESS

    path = tmp_path / "checkpoints.sqlite"
    tree = py_trees.composites.Sequence("flow", memory=True, children=[
        Odd("prod"), ToolExecutor("execute", [deploy])])
    with SQLiteCheckpointer(str(path)) as store:
        runner = ReactiveRunner(tree, StateManager(AgentState, {}), checkpointer=store,
                                run_id="odd-call")
        assert runner.run_sync(timeout=60).status.value == "suspended"
    app = create_app([CheckpointRuns(str(path), Journal(str(path)))], TOKEN, by="tester",
                     project=str(tmp_path))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        client.get(f"/?token={TOKEN}")
        page = client.get("/run/cp/odd-call").text
        assert not _raw(_text(page)) and "call\\u202egnp.exe" in _text(page)
        [request] = client.get("/api/run/cp/odd-call").json()["pending"]
        assert request["id"] == f"call{HIDDEN}"
        csrf = re.search(r'<meta name="csrf" content="([^"]+)">', page)
        assert csrf
        said = client.post("/run/cp/odd-call/approve", json={"call_id": request["id"]},
                           headers={"X-CSRF-Token": csrf.group(1)}).json()
        assert said["ok"] and not _raw(said["message"]), said


def test_a_durable_runs_decision_names_its_call_id_with_escapes(tmp_path: Path) -> None:
    """The answer to a decision on a durable run names the call as the checkpoints' does: its
    id (the model's) with hidden characters as escapes. It was sent raw to the page's status
    line."""
    from jianmu.studio import DurableRuns
    from jianmu.studio.app import TokenGuard

    decided: list[tuple[str, str]] = []

    class Engine:  # the engine as a client: the one call a decision makes
        name = "app"

        async def approve(self, run_id: str, call_id: str, message: str | None = None, *,
                          arguments: dict[str, Any] | None = None) -> None:
            decided.append((run_id, call_id))

        def runs(self, status: str | None = None) -> list[Any]:
            return []

        def shutdown(self) -> None:
            pass

    journal = Journal(str(tmp_path / "journal.sqlite"))
    app = create_app([DurableRuns(Engine(), journal)], TOKEN, by="tester")  # type: ignore[arg-type]
    with TestClient(app, base_url="http://127.0.0.1") as http:
        http.get(f"/?token={TOKEN}")
        csrf = TokenGuard(app, token=TOKEN).csrf  # what the studio's pages hold
        answer = http.post("/run/durable/r1/approve", json={"call_id": f"call{HIDDEN}"},
                           headers={"X-CSRF-Token": csrf})
    assert answer.status_code == 200, answer.text
    assert decided == [("r1", f"call{HIDDEN}")]  # decided by its real id
    message = answer.json()["message"]
    assert not _raw(message), message
    assert "call\\u202egnp.exe" in message
