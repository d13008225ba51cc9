"""Many runs on one queue, two workers on PostgreSQL: every run once, both workers busy."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.durable import Workers, wait_for

pytestmark = pytest.mark.timeout(400)

RUNS = 200


@pytest.fixture
def db_url(postgres_url: str) -> str:
    """Many workers on one queue is what PostgreSQL is for."""
    return postgres_url


async def _start_all(client: Any, out: Path) -> list[str]:
    ids = [f"run{i:03d}" for i in range(RUNS)]
    started = await asyncio.gather(*(
        client.start("quick", {"path": str(out), "run": run_id, "slow": 0.02}, run_id=run_id)
        for run_id in ids
    ))
    assert started == ids
    return ids


def test_two_workers_share_two_hundred_runs(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out = tmp_path / "ran.txt"
    # a few runs at a time per worker: neither can drain the queue alone before the other polls
    for name in ("w1", "w2"):
        workers.start(name, JIANMU_TEST_CONCURRENCY="4")
    ids = asyncio.run(_start_all(client, out))

    def lines() -> list[str]:
        return out.read_text().splitlines() if out.exists() else []

    wait_for(lambda: len(lines()) >= RUNS, timeout=300, what=f"{RUNS} runs to record themselves")
    done = wait_for(lambda: (s := client.runs(status="success")) and len(s) == RUNS and s,
                    timeout=120, what="every run to succeed")
    assert sorted(r.run_id for r in done) == ids
    assert client.runs(status="failure") == []

    recorded = [line.split() for line in lines()]
    per_run = Counter(run for run, _worker in recorded)
    assert sorted(per_run) == ids and set(per_run.values()) == {1}  # none ran twice
    per_worker = Counter(worker for _run, worker in recorded)
    assert set(per_worker) == {"w1", "w2"}, per_worker  # both took some
    assert {r.worker for r in done} == {"w1", "w2"}
