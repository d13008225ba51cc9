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
import statistics
import time
from typing import Any

from benchmarks._util import table, verdict
from jianmu import ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import tool

__all__ = ("guardrail_costs", "main")

RUNS = 600
TARGET_RATIO = 1.05
QUESTION = "What is the weather in Oslo and Bergen?"
ANSWER = "Oslo is sunny and Bergen is rainy today, so take an umbrella to Bergen only."


@tool
def weather(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    return "rainy" if city == "Bergen" else "sunny"


async def allow_input(ctx: Any, text: str) -> None:
    """An input guardrail that lets everything through."""
    return None


async def allow_output(ctx: Any, answer: str) -> None:
    """An output guardrail that lets everything through."""
    return None


def script(runs: int) -> ScriptedLLM:
    """``runs`` times the 3-turn script: two tool-call turns, then the answer."""
    turns: list[Any] = [
        [{"name": "weather", "arguments": {"city": "Oslo"}}],
        [{"name": "weather", "arguments": {"city": "Bergen"}}],
        ANSWER,
    ]
    return ScriptedLLM(turns * runs)


async def _run(tree: Any) -> tuple[float, str]:
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": QUESTION}]})
    start = time.perf_counter()
    result = await ReactiveRunner(tree, state).run()
    elapsed = time.perf_counter() - start
    assert result.ok, result.error
    return elapsed, state.get("final_answer")


async def guardrail_costs(runs: int = RUNS) -> dict[str, float]:
    """Median seconds of the 3-turn run without guardrails and with one input and one
    output guardrail."""
    sides = {
        "plain": create_react_node(script(runs), [weather]),
        "guarded": create_react_node(script(runs), [weather], input_guardrails=[allow_input],
                                     output_guardrails=[allow_output]),
    }
    samples: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for i in range(runs):
        for name in order if i % 2 == 0 else order[::-1]:
            elapsed, answer = await _run(sides[name])
            assert answer == ANSWER, (name, answer)
            samples[name].append(elapsed)
    warm = runs // 5
    return {name: statistics.median(values[warm:]) for name, values in samples.items()}


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
