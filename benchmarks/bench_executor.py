"""ToolExecutor vs LangGraph's prebuilt ToolNode: per-call overhead and a parallel batch.

``python -m benchmarks bench_executor --profile`` instead runs Jianmu's batches under cProfile
and prints where the time goes.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks._util import table, verdict
from jianmu import ReactiveRunner, StateManager
from jianmu.nodes import AgentState, ToolExecutor
from jianmu.tools import tool

BATCH = 20
ROUNDS = 30
TARGETS = {"async": 0.15, "sync": 0.2}
"""Per-call overhead vs LangGraph's ToolNode (issue 16)."""


def make_functions(kind: str) -> list[Callable[..., Any]]:
    """Twenty trivial functions named ``{kind}0`` … ``{kind}19``."""
    functions: list[Callable[..., Any]] = []
    for i in range(BATCH):
        if kind == "async":
            async def fn(x: int) -> int:
                return x + 1
        elif kind == "sync":
            def fn(x: int) -> int:  # type: ignore[misc]
                return x + 1
        else:
            async def fn(x: int) -> int:  # type: ignore[misc]
                await asyncio.sleep(0.1)
                return x
        fn.__name__ = f"{kind}{i}"
        fn.__doc__ = f"Trivial tool {i}.\n\nArgs:\n    x: a number."
        functions.append(fn)
    return functions


async def direct(functions: list[Callable[..., Any]]) -> None:
    for fn in functions:
        result = fn(1)
        if asyncio.iscoroutine(result):
            await result


def jianmu_batch(functions: list[Callable[..., Any]]) -> Callable[[], Awaitable[float]]:
    tools = [tool(fn) for fn in functions]
    executor = ToolExecutor(tools=tools)
    state = StateManager(AgentState)
    runner = ReactiveRunner(executor, state)
    counter = 0

    async def once() -> float:
        nonlocal counter
        counter += 1
        calls = [{"id": f"c{counter}_{i}", "name": fn.__name__, "arguments": {"x": 1}}
                 for i, fn in enumerate(functions)]
        state.replace({"actions": calls, "messages": [], "completed_call_ids": []})
        start = time.perf_counter()
        result = await runner.run()
        elapsed = time.perf_counter() - start
        assert result.ok and len(state.get("messages")) == BATCH, result
        return elapsed

    return once


def langgraph_batch(functions: list[Callable[..., Any]]) -> Callable[[], Awaitable[float]] | None:
    try:
        from langchain_core.messages import AIMessage
        from langchain_core.tools import StructuredTool
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode
    except ImportError:
        return None
    tools = []
    for fn in functions:
        if asyncio.iscoroutinefunction(fn):
            tools.append(StructuredTool.from_function(coroutine=fn, name=fn.__name__,
                                                      description=fn.__doc__))
        else:
            tools.append(StructuredTool.from_function(func=fn, name=fn.__name__,
                                                      description=fn.__doc__))
    # ToolNode runs inside a graph (it needs the graph's runtime config), as users run it
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "tools")
    graph = builder.compile()
    counter = 0

    async def once() -> float:
        nonlocal counter
        counter += 1
        message = AIMessage(content="", tool_calls=[
            {"name": fn.__name__, "args": {"x": 1}, "id": f"c{counter}_{i}"}
            for i, fn in enumerate(functions)
        ])
        start = time.perf_counter()
        out = await graph.ainvoke({"messages": [message]})
        elapsed = time.perf_counter() - start
        assert len(out["messages"]) == BATCH + 1
        return elapsed

    return once


async def measure(once: Callable[[], Awaitable[float]], rounds: int = ROUNDS) -> float:
    for _ in range(3):  # warm up (thread pools, caches)
        await once()
    return statistics.median([await once() for _ in range(rounds)])


async def direct_time(functions: list[Callable[..., Any]]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        await direct(functions)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def measure_pair(
    ours: Callable[[], Awaitable[float]], peer: Callable[[], Awaitable[float]],
    rounds: int = ROUNDS,
) -> tuple[float, float]:
    """Median batch times of both, their rounds interleaved so load spikes hit both alike."""
    for _ in range(3):  # warm up (thread pools, caches)
        await ours()
        await peer()
    ours_times, peer_times = [], []
    for _ in range(rounds):
        ours_times.append(await ours())
        peer_times.append(await peer())
    return statistics.median(ours_times), statistics.median(peer_times)


async def run() -> None:
    rows = []
    for kind in ("async", "sync"):
        limit = TARGETS[kind]
        target = f"<= {limit}x"
        functions = make_functions(kind)
        base = await direct_time(functions)
        peer_once = langgraph_batch(functions)
        if peer_once is None:
            ours = (await measure(jianmu_batch(functions)) - base) / BATCH
            rows.append((f"{BATCH} {kind} tools", f"{ours * 1e6:.0f} µs", "not installed",
                         "", target, ""))
            continue
        ours_wall, peer_wall = await measure_pair(jianmu_batch(functions), peer_once,
                                                  rounds=3 * ROUNDS)
        ours, peer = (ours_wall - base) / BATCH, (peer_wall - base) / BATCH
        rows.append((f"{BATCH} {kind} tools", f"{ours * 1e6:.0f} µs/call",
                     f"{peer * 1e6:.0f} µs/call", f"{ours / peer:.2f}x", target,
                     verdict(ours / peer <= limit)))
    sleepers = make_functions("sleep")
    wall = await measure(jianmu_batch(sleepers), rounds=5)
    peer_once = langgraph_batch(sleepers)
    peer_wall = await measure(peer_once, rounds=5) if peer_once else None
    rows.append((f"{BATCH} tools sleeping 100 ms", f"{wall * 1000:.0f} ms wall",
                 f"{peer_wall * 1000:.0f} ms wall" if peer_wall else "not installed",
                 f"{wall / 0.1:.2f}x of 100 ms", "<= 1.2x", verdict(wall / 0.1 <= 1.2)))
    table(rows, ("batch", "jianmu ToolExecutor", "LangGraph ToolNode", "ratio", "target", ""))
    print("(overhead = per-call time over calling the functions directly, median of "
          f"{3 * ROUNDS} batches, Jianmu's and LangGraph's interleaved)")


async def profile(rounds: int = 300, top: int = 30) -> None:
    """Run Jianmu's async and sync batches under cProfile; print the top entries."""
    for kind in ("async", "sync"):
        once = jianmu_batch(make_functions(kind))
        for _ in range(3):
            await once()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(rounds):
            await once()
        profiler.disable()
        print(f"\n--- {BATCH} {kind} tools, {rounds} batches: top {top} by own time ---")
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(top)
        print("--- by cumulative time ---")
        stats.sort_stats("cumulative").print_stats(top)


def main() -> None:
    """Print the executor figures (``--profile``: where Jianmu's time goes)."""
    asyncio.run(profile() if "--profile" in sys.argv else run())


if __name__ == "__main__":
    main()
