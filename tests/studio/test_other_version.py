"""A run whose checkpoint another version of Jianmu saved (a restore refuses it): the studio
shows it as recorded and says so on its page, and refuses to approve, reject, answer or fork it
with that reason, before anything is written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from starlette.testclient import TestClient

from tests.studio.test_app import _csrf

SAID = "was saved by another version of Jianmu (its checkpoint is of version 0; this one reads"


def _older(checkpoints: Path, run_id: str) -> list[tuple[int, str]]:
    """Make each checkpoint of ``run_id`` one of version 0; the rows as they are then."""
    with sqlite3.connect(checkpoints) as con:
        for seq, data in con.execute("SELECT seq, data FROM checkpoints WHERE run_id = ?",
                                     (run_id,)).fetchall():
            con.execute("UPDATE checkpoints SET data = ? WHERE run_id = ? AND seq = ?",
                        (json.dumps({**json.loads(data), "version": 0}), run_id, seq))
        return con.execute("SELECT seq, data FROM checkpoints WHERE run_id = ? ORDER BY seq",
                           (run_id,)).fetchall()


def test_a_run_saved_by_another_version_is_shown_and_said(
        client: TestClient, run_id: str, checkpoints: Path) -> None:
    _older(checkpoints, run_id)
    view = client.get(f"/api/run/cp/{run_id}").json()
    assert SAID in view["note"]
    assert view["can_fork"] is False
    assert view["pending"] and view["points"]  # what it recorded is still there to read
    page = client.get(f"/run/cp/{run_id}").text
    assert "another version of Jianmu" in page
    assert 'data-role="fork"' not in page


def test_deciding_or_forking_it_is_refused_and_writes_nothing(
        client: TestClient, run_id: str, checkpoints: Path) -> None:
    rows = _older(checkpoints, run_id)
    csrf = _csrf(client, run_id)
    listed = client.get("/").text.count("<tr class=\"run\"")
    for action, body in (("approve", {"call_id": "deploy_1"}),
                         ("approve", {"call_id": "deploy_1", "arguments": {"target": "x"}}),
                         ("reject", {"call_id": "deploy_1", "message": "no"})):
        answer = client.post(f"/run/cp/{run_id}/{action}", json=body,
                             headers={"X-CSRF-Token": csrf})
        assert answer.status_code == 409, answer.text
        assert SAID in answer.json()["error"]
        assert "continue it with the Jianmu that saved it" in answer.json()["error"]
    fork = client.post(f"/run/cp/{run_id}/fork", json={"point": 1},
                       headers={"X-CSRF-Token": csrf})
    assert fork.status_code == 400 and SAID in fork.json()["error"], fork.text
    with sqlite3.connect(checkpoints) as con:
        assert con.execute("SELECT seq, data FROM checkpoints WHERE run_id = ? ORDER BY seq",
                           (run_id,)).fetchall() == rows
        assert con.execute("SELECT COUNT(*) FROM jianmu_studio_events").fetchone() == (0,)
    assert client.get("/").text.count("<tr class=\"run\"") == listed  # no fork was made
    view = client.get(f"/api/run/cp/{run_id}").json()
    assert view["status"] == "suspended"
    assert not [t for t in view["timeline"] if t["kind"] == "decision"]
