"""A checkpoint file shared by the runs of a long-lived service: what it keeps, and how the
service bounds it (`SQLiteCheckpointer.prune`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jianmu import Agent, ScriptedLLM, SQLiteCheckpointer, tool

TABLES = ("checkpoints", "jianmu_points", "jianmu_events", "jianmu_runs", "jianmu_leases")


@tool(read_only=False, confirm=True)
def save(text: str) -> str:
    """Save a note (a person approves first).

    Args:
        text: the note.
    """
    return "saved"


def _agent(store: SQLiteCheckpointer, *script: object) -> Agent:
    return Agent(ScriptedLLM(list(script)), tools=[save], checkpointer=store)


def _runs_in(path: Path) -> dict[str, set[str]]:
    with sqlite3.connect(path) as db:
        return {t: {r[0] for r in db.execute(f"SELECT run_id FROM {t}")} for t in TABLES}


def test_prune_forgets_finished_runs_and_keeps_those_that_can_go_on(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with SQLiteCheckpointer(path) as store:
        finished = [_agent(store, "done").run_sync("hi") for _ in range(20)]
        assert all(r.ok for r in finished)
        waiting = _agent(store, [{"name": "save", "arguments": {"text": "a"}}]).run_sync("hi")
        assert waiting.status.value == "suspended"
        assert store.prune(3600) == []  # none ended an hour ago
        gone = store.prune(0)
        assert sorted(gone) == sorted(r.run_id for r in finished)
        kept = store.list_runs()
    assert [run_id for run_id, *_ in kept] == [waiting.run_id]
    assert all(ids <= {waiting.run_id} for ids in _runs_in(path).values())


def test_prune_keeps_a_run_someone_holds(tmp_path: Path) -> None:
    with SQLiteCheckpointer(tmp_path / "runs.sqlite") as store:
        result = _agent(store, "done").run_sync("hi")
        store.claim(result.run_id, "someone")
        assert store.prune(0) == []
        store.release(result.run_id, "someone")
        assert store.prune(0) == [result.run_id]
        with pytest.raises(ValueError, match="older_than"):
            store.prune(-1)


def test_the_history_keeps_few_frames_however_many_runs_are_read(tmp_path: Path) -> None:
    # a studio open for days reads the runs of the file one after another: each run's last
    # frame read was kept for good
    with SQLiteCheckpointer(tmp_path / "runs.sqlite") as store:
        ids = [_agent(store, "done").run_sync("hi").run_id for _ in range(80)]
        for run_id in ids:
            assert store.history.frame(run_id, 0).number == 0
        assert len(store.history._frames) <= 64
        assert store.history.frame(ids[-1], 0).number == 0


@tool
def look(n: int) -> str:
    """Look at one thing.

    Args:
        n: which.
    """
    return "seen " + "x" * 200


def _long_run(store: SQLiteCheckpointer, rounds: int) -> str:
    calls = [[{"name": "look", "arguments": {"n": n}}] for n in range(rounds)]
    result = Agent(ScriptedLLM([*calls, "done"]), tools=[look], checkpointer=store,
                   max_iterations=rounds + 5).run_sync("look")
    assert result.ok, result.error
    return result.run_id


def test_a_long_run_keeps_its_first_and_newest_checkpoint_beside_its_points(
        tmp_path: Path) -> None:
    """Each call's checkpoint is a whole state: kept all, a run of n calls wrote n states, the
    file growing with the square of its length. Its points hold its history; of its
    checkpoints its first (its start) and its newest are kept."""
    path = tmp_path / "runs.sqlite"
    with SQLiteCheckpointer(path) as store:
        run_id = _long_run(store, 30)
        assert store.load(run_id)["status"] == "success"
        points = store.history.points(run_id)
        assert len(points) > 30  # the history is whole
        assert store.history.frame(run_id, points[-1].number).state["root"]["final_answer"] == (
            "done")
    with sqlite3.connect(path) as db:
        seqs = [r[0] for r in db.execute(
            "SELECT seq FROM checkpoints WHERE run_id = ? ORDER BY seq", (run_id,))]
    assert seqs[0] == 1 and len(seqs) == 2 and seqs[-1] > 30


def test_without_recorded_ticks_every_checkpoint_is_the_history(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with SQLiteCheckpointer(path, record_ticks=False) as store:
        run_id = _long_run(store, 5)
    with sqlite3.connect(path) as db:
        (count,) = db.execute("SELECT COUNT(*) FROM checkpoints WHERE run_id = ?",
                              (run_id,)).fetchone()
    assert count > 5
