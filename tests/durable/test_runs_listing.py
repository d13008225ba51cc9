"""`DurableEngine.runs` with a status and a limit: the first runs that have that status."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """Listing does not depend on the database: SQLite only, to keep it quick."""
    return f"sqlite:///{tmp_path / 'durable.sqlite'}"


def test_the_limit_counts_the_runs_of_the_status_asked_for(client: Any, tmp_path: Path) -> None:
    """``runs("queued", limit=1)`` was [] while a run was queued: the limit was given to DBOS,
    which counted every run (the first, cancelled), and only then were they filtered."""
    ids = [asyncio.run(client.start("confirm", {"path": str(tmp_path / "d.txt")}))
           for _ in range(3)]  # no worker here: they stay queued
    client.client.cancel_workflow(ids[0])
    assert [r.run_id for r in client.runs("queued", limit=1)] == [ids[1]]
    assert [r.run_id for r in client.runs("queued")] == ids[1:]
    assert [r.run_id for r in client.runs("cancelled", limit=5)] == [ids[0]]
    assert [r.run_id for r in client.runs(limit=2)] == ids[:2]
    assert client.runs("success", limit=1) == []
