"""Content guardrails: what one input and one output guardrail add to a run.

A 3-turn ReAct run (two tool-call turns, then an answer) with one input guardrail and one
output guardrail, each an async no-op (it returns ``None``), against the same run without
them. The input guardrail runs as a task beside the first model call and is awaited before
the turn's calls are written; the output guardrail runs on the answer. The target is ≤ 1.05×.

Both sides run the same script with the same tools and must give the same answer; their runs
are interleaved, their order alternating, so load hits both alike; the figures are medians.
"""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks._util import table, verdict
from benchmarks.bench_stream import _interleaved, _plain, script, weather
from jianmu.nodes import create_react_node

__all__ = ("guardrail_costs", "main")

RUNS = 600
TARGET_RATIO = 1.05


async def allow_input(ctx: Any, text: str) -> None:
    """An input guardrail that lets everything through."""
    return None


async def allow_output(ctx: Any, answer: str) -> None:
    """An output guardrail that lets everything through."""
    return None


async def guardrail_costs(runs: int = RUNS) -> dict[str, float]:
    """Median seconds of the 3-turn run (`bench_stream`'s workload) without guardrails and
    with one input and one output guardrail."""
    plain = create_react_node(script(runs), [weather])
    guarded = create_react_node(script(runs), [weather], input_guardrails=[allow_input],
                                output_guardrails=[allow_output])
    return await _interleaved({
        "plain": lambda: _plain(plain),
        "guarded": lambda: _plain(guarded),
    }, runs)


def main() -> None:
    """Print the table."""
    costs = asyncio.run(guardrail_costs())
    ratio = costs["guarded"] / costs["plain"]
    print(f"a 3-turn run with one input and one output guardrail (async no-ops), "
          f"median of {RUNS}")
    table([
        ("no guardrails", f"{costs['plain'] * 1e3:.3f} ms", "1.00×", ""),
        ("input + output guardrail", f"{costs['guarded'] * 1e3:.3f} ms", f"{ratio:.2f}×",
         f"target ≤ {TARGET_RATIO}× {verdict(ratio <= TARGET_RATIO)}"),
    ], ("run", "time", "vs none", ""))


if __name__ == "__main__":
    main()
