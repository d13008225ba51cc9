"""A decision on an already-decided approval is refused, naming the first (issue 27, item 9).

Approve then reject on the same call of a durable run: both were sent under the same
idempotency key, so the run went on as approved and the person who rejected was told it
worked. Now the first decision is recorded and sent in one transaction, and every later one
(in the same process or another, through Python, the CLI or the studio, even one racing the
first) is refused with an error naming the first decision. The run goes on with the first.
Both databases: the embedded SQLite file and a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import AlreadyDecidedError, InteractionError
from tests.support import durable
from tests.support.durable import HERE, ROOT, Workers, wait_for
from tests.support.forked_cli import DURABLE, run_jianmu

pytest.importorskip("dbos")
pytestmark = pytest.mark.timeout(400)

db_url = durable.db_url
workers = durable.workers
APP = f"{HERE / 'durable_app.py'}:engine"
TOKEN = "decisions-token"


def parked(workers: Workers, client: Any, out: Path) -> str:
    """A run of ``confirm`` waiting for approval of ``deploy_1``."""
    workers.start("w1")
    run_id = asyncio.run(client.start("confirm", {"path": str(out)}))

    def suspended() -> Any:
        info = client.run_info(run_id)
        return info if info.status == "suspended" else None

    wait_for(suspended, what="the run to ask for approval")
    return run_id


def cli(workers: Workers, *args: str) -> subprocess.CompletedProcess[str]:
    env = workers.env("cli", COLUMNS="200", NO_COLOR="1")
    env.pop("JIANMU_TEST_WORKER")
    return run_jianmu([*args, "--app", APP], cwd=ROOT, env=env, timeout=120, preload=DURABLE)


def test_approve_then_reject_keeps_the_approval_and_refuses_the_rejection(
    workers: Workers, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = durable.engine_client(db_url, tmp_path, monkeypatch)
    out = tmp_path / "deployed.txt"
    try:
        run_id = parked(workers, client, out)
        approved = cli(workers, "runs", "approve", run_id, "deploy_1", "-m", "ship it")
        assert approved.returncode == 0, approved.stderr
        # from the CLI: exit 1, one line naming the first decision
        rejected = cli(workers, "runs", "reject", run_id, "deploy_1", "--reason", "no")
        assert rejected.returncode == 1, rejected.stdout + rejected.stderr
        assert "Traceback" not in rejected.stderr
        assert re.search(r"jianmu: error: request 'deploy_1' of run '\w+' was already "
                         r"approved at [\d-]+ [\d:]+ \('ship it'\); the first decision "
                         r"stands", rejected.stderr), rejected.stderr
        # from Python, in this process: the same refusal, as an exception carrying it
        with pytest.raises(AlreadyDecidedError, match="already approved") as caught:
            asyncio.run(client.reject(run_id, "deploy_1", "too late"))
        assert caught.value.approved is True and caught.value.first_message == "ship it"
        assert isinstance(caught.value, InteractionError)
        with pytest.raises(AlreadyDecidedError, match="already approved"):
            asyncio.run(client.approve(run_id, "deploy_1"))  # a second approval, too
        result = asyncio.run(client.result(run_id, timeout=120))
        assert result.ok, result.error
        assert out.read_text().splitlines() == ["deployed prod"]  # the approval stood, once
        state = asyncio.run(client.state(run_id))
        assert state is not None and state["root"]["final_answer"] == "finished: deployed"
        recorded = client.decision(run_id, "deploy_1")
        assert recorded.approved is True and recorded.message == "ship it"
        # still refused once the run has gone on and waits for nothing
        with pytest.raises(AlreadyDecidedError, match="already approved"):
            asyncio.run(client.reject(run_id, "deploy_1"))
    finally:
        client.shutdown()


def test_two_racing_decisions_one_stands(
    workers: Workers, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clients = [durable.engine_client(db_url, tmp_path, monkeypatch) for _ in range(2)]
    out = tmp_path / "deployed.txt"
    try:
        run_id = parked(workers, clients[0], out)
        for c in clients:  # both connected, so that the two decisions really race
            c.run_info(run_id)

        async def both() -> list[Any]:
            return await asyncio.gather(
                clients[0].approve(run_id, "deploy_1", "yes"),
                clients[1].reject(run_id, "deploy_1", "no"),
                return_exceptions=True,
            )

        outcomes = asyncio.run(both())
        refused = [o for o in outcomes if isinstance(o, AlreadyDecidedError)]
        assert len(refused) == 1 and outcomes.count(None) == 1, outcomes
        first = clients[0].decision(run_id, "deploy_1")
        assert refused[0].approved is first.approved  # the refusal names the winner
        result = asyncio.run(clients[0].result(run_id, timeout=120))
        assert result.ok, result.error
        assert out.exists() is first.approved  # the run went on with the winner
    finally:
        for c in clients:
            c.shutdown()


def test_the_studio_says_which_decision_came_first(
    workers: Workers, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("the studio path is the same on both databases")
    from starlette.testclient import TestClient

    from jianmu.studio import DurableRuns, create_app
    from jianmu.studio.runs import Journal

    client = durable.engine_client(db_url, tmp_path, monkeypatch)
    try:
        run_id = parked(workers, client, tmp_path / "deployed.txt")
        asyncio.run(client.reject(run_id, "deploy_1", "not on a Friday"))
        source = DurableRuns(client, Journal(str(tmp_path / "journal.sqlite")))
        with TestClient(create_app([source], TOKEN, by="tester"),
                        base_url="http://127.0.0.1", follow_redirects=False) as http:
            http.get(f"/?token={TOKEN}")
            page = http.get(f"/run/durable/{run_id}").text
            csrf = re.search(r'<meta name="csrf" content="([^"]+)">', page)
            assert csrf
            answer = http.post(f"/run/durable/{run_id}/approve", json={"call_id": "deploy_1"},
                               headers={"X-CSRF-Token": csrf.group(1)})
        assert answer.status_code == 409
        error = answer.json()["error"]
        assert "was already rejected" in error and "not on a Friday" in error, error
        result = asyncio.run(client.result(run_id, timeout=120))
        assert result.ok and not (tmp_path / "deployed.txt").exists()
    finally:
        client.shutdown()
