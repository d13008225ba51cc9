"""A worker that never comes back: a live worker takes its runs over, or is told to."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.durable import Workers, wait_for

pytestmark = pytest.mark.timeout(400)


def _hang_on_a(workers: Workers, client: Any, tmp_path: Path, takeover: str) -> tuple[str, Path]:
    """Worker A takes a `lines` run that hangs in its third call; worker B starts; A dies."""
    out, marker = tmp_path / "lines.txt", tmp_path / "hung"
    a = workers.start("A", JIANMU_TEST_TAKEOVER=takeover)
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(tmp_path / "asks.txt"), "hang_at": 3,
        "marker": str(marker),
    }))
    wait_for(marker.exists, what="worker A to reach the third call")
    assert client.run_info(run_id).worker == "A"
    workers.start("B", JIANMU_TEST_TAKEOVER=takeover)
    Workers.kill(a)  # for good: no worker "A" ever starts again
    return run_id, out


def _finished_on_b(client: Any, run_id: str, out: Path) -> None:
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert client.run_info(run_id).worker == "B"
    # finished lines are written once; the one in flight when A died ran again on B
    assert Counter(out.read_text().splitlines()) == {"line 1": 1, "line 2": 1, "line 3": 2}


def test_a_live_worker_takes_over_a_silent_one(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    run_id, out = _hang_on_a(workers, client, tmp_path, takeover="2")
    # nobody calls recover: B notices A's heartbeat stopped and claims A's runs
    _finished_on_b(client, run_id, out)
    assert "A" not in {w["executor_id"] for w in client.workers()}


def test_recover_hands_a_dead_workers_runs_over_at_once(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    # takeover after 10 minutes: only the explicit recover can move the run within the test
    run_id, out = _hang_on_a(workers, client, tmp_path, takeover="600")
    assert client.run_info(run_id).status == "running"
    assert client.recover("A") == [run_id]
    _finished_on_b(client, run_id, out)
    assert client.recover("A") == []  # nothing left to hand over


def test_a_worker_stopped_by_sigterm_hands_its_runs_over_at_once(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out, marker = tmp_path / "lines.txt", tmp_path / "hung"
    # no --id: a fresh id each start, so no restart of this worker ever resumes its runs; and
    # takeover after 10 minutes: only its own shutdown can move the run within the test
    a = workers.start("A", JIANMU_TEST_WORKER="", JIANMU_TEST_TAKEOVER="600")
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(tmp_path / "asks.txt"), "hang_at": 3,
        "marker": str(marker), "hang_async": True,  # the shutdown's cancel reaches the call
    }))
    wait_for(marker.exists, what="worker A to reach the third call")
    gone = client.run_info(run_id).worker
    workers.start("B", JIANMU_TEST_TAKEOVER="600")
    a.send_signal(signal.SIGTERM)
    assert a.wait(timeout=60) == 0
    result = asyncio.run(client.result(run_id, timeout=60))
    assert result.ok, result.error
    assert client.run_info(run_id).worker == "B"
    # the call the shutdown cut short ran again on B; its cancel was recorded as no outcome
    assert Counter(out.read_text().splitlines()) == {"line 1": 1, "line 2": 1, "line 3": 2}
    (third,) = [s for s in client.steps(run_id) if s["name"] == "jianmu:tool:call_3"]
    assert third["output"].ok, third["output"].error
    assert gone not in {w["executor_id"] for w in client.workers()}


def test_a_call_cut_short_by_a_shutdown_runs_again_on_restart(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out, marker = tmp_path / "lines.txt", tmp_path / "hung"
    a = workers.start("A")  # a stable id: its runs wait for its restart
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(tmp_path / "asks.txt"), "hang_at": 3,
        "marker": str(marker), "hang_async": True,  # the shutdown's cancel reaches the call
    }))
    wait_for(marker.exists, what="worker A to reach the third call")
    a.send_signal(signal.SIGTERM)
    assert a.wait(timeout=60) == 0
    workers.start("A")
    result = asyncio.run(client.result(run_id, timeout=60))
    assert result.ok, result.error
    # the cancel was no outcome of the call (no "the tool cancelled the task it ran in"): the
    # restarted worker ran it again, as a call in flight when a worker dies
    (third,) = [s for s in client.steps(run_id) if s["name"] == "jianmu:tool:call_3"]
    assert third["output"].ok, third["output"].error
    assert Counter(out.read_text().splitlines()) == {"line 1": 1, "line 2": 1, "line 3": 2}
