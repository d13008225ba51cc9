"""The studio over a durable app: a run parked on a confirm tool, answered from the studio
through `DurableEngine.approve` / ``reject``, finished by a real worker process."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from jianmu.studio import DurableRuns, create_app
from jianmu.studio.runs import Journal
from tests.support.durable import HERE, Workers, wait_for

pytest.importorskip("dbos")
pytestmark = pytest.mark.timeout(300)
TOKEN = "durable-token"


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(f"sqlite:///{tmp_path / 'durable.sqlite'}", tmp_path)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def studio(workers: Workers, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Any]]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    sys.path.insert(0, str(HERE))
    from durable_app import engine

    from jianmu.durable import DurableEngine

    client = DurableEngine(workers.db, name=engine.name, config=engine.config)
    client._trees = engine._trees
    source = DurableRuns(client, Journal(str(tmp_path / "journal.sqlite")))
    with TestClient(create_app([source], TOKEN, by="tester"), base_url="http://127.0.0.1",
                    follow_redirects=False) as http:
        http.get(f"/?token={TOKEN}")
        yield http, client


def _view(http: TestClient, run_id: str, *statuses: str) -> dict | None:
    view = http.get(f"/api/run/durable/{run_id}").json()
    return view if view["status"] in statuses else None


@pytest.mark.parametrize("approve", [True, False])
def test_answer_a_durable_run(workers: Workers, studio: tuple[TestClient, Any], tmp_path: Path,
                              approve: bool) -> None:
    http, client = studio
    workers.start("w1")
    out = tmp_path / "deployed.txt"
    run_id = asyncio.run(client.start("confirm", {"path": str(out)}))
    view = wait_for(lambda: _view(http, run_id, "suspended"), what="the run to ask")
    [request] = view["pending"]
    assert request["id"] == "deploy_1" and request["tool"] == "deploy"
    assert '"target": "prod"' in request["arguments"]
    # the nodes it waits in run, down to the one asking (the composites between said "not run")
    rows = {n["key"]: n for n in view["nodes"]}
    [asking] = [n for n in view["nodes"] if n["status"] == "suspended"]
    above = rows.get(asking["parent"])
    while above is not None:
        assert above["status"] == "running", above
        above = rows.get(above["parent"])
    # what it spent so far, from the steps it recorded (its state is the worker's until it ends)
    assert re.fullmatch(r"1 model request · 0 tool calls · \d+ in / \d+ out tokens.*",
                        view["usage"]), view["usage"]
    page = http.get(f"/run/durable/{run_id}").text
    assert "deploy_1" in page and run_id in http.get("/?status=suspended").text
    csrf = re.search(r'<meta name="csrf" content="([^"]+)">', page)
    assert csrf
    decision = "approve" if approve else "reject"
    answer = http.post(f"/run/durable/{run_id}/{decision}",
                       json={"call_id": "deploy_1", "message": "checked"},
                       headers={"X-CSRF-Token": csrf.group(1)})
    assert answer.status_code == 200, answer.text
    view = wait_for(lambda: _view(http, run_id, "success", "failure"), what="the run to end")
    assert view["status"] == "success"
    assert out.exists() is approve
    # the steps say what the run's own count says once it ended
    from jianmu.studio.durable_runs import steps_usage
    assert steps_usage(client.steps(run_id)) == view["usage"]
    assert ("finished: deployed" == view["result"]) is approve
    verb = "approved" if approve else "rejected"
    assert any(t["title"] == f"{verb} by tester: deploy_1" and t["text"] == "checked"
               for t in view["timeline"])
    kinds = [t["kind"] for t in view["timeline"]]  # told from the steps the run recorded
    assert kinds[0] == "model" and kinds[-1] == "model" and "decision" in kinds
    assert ("result" in kinds) is approve
    assert view["timeline"][0]["title"].startswith("model turn · ")
    assert "asks for: deploy" in view["timeline"][0]["text"]
    llm = next(n for n in view["nodes"] if n["kind"] == "model")
    assert llm["status"] == "success"  # its turns were recorded
    again = http.post(f"/run/durable/{run_id}/{decision}", json={"call_id": "deploy_1"},
                      headers={"X-CSRF-Token": csrf.group(1)})
    assert again.status_code == 409
