"""The studio app through Starlette's TestClient: the token, the CSRF token, escaping, and
answering a checkpointed run the way ``jianmu resume`` does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
from jianmu.nodes import AgentState
from jianmu.studio import CheckpointRuns, create_app
from jianmu.studio.journal import Journal
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
                    follow_redirects=False) as client:
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
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: served.append(self.config))
    assert main(["studio", "--checkpoints", str(checkpoints), "--port", "9999"]) == 0
    out = capsys.readouterr()
    assert re.search(r"http://127\.0\.0\.1:9999/\?token=[\w-]{20,}", out.out)
    assert "warning" not in out.err
    assert main(["studio", "--checkpoints", str(checkpoints), "--host", "0.0.0.0"]) == 0
    assert "warning: serving on 0.0.0.0" in capsys.readouterr().err
    assert len(served) == 2
    assert main(["studio", "--checkpoints", str(checkpoints / "missing")]) == 2
