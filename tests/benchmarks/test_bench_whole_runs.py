"""benchmarks/bench_whole_runs.py at a tiny size: the workloads, the same work on every side,
the table."""

from __future__ import annotations

import pytest

from benchmarks import bench_whole_runs


def test_the_bfcl_tasks_are_one_turn_of_one_to_four_calls_to_fresh_tools() -> None:
    first, second = bench_whole_runs.bfcl_tasks(8, tag=1), bench_whole_runs.bfcl_tasks(8, tag=2)
    assert [t.calls for t in first] == [1, 3, 1, 2, 1, 4, 1, 3]
    assert all(len(t.turns) == 1 for t in first)
    assert {bool(t.definitions) for t in first} == {True, False}
    for a, b in zip(first, second, strict=True):  # the same calls, to new tools
        assert [args for _, args in a.turns[0]] == [args for _, args in b.turns[0]]
        assert not set(a.functions) & set(b.functions)


@pytest.mark.anyio
@pytest.mark.parametrize("group", list(bench_whole_runs.GROUPS))
async def test_every_side_does_the_work_of_the_direct_calls(
    group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_whole_runs, "BFCL_TASKS", 6)
    workload, pick = bench_whole_runs.GROUPS[group]
    _, _, expected, direct = await bench_whole_runs._all(bench_whole_runs.direct, workload, pick)
    assert direct
    for side in (bench_whole_runs.threaded, bench_whole_runs.jianmu):
        _, _, digest, outputs = await bench_whole_runs._all(side, workload, pick)
        assert (digest, outputs) == (expected, direct)


def test_report_prints_every_row(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench_whole_runs, "BFCL_TASKS", 4)
    monkeypatch.setattr(bench_whole_runs, "langgraph_side", lambda: None)
    bench_whole_runs.report(rounds=1)
    out = capsys.readouterr().out
    for group in bench_whole_runs.GROUPS:
        for row in ("per call above direct", "of which the thread floor",
                    "CPU per call above direct"):
            assert f"{group}: {row}" in out or f"{group}:  {row}" in out
