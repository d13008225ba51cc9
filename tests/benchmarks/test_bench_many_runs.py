"""benchmarks/bench_many_runs.py at a tiny size: the script, the parked runs, the table."""

from __future__ import annotations

import pytest

from benchmarks import bench_many_runs
from jianmu.runtime import RunStatus


@pytest.mark.anyio
async def test_each_run_takes_three_model_turns_and_four_tool_calls() -> None:
    llm = bench_many_runs.FakeModel(latency=0)
    runner = bench_many_runs.jianmu_runner(llm, [bench_many_runs.make_tool(i, 0) for i in (0, 1)])
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    roles = [m.role for m in runner.state.get("messages")]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "tool", "assistant"]
    assert runner.state.get("final_answer") == "done"


@pytest.mark.anyio
async def test_a_parked_run_waits_on_an_approval() -> None:
    llm = bench_many_runs.FakeModel(latency=0, tool_name="pay")
    runner = bench_many_runs.jianmu_runner(llm, [bench_many_runs.pay])
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUSPENDED and len(result.pending) == 2


def test_report_prints_every_row(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench_many_runs, "MODEL_LATENCY", 0.001)
    monkeypatch.setattr(bench_many_runs, "TOOL_LATENCY", 0.0)
    monkeypatch.setattr(bench_many_runs, "langgraph_factory", lambda: None)
    bench_many_runs.report(n=3, rounds=1)
    out = capsys.readouterr().out
    for row in ("3 runs, wall", "3 runs, floor", "CPU per run", "LangGraph not installed",
                "memory per idle run", "memory per active run"):
        assert row in out
