"""benchmarks/bench_stream.py: both sides of each pair give the same answer (no timing asserted)."""

from __future__ import annotations

import asyncio

from benchmarks import bench_stream


def test_the_streamed_and_the_agent_runs_answer_as_the_plain_one() -> None:
    streamed = asyncio.run(bench_stream.stream_costs(runs=5))
    agent = asyncio.run(bench_stream.agent_costs(runs=5))
    assert set(streamed) == {"plain", "streamed", "plainest"} and set(agent) == {"by_hand", "agent"}
    assert all(v > 0 for v in (*streamed.values(), *agent.values()))
