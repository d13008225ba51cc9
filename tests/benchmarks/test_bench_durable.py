"""benchmarks/bench_durable.py: its trees, and the whole bench at tiny sizes (no timing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks._durable_app import CALLS, build_park, build_react
from jianmu import ReactiveRunner
from jianmu.runtime import RunStatus
from tests.support.postgres import PostgresCluster, postgres_problem

pytestmark = pytest.mark.timeout(400)
ROOT = Path(__file__).resolve().parent.parent.parent


def _roles(state: Any) -> list[str]:
    return [m["role"] if isinstance(m, dict) else m.role for m in state.get("messages")]


@pytest.mark.anyio
async def test_the_react_tree_makes_three_tool_calls_then_answers() -> None:
    root, state = build_react({"model_ms": 1, "tool_ms": 1})
    result = await ReactiveRunner(root, state).run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    assert _roles(state) == ["user", "assistant", *["tool"] * CALLS, "assistant"]


@pytest.mark.anyio
async def test_the_park_tree_waits_for_a_person() -> None:
    root, state = build_park({})
    result = await ReactiveRunner(root, state).run(timeout=30)
    assert result.status is RunStatus.SUSPENDED
    assert [r.id for r in result.pending] == ["deploy_1"]


# the figures are not checked, only that each part runs and prints: so no simulated latency
# to wait through (1 ms, not 0, keeps the models' and tools' sleeps on the path), and no pause
# for the parked runs to settle before memory is read
_TINY = """
from benchmarks import bench_durable as b
b.OVERHEAD_RUNS, b.THROUGHPUT_RUNS, b.WORKER_COUNTS = 1, 6, (1, 2)
b.PARKED_RUNS, b.PEER_RUNS = 5, 1
b.MODEL_MS, b.TOOL_MS, b.SETTLE_S = 1.0, 1.0, 0.0
b.main()
"""


def test_the_whole_bench_runs_at_tiny_sizes(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    pytest.importorskip("dbos")
    # its own process: the bench launches DBOS, which is one per process
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    cluster: PostgresCluster | None = None
    if postgres_problem() is None:  # the session's server, not a cluster of the bench's own
        cluster = request.getfixturevalue("postgres_cluster")
        env["JIANMU_BENCH_POSTGRES"] = cluster.admin_url
    done = subprocess.run([sys.executable, "-c", _TINY], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=360, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "1. durable run vs plain ReactiveRunner run" in out
    assert "SQLite, in this worker (engine.run)" in out
    assert "3. 5 runs parked on approvals" in out and "KB per run" in out
    assert "4. per-run overhead of durability" in out
    if "PostgreSQL parts skipped" not in out:
        assert "PostgreSQL, queued, poll 0.05 s" in out
        assert "2 worker(s)" in out and "runs/s" in out
    if cluster is not None:  # the bench dropped the databases it made on the session's server
        import psycopg

        with psycopg.connect(cluster.admin_url) as conn:
            names = [r[0] for r in conn.execute("SELECT datname FROM pg_database")]
        assert not [n for n in names if n.startswith("bench_")], names
