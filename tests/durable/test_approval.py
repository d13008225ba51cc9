"""A run parked on an approval survives its workers, and is answered from any process."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import RunNotFoundError
from jianmu.runtime.runner import RunStatus
from tests.support.durable import HERE, Workers, fork_server, wait_for

pytestmark = pytest.mark.timeout(400)


def _suspended(client: Any, run_id: str) -> Any:
    info = client.run_info(run_id)
    return info if info.status == "suspended" else None


def test_approval_from_another_process_after_every_worker_died(
    workers: Workers, client: Any, tmp_path: Path, db_url: str
) -> None:
    out = tmp_path / "deployed.txt"
    first = workers.start("w1")
    run_id = asyncio.run(client.start("confirm", {"path": str(out)}))
    info = wait_for(lambda: _suspended(client, run_id), what="the run to ask for approval")
    assert [r.id for r in info.pending] == ["deploy_1"]
    payload = info.pending[0].payload
    assert payload["tool"] == "deploy" and payload["arguments"] == {"target": "prod"}
    listed = {r.run_id: r for r in client.runs()}
    assert listed[run_id].status == "suspended"
    assert [r.id for r in listed[run_id].pending] == ["deploy_1"]
    assert [r.run_id for r in client.runs(status="suspended")] == [run_id]
    parked = asyncio.run(client.result(run_id, timeout=0.5))
    assert parked.status is RunStatus.SUSPENDED
    assert [r.id for r in parked.pending] == ["deploy_1"]

    Workers.kill(first)  # every worker is gone; the run is parked in the database only
    assert not out.exists()
    assert client.run_info(run_id).status == "suspended"

    # the answer comes from a third process: on SQLite once a new worker has resumed the run
    # (which asks again), on PostgreSQL while no worker is alive (the answer waits for one)
    approve_first = not db_url.startswith("sqlite")
    if not approve_first:
        workers.start("w1")
    # a process of its own (forked pre-imported, as the workers are), importing the app itself
    with open(tmp_path / "approver.log", "w", encoding="utf-8") as log:
        approver = fork_server().spawn([str(HERE / "approver.py"), run_id, "deploy_1"],
                                       env=workers.env("approver"), cwd=os.getcwd(),
                                       stderr=log.fileno())
    assert approver.stdout is not None
    with approver.stdout:
        said = approver.stdout.read()
    assert approver.wait(timeout=120) == 0, (tmp_path / "approver.log").read_text()
    assert said.strip().endswith("approved")
    if approve_first:
        assert not out.exists()
        workers.start("w1")

    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert out.read_text().splitlines() == ["deployed prod"]  # the tool ran exactly once
    state = asyncio.run(client.state(run_id))
    assert state is not None
    assert state["root"]["final_answer"] == "finished: deployed"
    done = client.run_info(run_id)
    assert done.status == "success" and done.pending == ()
    assert [r.run_id for r in client.runs(status="success")] == [run_id]
    assert client.runs(status="suspended") == []


def test_rejection_reaches_the_model_and_the_tool_never_runs(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out = tmp_path / "deployed.txt"
    workers.start("w1")
    run_id = asyncio.run(client.start("confirm", {"path": str(out)}))
    wait_for(lambda: _suspended(client, run_id), what="the run to ask for approval")
    with pytest.raises(RunNotFoundError, match=r"'deploy_9' \(pending: deploy_1\)"):
        asyncio.run(client.approve(run_id, "deploy_9"))
    asyncio.run(client.reject(run_id, "deploy_1", "not on a Friday"))
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert not out.exists()
    state = asyncio.run(client.state(run_id))
    assert state is not None
    answer = state["root"]["final_answer"]
    assert answer.startswith("finished: ") and "not on a Friday" in answer
    assert client.run_info(run_id).status == "success"
