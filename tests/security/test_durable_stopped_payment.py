"""A durable run taken over while a call that may not run twice was in flight does not run it
again: the call is recorded as maybe done and the model reads that.

Before the fix, a recovered durable run ran every call in flight again (at-least-once): a write
that had taken effect when its worker died, or when the worker's shutdown cut it short, took
effect twice. An idempotent call still runs again (`tests/durable/test_recovery.py`).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support import durable
from tests.support.durable import Workers, wait_for

pytestmark = pytest.mark.timeout(400)

pytest.importorskip("dbos")

db_url, workers, client = durable.db_url, durable.workers, durable.client

TOLD = "may or may not have taken effect"


def _start(client: Any, tmp_path: Path, **inputs: Any) -> tuple[str, Path]:
    out = tmp_path / "lines.txt"
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(tmp_path / "asks.txt"), "hang_at": 3,
        "marker": str(tmp_path / "hung"), "effectful": True, **inputs,
    }))
    wait_for((tmp_path / "hung").exists, what="the third call to start")
    return run_id, out


def _settled_once(client: Any, run_id: str, out: Path) -> None:
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert out.read_text().splitlines() == ["line 1", "line 2", "line 3"]  # none twice
    (third,) = [s for s in client.steps(run_id) if s["name"] == "jianmu:tool:call_3"]
    assert third["output"].maybe_done and not third["output"].ok
    state = asyncio.run(client.state(run_id))
    assert state is not None
    told = [m["content"] for m in state["root"]["messages"] if m["role"] == "tool"]
    assert told[:2] == ["written", "written"] and TOLD in told[2]


def test_a_write_in_flight_when_its_worker_died_is_not_run_again(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    first = workers.start("w1")
    run_id, out = _start(client, tmp_path)
    Workers.kill(first)  # during the third call: it wrote its line, and recorded nothing
    workers.start("w1")
    _settled_once(client, run_id, out)


def test_a_write_a_shutdown_cut_short_is_not_run_again_on_restart(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    a = workers.start("A")
    run_id, out = _start(client, tmp_path, hang_async=True)
    a.send_signal(signal.SIGTERM)
    assert a.wait(timeout=60) == 0
    workers.start("A")
    _settled_once(client, run_id, out)
