"""The checkpoint file removed, or replaced by a new one, while the studio serves it (``rm -rf
.jianmu`` then a new ``jianmu run``): the studio reads the file now at its path. It kept reading
the removed file through the connections it opened at start: the new run never showed, the old
one did, and a decision on it was "recorded" in a file nobody would read again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jianmu.studio import create_app
from tests.studio.conftest import TOKEN as APP_TOKEN
from tests.studio.test_app import _csrf
from tests.studio.test_stream import _events, _stream
from tests.support.studio import start_suspended, studio_sources


def _remove(checkpoints: Path) -> None:
    for path in checkpoints.parent.glob(checkpoints.name + "*"):  # with its -wal and -shm
        path.unlink()


def test_a_replaced_file_shows_its_own_runs(client: TestClient, run_id: str,
                                            checkpoints: Path) -> None:
    assert run_id in client.get("/").text
    _remove(checkpoints)
    new_run = start_suspended(checkpoints, "staging")
    listed = client.get("/").text
    assert new_run in listed and run_id not in listed
    [request] = client.get(f"/api/run/cp/{new_run}").json()["pending"]
    assert json.loads(request["arguments"]) == {"target": "staging"}
    gone = client.get(f"/api/run/cp/{run_id}")
    assert gone.status_code == 404 and run_id in gone.json()["error"]


def test_a_decision_on_a_run_whose_file_was_removed_is_refused(client: TestClient, run_id: str,
                                                               checkpoints: Path) -> None:
    csrf = _csrf(client, run_id)
    _remove(checkpoints)
    answer = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                         headers={"X-CSRF-Token": csrf})
    # it said "approved deploy_1: recorded in the checkpoint", into the removed file
    assert answer.status_code == 409 and answer.json()["error"].startswith(f"no run {run_id!r}")


def test_the_stream_of_a_run_whose_file_was_removed_says_it_is_gone(
        checkpoints: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.01)
    app = create_app(studio_sources(checkpoints), APP_TOKEN, by="tester")

    def until(chunks: list[bytes]) -> bool:
        if len(chunks) == 1:  # the run as it was: then its file is removed
            _remove(checkpoints)
        return any(name == "gone" for name, _ in _events(chunks))

    chunks = asyncio.run(_stream(app, f"/stream/run/cp/{run_id}", until))
    assert [name for name, _ in _events(chunks)] == ["message", "gone"]
    assert run_id in json.loads(_events(chunks)[-1][1])["error"]
