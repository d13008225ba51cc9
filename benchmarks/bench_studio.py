"""Time travel's costs: what recording each tick adds to a run (time and bytes), and how long
the studio's server takes to build the page of a long run on a big tree.

A run of `big_tree` ticks 1,000 times on a 200-node tree, writing two state keys each tick
(a counter, and a line appended to a list, as an agent appends messages). It runs with a
`SQLiteCheckpointer` that records ticks and with one that does not; the difference is the
recording's cost per tick, and the rows it wrote are its storage per tick, set beside what a
checkpoint of the same run at every tick would store. The run page's server time is building
the page and its data (what ``GET /run/cp/RUN`` and the first event of its stream send):
`CheckpointRuns.view` and `run_page`, over the run's 1,000 points.
"""

from __future__ import annotations

import json
import operator
import os
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import py_trees
from py_trees.common import Status
from pydantic import BaseModel, Field

from benchmarks._util import best_of, table, verdict
from jianmu.config import AppConfig
from jianmu.runtime import ReactiveRunner, RuntimeNode, SQLiteCheckpointer
from jianmu.state import StateManager

TICKS = 1000
NODES = 200
TARGET_PAGE_S = 1.0
TARGET_STORAGE_RATIO = 0.1
NO_WAIT = AppConfig.model_validate({"runtime": {"poll_interval": 1e-6}})
"""`Count` moves on with no status to show it: the runner, which polls such a tree at rest,
polls it at once (each tick is what is measured, not the wait between two)."""


class Counted(BaseModel):
    """The benchmark run's state: a counter and a log that grows (as messages do)."""

    count: int = 0
    log: Annotated[list[str], operator.add] = Field(default_factory=list)


class Count(RuntimeNode, py_trees.behaviour.Behaviour):
    """Writes ``count`` and a line of ``log`` on every tick, ``ticks`` times."""

    def __init__(self, ticks: int) -> None:
        super().__init__("count")
        self.ticks = ticks
        self.left = ticks

    def initialise(self) -> None:
        self.left = self.ticks

    def update(self) -> Status:
        self.left -= 1
        done = self.ticks - self.left
        self.state.update({"count": done, "log": [f"tick {done}: the counter moved on"]})
        return Status.SUCCESS if self.left <= 0 else Status.RUNNING


def big_tree(ticks: int, nodes: int) -> py_trees.behaviour.Behaviour:
    """A tree of ``nodes`` nodes (stages of nine steps) whose last leaf ticks ``ticks`` times."""
    children: list[Any] = []
    made, group = 2, 0  # the root and the counter
    while made < nodes:
        size = min(9, nodes - made - 1)
        if size <= 0:
            children.append(py_trees.behaviours.Success(f"step {group}"))
            made += 1
        else:
            children.append(py_trees.composites.Sequence(
                f"stage {group}", memory=True,
                children=[py_trees.behaviours.Success(f"step {group}.{i}") for i in range(size)]))
            made += size + 1
        group += 1
    children.append(Count(ticks))
    return py_trees.composites.Sequence("big", memory=True, children=children)


def run_big(path: Path, *, record: bool = True, ticks: int | None = None,
            nodes: int | None = None) -> tuple[str, float]:
    """Run `big_tree` to its end, checkpointed in ``path``; its id and wall time."""
    ticks = TICKS if ticks is None else ticks
    nodes = NODES if nodes is None else nodes
    with SQLiteCheckpointer(path, record_ticks=record) as store:
        runner = ReactiveRunner(big_tree(ticks, nodes), StateManager(Counted),
                                checkpointer=store, config=NO_WAIT)
        start = time.perf_counter()
        result = runner.run_sync()
        took = time.perf_counter() - start
        assert result.ok and runner.ticks == ticks, result
    return runner.run_id, took


def stored_bytes(path: Path, run_id: str) -> tuple[int, int, int]:
    """The bytes of ``run_id``'s points and events, its number of points, and the bytes of
    its last checkpoint."""
    with SQLiteCheckpointer(path) as store, store._lock:
        points = store._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM jianmu_points WHERE run_id = ?",
            (run_id,)).fetchone()
        events = store._db.execute(
            "SELECT COALESCE(SUM(LENGTH(fields) + LENGTH(name) + 24), 0) FROM jianmu_events"
            " WHERE run_id = ?", (run_id,)).fetchone()
        last = store._db.execute("SELECT LENGTH(data) FROM checkpoints WHERE run_id = ? ORDER BY"
                                 " seq DESC LIMIT 1", (run_id,)).fetchone()
    return int(points[1] + events[0]), int(points[0]), int(last[0])


def page_seconds(path: Path, run_id: str) -> float:
    """The server's time to build the run page and its first data, best of a few."""
    from jianmu.studio.pages import run_page
    from jianmu.studio.runs import CheckpointRuns, Journal

    def build() -> None:
        runs = CheckpointRuns(str(path), Journal(str(path)))  # a fresh studio: nothing cached
        try:
            view = runs.view(run_id)
            assert len(view["points"]) > TICKS // 2 and len(view["nodes"]) == NODES
            run_page(view, "csrf")
            json.dumps(view, ensure_ascii=False, default=str)
        finally:
            runs.close()

    return best_of(build, repeat=5)


def point_seconds(path: Path, run_id: str) -> float:
    """The server's time to show the middle point, from a fresh studio (replayed from 0)."""
    from jianmu.studio.runs import CheckpointRuns, Journal

    def show() -> None:
        runs = CheckpointRuns(str(path), Journal(str(path)))
        try:
            runs.point(run_id, TICKS // 2)
        finally:
            runs.close()

    return best_of(show, repeat=5)


def main() -> None:
    """Print recording's cost per tick and the run page's server time."""
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        path = Path(folder) / "runs.sqlite"
        plain = min(run_big(Path(folder) / f"plain{i}.sqlite", record=False)[1]
                    for i in range(3))
        recorded_runs = [run_big(Path(folder) / f"rec{i}.sqlite") for i in range(3)]
        recorded = min(t for _, t in recorded_runs)
        run_id, _ = run_big(path)
        size, points, checkpoint = stored_bytes(path, run_id)
        page = page_seconds(path, run_id)
        point = point_seconds(path, run_id)
    per_tick = (recorded - plain) / TICKS
    # a checkpoint at every tick would store the whole state each time: on average half of
    # the last one, as the log grows linearly
    every = checkpoint / 2
    rows = [
        (f"run, {TICKS} ticks, {NODES} nodes", f"not recorded {plain * 1e6 / TICKS:.0f} µs/tick",
         f"recorded {recorded * 1e6 / TICKS:.0f} µs/tick", f"{recorded / plain:.2f}x",
         "reported", ""),
        ("recording, per tick", "", f"{per_tick * 1e6:.0f} µs", f"{points} points", "reported",
         ""),
        ("storage per tick", f"checkpoint {every:.0f} bytes", f"point {size / points:.0f} bytes",
         f"{size / points / every:.3f}x", f"<= {TARGET_STORAGE_RATIO}x",
         verdict(size / points / every <= TARGET_STORAGE_RATIO)),
        (f"run page, {TICKS} ticks, {NODES} nodes", "", f"server {page * 1000:.0f} ms",
         f"{page:.3f} s", f"< {TARGET_PAGE_S:.0f} s", verdict(page < TARGET_PAGE_S)),
        (f"point {TICKS // 2} of {TICKS}", "", f"server {point * 1000:.0f} ms", "", "reported",
         ""),
    ]
    table(rows, ("measure", "baseline", "jianmu", "ratio", "target", ""))


if __name__ == "__main__":
    main()
