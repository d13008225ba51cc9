"""Studio fixtures: a checkpoint file holding a run suspended on a confirm tool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jianmu.studio import create_app
from tests.support.studio import start_suspended, studio_sources

TOKEN = "test-token"


@pytest.fixture
def checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The checkpoint file, in a project folder the test runs in."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "runs" / "checkpoints.sqlite"


@pytest.fixture
def run_id(checkpoints: Path) -> str:
    """A run of tests/studio/studio_flow.py suspended on its ``deploy`` call."""
    return start_suspended(checkpoints)


@pytest.fixture
def anonymous(checkpoints: Path, run_id: str) -> Iterator[TestClient]:
    """A client of the studio without its token."""
    with TestClient(create_app(studio_sources(checkpoints), TOKEN, by="tester"),
                    base_url="http://127.0.0.1", follow_redirects=False) as client:
        yield client


@pytest.fixture
def client(anonymous: TestClient) -> TestClient:
    """A client that opened the printed URL, so it holds the cookie."""
    assert anonymous.get(f"/?token={TOKEN}").status_code == 303
    return anonymous
