"""A worker killed with SIGKILL loses nothing finished: each tool call runs exactly once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jianmu.runtime import RunStatus
from tests.support.durable import Workers, wait_for

pytestmark = pytest.mark.timeout(400)


def test_kill_after_second_tool_call_resumes_without_repeating(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out, asks, marker = tmp_path / "lines.txt", tmp_path / "asks.txt", tmp_path / "hung"
    first = workers.start("w1")
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(asks), "hang_at": 3, "marker": str(marker),
    }))
    wait_for(marker.exists, what="the third tool call to start")
    Workers.kill(first)  # during the third call: lines 1 and 2 have finished, 3 is in flight
    assert out.read_text().splitlines() == ["line 1", "line 2", "line 3"]

    # the same worker id comes back: DBOS hands it its own pending run at once
    workers.start("w1")
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    lines = out.read_text().splitlines()
    # lines 1 and 2 finished before the kill: replayed, never written again; line 3 was in
    # flight, so it ran again (at-least-once, and the ToolResult says so)
    assert lines == ["line 1", "line 2", "line 3", "line 3"]
    # the model answered its first turn before the kill: it was not asked that turn again
    assert asks.read_text().splitlines() == ["turn 0", "turn 1"]
    state = asyncio.run(client.state(run_id))
    assert state is not None
    assert state["root"]["final_answer"] == "three lines written"


def test_kill_between_turns_repeats_nothing(workers: Workers, client: Any,
                                            tmp_path: Path) -> None:
    out, asks = tmp_path / "lines.txt", tmp_path / "asks.txt"
    marker = tmp_path / "hung"
    first = workers.start("w1")
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(asks), "hang_at": 2, "marker": str(marker),
    }))
    wait_for(marker.exists, what="the second tool call to start")
    Workers.kill(first)
    workers.start("w1")
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert out.read_text().splitlines() == ["line 1", "line 2", "line 2", "line 3"]
    assert asks.read_text().splitlines() == ["turn 0", "turn 1"]


def test_kill_while_an_answer_is_continued_loses_and_repeats_no_text(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    """The answer's first part is a recorded step: the recovered run replays it and asks only
    the continuation, so the answer holds each part once."""
    asks, marker = tmp_path / "asks.txt", tmp_path / "hung"
    first = workers.start("w1")
    run_id = asyncio.run(client.start("cut_off", {
        "path": str(tmp_path / "unused"), "asks": str(asks), "marker": str(marker)}))
    wait_for(marker.exists, what="the continuation to be asked")
    Workers.kill(first)
    workers.start("w1")
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert asks.read_text().splitlines() == ["answer", "continue", "continue"]
    state = asyncio.run(client.state(run_id))
    assert state is not None
    assert state["root"]["final_answer"] == "It is sunny in Oslo."
    assert [m["content"] for m in state["root"]["messages"] if m["role"] == "assistant"] == [
        "It is sunny in Oslo."]


def test_a_tree_changed_before_recovery_fails_the_run_instead_of_running_it_again(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    """A worker deployed with the tree changed (its agent renamed) finds none of the run's
    recorded model turns under the new paths: replaying would ask the model again, and a real
    model's new call ids would run every finished call a second time. The run fails instead,
    naming the change, and nothing runs again."""
    out, asks, marker = tmp_path / "lines.txt", tmp_path / "asks.txt", tmp_path / "hung"
    first = workers.start("w1")
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(asks), "hang_at": 2, "marker": str(marker),
    }))
    wait_for(marker.exists, what="the second tool call to start")
    Workers.kill(first)

    workers.start("w1", JIANMU_TEST_AGENT="Writer")
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.status is RunStatus.FAILURE
    assert result.error is not None and "TreeMismatchError" in result.error
    assert "'lines'" in result.error and "Writer" in result.error, result.error
    assert asks.read_text().splitlines() == ["turn 0"]  # the model was not asked again
    assert out.read_text().splitlines() == ["line 1", "line 2"]  # nor anything run again
