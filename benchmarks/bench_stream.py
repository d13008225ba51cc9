"""Streaming and the one-object `Agent`: what each adds to a run.

(a) A 3-turn ReAct run (two tool-call turns, then an answer of a dozen words) streamed with
``runner.stream()`` and every event read, against the same run with no reader. Streaming makes
every event (the model's answer as word deltas included) and hands each to the reader; the
target is ≤ 1.1× the run without a reader.

Beside (a), its floor: the same run read through the plainest async generator a queue and a
future make (each event handed over as `ReactiveRunner.stream` hands it, the run in a task of
its own, none of the stream's care for a reader that leaves early, its eager first step or its
one-reader reservation), so that what the design costs and what the stream adds to it are told
apart.

(b) ``Agent.run(question)`` against the same tree built by hand (`create_react_node` once, then
per run a ``StateManager(AgentState)`` with the question and a `ReactiveRunner`): the target is
≤ 1.05×.

Both sides of each pair run the same script with the same tools and must give the same answer;
their runs are interleaved, their order alternating, so load hits both alike; the figures are
medians.
"""

from __future__ import annotations

import asyncio
import collections
import statistics
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from benchmarks._util import table, verdict
from jianmu import Agent, ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import tool

__all__ = ("agent_costs", "main", "stream_costs")

RUNS = 600
TARGET_STREAM_RATIO = 1.1
TARGET_AGENT_RATIO = 1.05
QUESTION = "What is the weather in Oslo and Bergen?"
ANSWER = "Oslo is sunny and Bergen is rainy today, so take an umbrella to Bergen only."


@tool
def weather(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    return "rainy" if city == "Bergen" else "sunny"


def script(runs: int) -> ScriptedLLM:
    """``runs`` times the 3-turn script: two tool-call turns, then the answer."""
    turns: list[Any] = [
        [{"name": "weather", "arguments": {"city": "Oslo"}}],
        [{"name": "weather", "arguments": {"city": "Bergen"}}],
        ANSWER,
    ]
    return ScriptedLLM(turns * runs)


def _state() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": QUESTION}]})


async def _plain(tree: Any) -> tuple[float, str]:
    state = _state()
    start = time.perf_counter()
    result = await ReactiveRunner(tree, state).run()
    elapsed = time.perf_counter() - start
    assert result.ok, result.error
    return elapsed, state.get("final_answer")


async def _streamed(
    tree: Any, stream: Callable[[ReactiveRunner], AsyncIterator[Any]] = ReactiveRunner.stream,
) -> tuple[float, str]:
    """A run's events read as a caller reads them: the deltas joined, the last event kept."""
    state = _state()
    start = time.perf_counter()
    deltas: list[str] = []
    last: Any = None
    async for event in stream(ReactiveRunner(tree, state)):
        if event.name == "llm.call.delta":
            deltas.append(event.fields["text"])
        last = event
    elapsed = time.perf_counter() - start
    assert last is not None and last.fields["result"].ok
    return elapsed, "".join(deltas)


async def _plainest_stream(runner: ReactiveRunner) -> AsyncGenerator[Any, None]:
    """The run's events through the plainest async generator a queue and a future make."""
    loop = asyncio.get_running_loop()
    queue: collections.deque[Any] = collections.deque()
    waiter: list[asyncio.Future[None] | None] = [None]

    def wake(_: object = None) -> None:
        fut, waiter[0] = waiter[0], None
        if fut is not None and not fut.done():
            fut.set_result(None)

    def arrived(event: Any) -> None:
        queue.append(event)
        if waiter[0] is not None:
            wake()

    bus = runner.ctx.events
    leave = bus.subscribe("*", arrived)
    bus.readers += 1  # the model streams its text, as for a stream
    task = loop.create_task(runner.run())
    task.add_done_callback(wake)
    try:
        while True:
            while queue:
                yield queue.popleft()
            if task.done():
                return
            waiter[0] = loop.create_future()
            await waiter[0]
    finally:
        leave()
        bus.readers -= 1


async def _by_hand(tree: Any) -> tuple[float, str]:
    """What `Agent.run` does, written out: the state with the question, a runner, the run."""
    start = time.perf_counter()
    state = _state()
    result = await ReactiveRunner(tree, state).run()
    elapsed = time.perf_counter() - start
    assert result.ok, result.error
    return elapsed, state.get("final_answer")


async def _agent(agent: Agent) -> tuple[float, str]:
    start = time.perf_counter()
    result = await agent.run(QUESTION)
    elapsed = time.perf_counter() - start
    assert result.ok, result.error
    return elapsed, result.output


async def _interleaved(
    sides: dict[str, Callable[[], Awaitable[tuple[float, str]]]], runs: int
) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for i in range(runs):
        for name in order if i % 2 == 0 else order[::-1]:
            elapsed, answer = await sides[name]()
            assert answer == ANSWER, (name, answer)
            samples[name].append(elapsed)
    warm = runs // 5
    return {name: statistics.median(values[warm:]) for name, values in samples.items()}


async def stream_costs(runs: int = RUNS) -> dict[str, float]:
    """Median seconds of the 3-turn run without a reader, streamed, and read by the plainest
    reader (the floor)."""
    plain_tree = create_react_node(script(runs), [weather])
    stream_tree = create_react_node(script(runs), [weather])
    floor_tree = create_react_node(script(runs), [weather])
    return await _interleaved({
        "plain": lambda: _plain(plain_tree),
        "streamed": lambda: _streamed(stream_tree),
        "plainest": lambda: _streamed(floor_tree, _plainest_stream),
    }, runs)


async def agent_costs(runs: int = RUNS) -> dict[str, float]:
    """Median seconds of the 3-turn run by hand and through `Agent`."""
    tree = create_react_node(script(runs), [weather], name="agent")
    agent = Agent(script(runs), tools=[weather])
    return await _interleaved({
        "by_hand": lambda: _by_hand(tree),
        "agent": lambda: _agent(agent),
    }, runs)


def main() -> None:
    """Print both tables."""
    streamed = asyncio.run(stream_costs())
    ratio = streamed["streamed"] / streamed["plain"]
    print(f"(a) a 3-turn run streamed, every event read, median of {RUNS}")
    table([
        ("run(), no reader", f"{streamed['plain'] * 1e3:.3f} ms", "1.00×", ""),
        ("stream(), every event read", f"{streamed['streamed'] * 1e3:.3f} ms", f"{ratio:.2f}×",
         f"target ≤ {TARGET_STREAM_RATIO}× {verdict(ratio <= TARGET_STREAM_RATIO)}"),
        ("  floor: the plainest queue-and-future generator", f"{streamed['plainest'] * 1e3:.3f} ms",
         f"{streamed['plainest'] / streamed['plain']:.2f}×", ""),
    ], ("run", "time", "vs run()", ""))
    agent = asyncio.run(agent_costs())
    ratio = agent["agent"] / agent["by_hand"]
    print(f"\n(b) Agent.run against the same tree built by hand, median of {RUNS}")
    table([
        ("create_react_node + StateManager + ReactiveRunner", f"{agent['by_hand'] * 1e3:.3f} ms",
         "1.00×", ""),
        ("Agent(llm, tools).run(question)", f"{agent['agent'] * 1e3:.3f} ms", f"{ratio:.2f}×",
         f"target ≤ {TARGET_AGENT_RATIO}× {verdict(ratio <= TARGET_AGENT_RATIO)}"),
    ], ("run", "time", "vs by hand", ""))


if __name__ == "__main__":
    main()
