"""Red team, a durable run whose helper agent asks a person: the decision must name the
sub-agent's request by its full path, count once, and never be taken for another call (the
same call id in the lead, a replay after the first decision). Both databases.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import AlreadyDecidedError, RunNotFoundError
from tests.support import durable
from tests.support.durable import Workers, wait_for

pytest.importorskip("dbos")
pytestmark = pytest.mark.timeout(400)

db_url = durable.db_url
workers = durable.workers


def test_a_sub_agents_approval_is_its_own_and_counts_once(
    workers: Workers, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "deployed.txt"
    client = durable.engine_client(db_url, tmp_path, monkeypatch)
    try:
        workers.start("w1")
        run_id = asyncio.run(client.start("agents", {"path": str(out)}))

        def suspended() -> Any:
            info = client.run_info(run_id)
            return info if info.status == "suspended" else None

        info = wait_for(suspended, what="the helper to ask for approval")
        [asked] = info.pending
        assert asked.id == "helper/ask_1/deploy_1"
        assert asked.payload["agent_path"] == ["helper"]
        # the bare sub-call id, or the lead's call, is not the request
        for wrong in ("deploy_1", "ask_1", "helper/ask_1", "helper/ask_1/deploy_1/"):
            with pytest.raises(RunNotFoundError):
                asyncio.run(client.approve(run_id, wrong))
        asyncio.run(client.approve(run_id, asked.id, "go"))
        result = asyncio.run(client.result(run_id, timeout=120))
        assert result.ok, result.error
        assert out.read_text().splitlines() == ["deployed prod"]  # once
        with pytest.raises(AlreadyDecidedError):
            asyncio.run(client.reject(run_id, asked.id, "too late"))
        assert out.read_text().splitlines() == ["deployed prod"]
    finally:
        client.shutdown()
