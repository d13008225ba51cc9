"""Tool calls that ran in parallel recover by key: the finished ones are never repeated."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.durable import Workers, wait_for

pytestmark = pytest.mark.timeout(400)

def _recorded(client: Any, run_id: str) -> set[str]:
    return {s["function_name"] for s in client.client.list_workflow_steps(run_id)}

@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_parallel_calls_replay_by_key_after_sigkill(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out, asks, marker = tmp_path / "lines.txt", tmp_path / "asks.txt", tmp_path / "hung"

    first = workers.start("w1")
    # the FIRST call hangs: only parallel execution lets calls 2 and 3 finish meanwhile
    run_id = asyncio.run(client.start("parallel", {
        "path": str(out), "asks": str(asks), "hang_at": 1, "marker": str(marker),
    }))
    wait_for(marker.exists, what="the first call to start")
    wait_for(lambda: {"jianmu:tool:call_2", "jianmu:tool:call_3"} <= _recorded(client, run_id),
             what="calls 2 and 3 to be recorded while call 1 hangs")
    Workers.kill(first)
    assert Counter(out.read_text().splitlines()) == {"line 1": 1, "line 2": 1, "line 3": 1}

    workers.start("w1")
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    # calls 2 and 3 finished before the kill: replayed, whatever order they fall in now;
    # call 1 was in flight: it ran again
    assert Counter(out.read_text().splitlines()) == {"line 1": 2, "line 2": 1, "line 3": 1}
    assert asks.read_text().splitlines() == ["turn 0", "turn 1"]
    state = asyncio.run(client.state(run_id))
    assert state is not None
    assert state["root"]["final_answer"] == "three lines written"
    observations = [m for m in state["root"]["messages"] if m.get("role") == "tool"]
    assert len(observations) == 3
