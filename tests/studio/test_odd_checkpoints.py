"""A checkpoint of this version whose parts have not the shapes a restore reads (a store's bug,
a hand edit: ``"pending": 5``): the run's page says it is damaged and why, as for one that is
not JSON, and deciding it is refused the same way; and any other failure of the studio is a
page (or JSON) that says what failed, not a bare "Internal Server Error"."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from jianmu.studio import create_app
from tests.studio.conftest import TOKEN
from tests.studio.test_app import _csrf


def _edit(checkpoints: Path, run_id: str, **parts: Any) -> None:
    with sqlite3.connect(checkpoints) as con:
        for seq, data in con.execute("SELECT seq, data FROM checkpoints WHERE run_id = ?",
                                     (run_id,)).fetchall():
            con.execute("UPDATE checkpoints SET data = ? WHERE run_id = ? AND seq = ?",
                        (json.dumps({**json.loads(data), **parts}), run_id, seq))


def test_a_checkpoint_of_odd_shape_is_said_damaged_not_a_bare_500(
        client: TestClient, run_id: str, checkpoints: Path) -> None:
    csrf = _csrf(client, run_id)
    _edit(checkpoints, run_id, interaction={"pending": 5})
    page = client.get(f"/run/cp/{run_id}", headers={"Accept": "text/html"})
    assert page.status_code == 500
    assert "<h1>This run cannot be read</h1>" in page.text
    assert f"the checkpoint of run {run_id!r} is damaged: interaction.pending".replace(
        "'", "&#x27;") in page.text
    api = client.get(f"/api/run/cp/{run_id}")
    assert api.status_code == 500 and "interaction.pending" in api.json()["error"]
    told = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                       headers={"X-CSRF-Token": csrf})
    assert told.status_code == 409 and "is damaged: interaction.pending" in told.json()["error"]
    assert f'data-run="{run_id}"' in client.get("/?status=damaged").text  # listed as such


class _Broken:
    """A run source whose pages fail as a bug would."""

    kind = "cp"

    def runs(self, status: str | None = None) -> list[dict[str, Any]]:
        return []

    def view(self, run_id: str) -> dict[str, Any]:
        raise KeyError("nodes")

    def close(self) -> None:
        pass


def test_a_failure_of_the_studio_is_said_not_a_bare_500() -> None:
    app = create_app([_Broken()], TOKEN, by="tester")  # type: ignore[list-item]
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        client.get(f"/?token={TOKEN}")
        page = client.get("/run/cp/x", headers={"Accept": "text/html"})
        assert page.status_code == 500
        assert "<h1>The studio failed</h1>" in page.text and "KeyError: &#x27;nodes&#x27;" in (
            page.text)
        assert '<a href="/">All runs</a>' in page.text
        assert page.headers["content-security-policy"].startswith("default-src 'self'")
        api = client.get("/api/run/cp/x")
        assert api.status_code == 500
        assert api.json() == {"error": "KeyError: 'nodes' (the studio's output has the details)"}
