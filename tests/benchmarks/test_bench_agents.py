"""benchmarks/bench_agents.py: its histories and the runs it compares (no timing asserted)."""

from __future__ import annotations

import pytest

from benchmarks import bench_agents
from jianmu.nodes import MessageHistory, trim_history


def test_the_generated_conversation_keeps_every_call_with_its_result() -> None:
    history = bench_agents.conversation(100)
    assert len(history) == 100 and history[0].role == "user"
    calls = {c.id for m in history for c in m.tool_calls}
    results = {m.tool_call_id for m in history if m.role == "tool"}
    assert results <= calls and len(calls - results) <= 1  # only a call cut at the end


def test_both_sizes_trim_to_the_same_window() -> None:
    small = trim_history(max_tokens=bench_agents.BUDGET_TOKENS).trim(
        MessageHistory([], bench_agents.conversation(bench_agents.SMALL)))
    large = trim_history(max_tokens=bench_agents.BUDGET_TOKENS).trim(
        MessageHistory([], bench_agents.conversation(bench_agents.LARGE)))
    assert abs(len(small) - len(large)) <= 3 and len(large) < bench_agents.SMALL


def test_main_prints_both_tables(monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench_agents, "TURNS", 8)
    monkeypatch.setattr(bench_agents, "RUNS", 6)
    monkeypatch.setattr(bench_agents.trim_costs, "__defaults__", (8,))
    monkeypatch.setattr(bench_agents.agent_tool_overhead, "__defaults__", (6,))
    bench_agents.main()
    out = capsys.readouterr().out
    assert "trim_history, 10,000 messages" in out and "target ≤ 1.2×" in out
    assert "added by the call (agent − plain − alone)" in out and "of the 1 ms target" in out
