"""The studio app through Starlette's TestClient: the token, the CSRF token, escaping, and
answering a checkpointed run the way ``jianmu resume`` does."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
from jianmu.nodes import AgentState
from jianmu.studio import CheckpointRuns, create_app
from jianmu.studio.runs import Journal
from tests.studio.conftest import TOKEN
from tests.studio.studio_flow import build_tree
from tests.support.durable import wait_for


def _csrf(client: TestClient, run_id: str) -> str:
    page = client.get(f"/run/cp/{run_id}").text
    found = re.search(r'<meta name="csrf" content="([^"]+)">', page)
    assert found
    return found.group(1)


def _finished(client: TestClient, run_id: str) -> dict | None:
    view = client.get(f"/api/run/cp/{run_id}").json()
    return view if view["status"] in ("success", "failure") else None


def test_runs_list_filters_by_status(client: TestClient, run_id: str) -> None:
    assert run_id in client.get("/").text
    assert run_id in client.get("/?status=suspended").text
    assert run_id not in client.get("/?status=success").text


def test_the_pending_call_shows_in_full(client: TestClient, run_id: str) -> None:
    view = client.get(f"/api/run/cp/{run_id}").json()
    assert view["status"] == "suspended"
    [request] = view["pending"]
    assert request["id"] == "deploy_1" and request["tool"] == "deploy"
    assert json.loads(request["arguments"]) == {"target": "prod <script>alert('args')</script>"}
    assert "user_confirm" in request["reason"]
    assert [n["status"] for n in view["nodes"]] == ["running", "success", "suspended", "invalid"]


def test_approve_continues_the_run_and_records_who(client: TestClient, run_id: str) -> None:
    csrf = _csrf(client, run_id)
    answer = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                         headers={"X-CSRF-Token": csrf})
    assert answer.status_code == 200, answer.text
    assert answer.json()["by"] == "tester"
    view = wait_for(lambda: _finished(client, run_id), 60, "the run to finish")
    assert view["status"] == "success"
    assert "deployed" in view["result"] and view["pending"] == []
    assert view["usage"].startswith("0 model requests · 1 tool call · ")  # the run's usage
    assert {n["status"] for n in view["nodes"]} == {"success"}
    [approved] = [t for t in view["timeline"] if t["kind"] == "decision"]
    assert approved["title"] == "approved by tester: deploy"
    calls = [t for t in view["timeline"] if t["kind"] == "result"]
    assert calls and "deployed" in calls[0]["text"]
    again = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                        headers={"X-CSRF-Token": csrf})
    assert again.status_code == 409  # an approval is used once


def test_reject_with_a_reason(client: TestClient, run_id: str, checkpoints: Path) -> None:
    csrf = _csrf(client, run_id)
    answer = client.post(f"/run/cp/{run_id}/reject",
                         json={"call_id": "deploy_1", "message": "not on a Friday"},
                         headers={"X-CSRF-Token": csrf})
    assert answer.status_code == 200, answer.text
    view = wait_for(lambda: _finished(client, run_id), 60, "the run to finish")
    assert "deployed" not in str(view["result"])
    with SQLiteCheckpointer(checkpoints) as store:
        data = store.load(run_id)
    assert data is not None
    [decision] = data["interaction"]["decisions"]
    assert decision["approved"] is False
    assert decision["message"] == "not on a Friday (rejected by tester in Jianmu Studio)"


def test_unknown_requests_and_runs_are_refused(client: TestClient, run_id: str) -> None:
    csrf = _csrf(client, run_id)
    answer = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "other"},
                         headers={"X-CSRF-Token": csrf})
    assert answer.status_code == 409
    assert client.get("/api/run/cp/nope").status_code == 404
    assert client.get("/api/run/elsewhere/nope").status_code == 404


def test_a_browser_following_a_link_to_a_missing_run_gets_a_page(client: TestClient) -> None:
    """A link to a run that is gone showed the browser raw JSON: a page now, the id escaped;
    a script (no ``text/html`` in its Accept) still gets the JSON."""
    html = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    page = client.get("/run/cp/%3Cscript%3Ealert(1)%3C%2Fscript%3E", headers=html)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "No such run" in page.text and 'href="/"' in page.text
    assert "<script>alert" not in page.text and "&lt;script&gt;alert(1)" in page.text
    assert client.get("/api/run/cp/nope", headers=html).json()["error"]
    assert client.get("/run/cp/nope").json()["error"]


def test_the_stream_sends_the_run_until_it_ends(client: TestClient, run_id: str) -> None:
    csrf = _csrf(client, run_id)
    client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                headers={"X-CSRF-Token": csrf})
    wait_for(lambda: _finished(client, run_id), 60, "the run to finish")
    with client.stream("GET", f"/stream/run/cp/{run_id}") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = [line for line in stream.iter_lines() if line.startswith("data: ")]
    assert json.loads(events[-1][6:])["status"] == "success"


def test_a_run_the_studio_cannot_rebuild_gets_the_decision_recorded(tmp_path: Path) -> None:
    path = tmp_path / "own.sqlite"
    with SQLiteCheckpointer(path) as store:
        runner = ReactiveRunner(build_tree(), StateManager(AgentState), checkpointer=store)
        assert runner.run_sync().status.value == "suspended"
    journal = Journal(str(path))
    with TestClient(create_app([CheckpointRuns(str(path), journal)], TOKEN, by="tester"),
                    base_url="http://127.0.0.1", follow_redirects=False) as client:
        client.get(f"/?token={TOKEN}")
        csrf = _csrf(client, runner.run_id)
        answer = client.post(f"/run/cp/{runner.run_id}/approve", json={"call_id": "deploy_1"},
                             headers={"X-CSRF-Token": csrf})
        assert "recorded in the checkpoint" in answer.json()["message"]
        view = client.get(f"/api/run/cp/{runner.run_id}").json()
        assert view["status"] == "decided" and "ReactiveRunner.restore" in view["note"]
    with SQLiteCheckpointer(path) as store:  # the run's own code continues it, approved
        again = ReactiveRunner.restore(build_tree(), store, runner.run_id,
                                       state_manager=StateManager(AgentState))
        assert again.run_sync().ok
        assert "deployed" in str(again.state.get("final_answer"))


def test_the_command_prints_the_url_and_warns_off_loopback(
        checkpoints: Path, run_id: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import uvicorn

    from jianmu.cli import main

    served: list[object] = []
    monkeypatch.setattr(uvicorn.Server, "run",
                        lambda self, sockets=None: served.append(self.config))
    sockets: list[socket.socket] = []  # not bound: nothing is served
    monkeypatch.setattr("jianmu._net.bind_listener",
                        lambda host, port: sockets.append(socket.socket()) or sockets[-1])
    assert main(["studio", "--checkpoints", str(checkpoints), "--port", "9999"]) == 0
    out = capsys.readouterr()
    assert re.search(r"http://127\.0\.0\.1:9999/\?token=[\w-]{20,}", out.out)
    assert "warning" not in out.err
    assert main(["studio", "--checkpoints", str(checkpoints), "--host", "0.0.0.0"]) == 0
    assert "warning: serving on 0.0.0.0" in capsys.readouterr().err
    assert len(served) == 2
    for each in sockets:
        each.close()
    assert main(["studio", "--checkpoints", str(checkpoints / "missing")]) == 2


def _approved(client: TestClient, run_id: str) -> dict:
    csrf = _csrf(client, run_id)
    answer = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                         headers={"X-CSRF-Token": csrf})
    assert answer.status_code == 200, answer.text
    return wait_for(lambda: _finished(client, run_id), 60, "the run to finish")


def test_the_timeline_tells_the_run_in_the_order_it_happened(client: TestClient,
                                                             run_id: str) -> None:
    view = _approved(client, run_id)
    titles = [t["title"] for t in view["timeline"]]
    order = ["guard asks a person about: deploy", "asked: deploy",
             "approved by tester: deploy", "guard allowed: deploy", "started: deploy"]
    assert [titles.index(t) for t in order] == sorted(titles.index(t) for t in order), titles
    result = next(i for i, t in enumerate(titles) if t.startswith("result of deploy"))
    assert result > titles.index("started: deploy")
    times = [t["time"] for t in view["timeline"]]
    assert times == sorted(times)
    points = [t["point"] for t in view["timeline"]]
    assert points == sorted(points)  # each entry names the point it led to
    assert all("." not in t["title"].split(":")[0] for t in view["timeline"])  # words, not names


def test_a_point_shows_the_state_and_statuses_then(client: TestClient, run_id: str) -> None:
    view = _approved(client, run_id)
    points = view["points"]
    assert [p["n"] for p in points] == list(range(len(points)))
    first = client.get(f"/api/run/cp/{run_id}/point/0").json()
    assert {n["status"] for n in first["nodes"]} == {"invalid"}
    assert first["state"]["root"]["actions"] == [] and first["changed"] == []
    assert [n["path"] for n in first["nodes"]] == [n["path"] for n in view["nodes"]]
    asked = next(p["n"] for p in points if "asked: deploy" in p["label"])
    there = client.get(f"/api/run/cp/{run_id}/point/{asked}").json()
    assert [n["status"] for n in there["nodes"]] == ["running", "success", "suspended",
                                                     "invalid"]
    last = client.get(f"/api/run/cp/{run_id}/point/{points[-1]['n']}").json()
    assert last["state"] == view["state"]
    assert "final_answer" in last["changed"]
    missing = client.get(f"/api/run/cp/{run_id}/point/{len(points) + 5}")
    assert missing.status_code == 404 and "its points are 0 to" in missing.json()["error"]


def _fork(client: TestClient, run_id: str, body: dict) -> tuple[int, dict]:
    csrf = _csrf(client, run_id)
    answer = client.post(f"/run/cp/{run_id}/fork", json=body, headers={"X-CSRF-Token": csrf})
    return answer.status_code, answer.json()


def test_fork_from_a_point_leaves_the_original_as_it_was(client: TestClient, run_id: str,
                                                         checkpoints: Path) -> None:
    view = _approved(client, run_id)
    with SQLiteCheckpointer(checkpoints) as store:
        saved = store.load(run_id)
    before = next(p["n"] for p in view["points"] if "asked: deploy" in p["label"]) - 1
    state = client.get(f"/api/run/cp/{run_id}/point/{before}").json()["state"]
    state["root"]["actions"][0]["arguments"] = {"target": "staging"}
    code, made = _fork(client, run_id, {"point": before, "state": state})
    assert code == 200, made
    fork_id = made["run_id"]
    assert fork_id != run_id and made["url"] == f"/run/cp/{fork_id}"
    view_fork = wait_for(lambda: client.get(f"/api/run/cp/{fork_id}").json()
                         if client.get(f"/api/run/cp/{fork_id}").json()["status"] != "running"
                         else None, 60, "the fork to ask")
    assert view_fork["status"] == "suspended"  # the guard asks again, in the fork
    assert view_fork["forked_from"] == {"run": run_id, "point": before}
    assert "staging" in view_fork["pending"][0]["arguments"]
    done = _approved(client, fork_id)
    assert "deployed</b> staging" in done["result"]
    with SQLiteCheckpointer(checkpoints) as store:
        assert store.load(run_id) == saved
    listed = client.get("/").text
    assert (f'forked from <a href="/run/cp/{run_id}#point={before}">{run_id}</a> at point '
            f'{before}') in listed  # opens the run at that point


def test_a_fork_that_does_not_fit_is_refused_and_leaves_nothing(
        client: TestClient, run_id: str, checkpoints: Path) -> None:
    with SQLiteCheckpointer(checkpoints) as store:
        runs = len(store.list_runs())
    code, said = _fork(client, run_id, {"point": 1, "state": {"root": {"rounds": "many"}}})
    assert code == 400 and "rounds" in said["error"]
    # the reason names the fork's run, which is gone: said, so no one looks for it
    named = set(re.findall(r"run '(\w+)'", said["error"])) - {run_id}
    assert all(f"{each!r} was removed" in said["error"] for each in named), said["error"]
    code, said = _fork(client, run_id, {"point": 999})
    assert code == 400 and "no point 999" in said["error"]
    code, said = _fork(client, run_id, {"point": "1"})
    assert code == 400
    code, said = _fork(client, run_id, {"point": 1, "state": [1]})
    assert code == 400
    with SQLiteCheckpointer(checkpoints) as store:
        assert len(store.list_runs()) == runs


def test_the_runs_list_shows_this_project_unless_asked_for_all(
        client: TestClient, run_id: str, checkpoints: Path,
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.studio import start_suspended

    # another project, the same (global) checkpoint file
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    other = start_suspended(checkpoints)
    mine = client.get("/").text
    assert run_id in mine and other not in mine
    everything = client.get("/?scope=all").text
    assert run_id in everything and other in everything
    assert other in client.get("/?scope=all&status=suspended").text
    assert 'class="run status-' not in mine  # colour is kept to the status badge


def test_a_run_in_progress_elsewhere_shows_as_it_goes(checkpoints: Path) -> None:
    import asyncio
    import threading

    import py_trees
    from py_trees.common import Status

    from jianmu import AsyncNode

    release = threading.Event()

    class Hold(AsyncNode):
        async def update_async(self) -> Status:
            self.state.update({"final_answer": "halfway"})
            await asyncio.to_thread(release.wait, 60)
            return Status.SUCCESS

    checkpoints.parent.mkdir(parents=True, exist_ok=True)
    store = SQLiteCheckpointer(checkpoints)
    runner = ReactiveRunner(py_trees.composites.Sequence("busy", memory=True, children=[
        Hold("hold")]), StateManager(AgentState), checkpointer=store)
    thread = threading.Thread(target=runner.run_sync)
    thread.start()
    try:
        journal = Journal(str(checkpoints))
        with TestClient(create_app([CheckpointRuns(str(checkpoints), journal)], TOKEN,
                                   by="tester"), base_url="http://127.0.0.1",
                        follow_redirects=False) as client:
            client.get(f"/?token={TOKEN}")
            def halfway() -> dict | None:
                answer = client.get(f"/api/run/cp/{runner.run_id}")
                if answer.status_code != 200:  # nothing written yet
                    return None
                view = answer.json()
                return view if view["state"]["root"]["final_answer"] == "halfway" else None

            view = wait_for(halfway, 30, "the run's progress")
            assert [n["status"] for n in view["nodes"]] == ["running", "running"]
            assert view["points"] and view["status"] == "running"
            assert runner.run_id in client.get("/?status=running").text
    finally:
        release.set()
        thread.join(60)
        store.close()


def test_the_app_without_the_studio_extra_names_it() -> None:
    code = ("import sys\nsys.modules['starlette'] = None\n"
            "from jianmu.errors import MissingExtraError\n"
            "from jianmu.studio import timeline  # no Starlette needed to tell a run's story\n"
            "try:\n    from jianmu.studio import create_app\n"
            "except MissingExtraError as exc:\n    print(exc.extra, exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.startswith("studio "), done.stdout + done.stderr
    assert "pip install 'jianmu[studio]'" in done.stdout


def test_the_runs_list_says_what_a_source_is(client: TestClient, run_id: str) -> None:
    page = client.get("/").text
    row = re.search(rf'<tr class="run" data-run="{run_id}">.*?</tr>', page, re.S)
    assert row is not None
    assert '<abbr title="saved by &#x27;jianmu run&#x27;' in row.group(0)
    assert 'data-role="source">checkpoints</abbr>' in row.group(0)
    assert ">cp<" not in row.group(0)  # the URL's short name is not what a person reads


def test_a_damaged_checkpoint_is_said_not_a_bare_500(
    client: TestClient, run_id: str, checkpoints: Path,
) -> None:
    import sqlite3

    with sqlite3.connect(checkpoints) as con:
        con.execute("UPDATE checkpoints SET data = '{oops' WHERE run_id = ?", (run_id,))
    for path in (f"/api/run/cp/{run_id}", f"/run/cp/{run_id}"):
        answer = client.get(path)
        assert answer.status_code == 500
        assert f"the checkpoint of run {run_id!r}" in answer.json()["error"]
        assert "is not JSON" in answer.json()["error"]
    assert run_id in client.get("/").text  # the runs list still shows it, as damaged
    assert run_id in client.get("/?status=damaged").text
    assert run_id not in client.get("/?status=suspended").text


def test_a_damaged_point_is_said_not_a_bare_500(client: TestClient, run_id: str,
                                                checkpoints: Path) -> None:
    import sqlite3

    with sqlite3.connect(checkpoints) as con:
        con.execute("UPDATE jianmu_points SET data = '{oops' WHERE run_id = ? AND point = 1",
                    (run_id,))
    for path in (f"/api/run/cp/{run_id}", f"/run/cp/{run_id}", f"/api/run/cp/{run_id}/point/1"):
        answer = client.get(path)
        assert answer.status_code == 500, path
        assert f"point 1 of run {run_id!r}" in answer.json()["error"]
        assert "is not JSON" in answer.json()["error"]


def test_a_damaged_checkpoint_of_a_run_without_points_is_said(tmp_path: Path) -> None:
    """A run that recorded no ticks travels through its checkpoints: one damaged is said."""
    import sqlite3

    path = tmp_path / "checkpoints.sqlite"
    with SQLiteCheckpointer(str(path), record_ticks=False) as store:
        runner = ReactiveRunner(build_tree({"target": "prod"}), StateManager(AgentState, {}),
                                checkpointer=store, run_id="plain")
        assert runner.run_sync(timeout=60).status.value == "suspended"
    with sqlite3.connect(path) as con:
        con.execute("UPDATE checkpoints SET data = '{oops' WHERE run_id = 'plain'")
    app = create_app([CheckpointRuns(str(path), Journal(str(path)))], TOKEN, by="tester")
    with TestClient(app, base_url="http://127.0.0.1") as client:
        client.get(f"/?token={TOKEN}")
        for where in ("/api/run/cp/plain", "/run/cp/plain", "/api/run/cp/plain/point/0"):
            answer = client.get(where)
            assert answer.status_code == 500, where
            assert "the checkpoint of run 'plain'" in answer.json()["error"]
            assert "is not JSON" in answer.json()["error"]


def test_a_second_approval_of_the_same_call_is_told_who_decided_first(
        client: TestClient, run_id: str) -> None:
    """Two tabs approve one call: the first wins; the second was told "the run is running; it
    waits for nothing" (or "already finished"), not that the call was decided, nor by whom."""
    csrf = _csrf(client, run_id)
    first = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                        headers={"X-CSRF-Token": csrf})
    assert first.json()["ok"] is True
    second = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                         headers={"X-CSRF-Token": csrf})
    assert second.status_code == 409
    assert "was already approved by tester" in second.json()["error"], second.json()
    wait_for(lambda: _finished(client, run_id), 60, "the run to finish")
    third = client.post(f"/run/cp/{run_id}/reject", json={"call_id": "deploy_1"},
                        headers={"X-CSRF-Token": csrf})
    assert "was already approved by tester" in third.json()["error"], third.json()


def test_a_request_of_a_run_that_timed_out_is_approved(
    client: TestClient, checkpoints: Path,
) -> None:
    """A run that timed out while a call waited for a person goes on when it is approved (a
    timeout is not a run's end). Before, the studio refused: "already finished (timeout)"."""
    from contextlib import redirect_stdout
    from io import StringIO

    from jianmu.cli import main

    out, hold = StringIO(), Path("hold")
    hold.write_text("")
    with redirect_stdout(out):
        code = main(["run", str(Path(__file__).parent / "timed_flow.py"), "--config",
                     str(checkpoints.parent / "jianmu.yaml"), "--timeout", "5",
                     "--non-interactive"])
    assert code == 4, out.getvalue()
    hold.unlink()
    found = re.search(r"^timeout run (\w+) ", out.getvalue(), re.M)
    assert found, out.getvalue()
    run_id = found.group(1)
    view = client.get(f"/api/run/cp/{run_id}").json()
    assert view["status"] == "timeout" and [r["id"] for r in view["pending"]] == ["deploy_1"]
    answer = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                         headers={"X-CSRF-Token": _csrf(client, run_id)})
    assert answer.status_code == 200, answer.text
    done = wait_for(lambda: _finished(client, run_id), 60, "the run to finish")
    assert done["status"] == "success" and "deployed" in done["result"]


def test_an_address_with_no_page_gets_a_page_that_says_so(client: TestClient) -> None:
    for where in ("/runs", "/run", "/static/nothing.js"):
        page = client.get(where, headers={"Accept": "text/html"})
        assert page.status_code == 404, where
        assert page.headers["content-type"].startswith("text/html")
        assert "<h1>No such page</h1>" in page.text and '<a href="/">All runs</a>' in page.text
        assert f"no page at &#x27;{where}&#x27;" in page.text
    script = client.get("/api/nothing")  # a script is answered in JSON
    assert script.status_code == 404
    assert script.json() == {"error": "the studio has no page at '/api/nothing': its pages are "
                                      "the runs list (/) and each run's (/run/...)"}
