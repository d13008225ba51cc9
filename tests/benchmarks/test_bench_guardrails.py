"""benchmarks/bench_guardrails.py: both sides give the same answer (no timing asserted)."""

from __future__ import annotations

import asyncio

from benchmarks import bench_guardrails


def test_the_guarded_run_answers_as_the_plain_one() -> None:
    costs = asyncio.run(bench_guardrails.guardrail_costs(runs=5))
    assert set(costs) == {"plain", "guarded"}
    assert all(v > 0 for v in costs.values())
