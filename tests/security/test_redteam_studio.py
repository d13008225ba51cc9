"""Red team, the studio's time slider and fork: point numbers past any the store can hold,
JSON bodies that are not objects, run ids that name no run, hosts and methods it does not
serve. Each gets a clear 4xx answer, never a server error, and no run is made or changed.

Fixed here: a point past SQLite's integers (``2**63``) and a JSON body that was a list or a
string broke the endpoints with a server error.
"""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the tests take them
from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jianmu.errors import CheckpointError
from jianmu.runtime import SQLiteCheckpointer
from jianmu.runtime.fork import fork_run
from tests.studio.conftest import TOKEN, anonymous, checkpoints, client, run_id  # noqa: F401
from tests.studio.test_app import _csrf

HUGE = 2**63


def _runs(checkpoints: Path) -> int:
    with SQLiteCheckpointer(checkpoints) as store:
        return len(store.list_runs())


def test_points_past_any_the_store_holds_are_not_found(client: TestClient, run_id: str) -> None:
    for number in (HUGE, 10**40, 999_999):
        answer = client.get(f"/api/run/cp/{run_id}/point/{number}")
        assert answer.status_code == 404, number
        assert "error" in answer.json()
    assert client.get(f"/api/run/cp/{run_id}/point/-1").status_code == 404
    assert client.get(f"/api/run/cp/{run_id}/point/..%2f..%2fetc").status_code == 404


def test_a_fork_from_a_bad_point_or_body_is_refused(client: TestClient, run_id: str,
                                                    checkpoints: Path) -> None:
    before = _runs(checkpoints)
    csrf = {"X-CSRF-Token": _csrf(client, run_id)}
    url = f"/run/cp/{run_id}/fork"
    for body in ({"point": HUGE}, {"point": 10**40}, {"point": -1}, {"point": 1.5},
                 {"point": True}, {"point": "0"}, [0], "0", 0, None,
                 {"point": 0, "state": []}, {"point": 0, "state": {"root": []}},
                 {"point": 0, "state_text": "{not json"}, {"point": 0, "state_text": "[]"},
                 {"point": 0, "state_text": 5}, {"point": 0, "state_text": "{}", "state": {}}):
        answer = client.post(url, json=body, headers=csrf)
        assert answer.status_code == 400, body
        assert "error" in answer.json()
    for other in ("nope", "..%2f..%2fetc", "x" * 5000):
        assert client.post(f"/run/cp/{other}/fork", json={"point": 0},
                           headers=csrf).status_code in (400, 404)
    with SQLiteCheckpointer(checkpoints) as store:  # what `jianmu runs fork --at` calls
        for point in (HUGE, -1):
            with pytest.raises(CheckpointError, match="point"):
                fork_run(store, run_id, point)
    assert _runs(checkpoints) == before


def test_a_decision_with_a_body_that_is_not_an_object_is_refused(client: TestClient,
                                                                 run_id: str) -> None:
    csrf = {"X-CSRF-Token": _csrf(client, run_id)}
    for body in (["deploy_1"], "deploy_1", 1, None, {"call_id": ["deploy_1"]},
                 {"call_id": "deploy_1", "arguments_text": "{no"},
                 {"call_id": "deploy_1", "arguments_text": "[1]"},
                 {"call_id": "deploy_1", "arguments_text": 1},
                 {"call_id": "deploy_1", "arguments_text": "{}", "arguments": {}}):
        assert client.post(f"/run/cp/{run_id}/approve", json=body,
                           headers=csrf).status_code == 400, body
    assert client.post(f"/run/cp/{run_id}/reject", headers=csrf, json={
        "call_id": "deploy_1", "arguments_text": "{}"}).status_code == 400
    assert client.get(f"/api/run/cp/{run_id}").json()["status"] == "suspended"


def test_state_changing_endpoints_take_only_posts(client: TestClient, run_id: str) -> None:
    for path in (f"/run/cp/{run_id}/fork", f"/run/cp/{run_id}/approve"):
        assert client.get(path).status_code in (404, 405), path
        assert client.put(path, json={}).status_code == 403, path  # no CSRF token
    assert client.get(f"/api/run/cp/{run_id}").json()["status"] == "suspended"


def test_the_studios_scripts_never_turn_data_into_markup_or_code() -> None:
    import jianmu.studio

    static = Path(jianmu.studio.__file__).parent / "static"
    sinks = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|"
                       r"new Function|setAttribute\(\s*[\"'](?:on|href|src|style)", re.I)
    scripts = sorted(static.glob("*.js"))
    assert scripts
    for script in scripts:
        found = sinks.findall(script.read_text(encoding="utf-8"))
        assert not found, (script.name, found)
