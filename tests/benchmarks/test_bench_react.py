"""benchmarks/bench_react.py at a tiny size: the script, the end state, the table."""

from __future__ import annotations

import pytest

from benchmarks import bench_react


def test_each_task_is_ten_turns_of_ten_calls() -> None:
    for turns in bench_react.SCRIPTS:
        assert len(turns) == bench_react.TURNS == 10
        assert isinstance(turns[-1], str)
        assert sum(len(t) for t in turns[:-1]) == bench_react.CALLS == 10


@pytest.mark.anyio
async def test_jianmu_leaves_the_shop_as_the_direct_calls_do() -> None:
    _, direct = await bench_react._all_tasks(bench_react.direct_task)
    _, ours = await bench_react._all_tasks(bench_react.jianmu_task)
    _, from_definitions = await bench_react._all_tasks(bench_react.jianmu_openai_task)
    bench_react.reset_db()
    untouched = bench_react.db_hash()
    assert ours == from_definitions == direct != untouched


def test_report_prints_every_row(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench_react, "TASKS", 2)
    monkeypatch.setattr(bench_react, "langgraph_side", lambda: None)
    bench_react.report(rounds=1)
    out = capsys.readouterr().out
    for row in ("time per task", "time per model turn", "LangGraph not installed",
                "overhead per tool call, @tool functions",
                "overhead per tool call, OpenAI definitions"):
        assert row in out
