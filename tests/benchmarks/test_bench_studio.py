"""benchmarks/bench_studio.py at a tiny size: the tree, the recorded run, the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_studio
from jianmu.runtime import SQLiteCheckpointer


def test_the_big_tree_has_the_nodes_asked_for() -> None:
    for nodes in (2, 11, 30, 200):
        assert len(list(bench_studio.big_tree(5, nodes).iterate())) == nodes


def test_a_recorded_run_has_a_point_per_tick(tmp_path: Path) -> None:
    run_id, _ = bench_studio.run_big(tmp_path / "runs.sqlite", ticks=12, nodes=20)
    with SQLiteCheckpointer(tmp_path / "runs.sqlite") as store:
        assert len(store.history.points(run_id)) == 13  # the start, then each tick


def test_report_prints_every_row(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setattr(bench_studio, "TICKS", 20)
    monkeypatch.setattr(bench_studio, "NODES", 30)
    monkeypatch.chdir(tmp_path)
    bench_studio.main()
    out = capsys.readouterr().out
    for row in ("run, 20 ticks, 30 nodes", "recording, per tick", "storage per tick",
                "run page, 20 ticks, 30 nodes", "point 10 of 20"):
        assert row in out
