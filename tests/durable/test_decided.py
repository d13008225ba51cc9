"""A decided request is no longer pending, and a cancelled run takes no decision."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import RunNotFoundError
from tests.support.durable import Workers, wait_for

pytestmark = pytest.mark.timeout(400)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """What the client reads does not depend on the database: SQLite only, to keep it quick."""
    return f"sqlite:///{tmp_path / 'durable.sqlite'}"


def _suspended(client: Any, run_id: str) -> Any:
    return client.run_info(run_id).status == "suspended"


def test_a_decided_request_is_not_pending_and_a_cancelled_run_takes_no_decision(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    """Once approved, a request stayed in `run_info`, `runs`, `pending` and `wait` (SUSPENDED at
    once, with it) until the run's worker took the decision, and for good while no worker ran;
    a cancelled run's request was approved (recorded, "a worker goes on with it") unread."""
    out = tmp_path / "deployed.txt"
    worker = workers.start("w1")
    run_id, cancelled = (asyncio.run(client.start("confirm", {"path": str(out)}))
                         for _ in range(2))
    for run in (run_id, cancelled):
        wait_for(lambda run=run: _suspended(client, run), what="the run to ask for approval")
    client.client.cancel_workflow(cancelled)
    Workers.kill(worker)  # no worker takes the decision: what the client says is all there is

    asyncio.run(client.approve(run_id, "deploy_1", "go"))
    info = client.run_info(run_id)
    assert (info.status, info.pending) == ("running", ())  # decided; no worker has it yet
    assert asyncio.run(client.pending(run_id)) == []
    assert [r.run_id for r in client.runs(status="suspended")] == []
    with pytest.raises(TimeoutError):  # not SUSPENDED: it goes on once a worker is there
        asyncio.run(client.wait(run_id, timeout=0.3))

    assert client.run_info(cancelled).status == "cancelled"
    assert asyncio.run(client.pending(cancelled)) == []
    with pytest.raises(RunNotFoundError,
                       match=r"waits for no approval 'deploy_1' \(it was cancelled\)"):
        asyncio.run(client.approve(cancelled, "deploy_1"))
    assert client.decision(cancelled, "deploy_1") is None
    assert not out.exists()  # (a worker restarted then finishes it: test_approval.py)
