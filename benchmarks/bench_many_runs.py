"""Thousands of runs in one process: 1,000 concurrent ReAct runs on one event loop.

Each run is a ReAct loop (`create_react_node` under a `ReactiveRunner`) against an in-process
fake model that answers after ``MODEL_LATENCY`` (an ``asyncio.sleep``): exactly three model
turns, the first two asking for two tool calls each (run in parallel, each sleeping
``TOOL_LATENCY``), the third answering. So a run is 3 model turns and 4 tool calls, and the
ideal wall time of any number of concurrent runs is ``3 × MODEL_LATENCY + 2 × TOOL_LATENCY``.
LangGraph's prebuilt ReAct agent runs the same script with a fake chat model of the same
latency, 1,000 concurrent ``ainvoke``s, in the same process. Two floors run the same script:
bare asyncio (plain coroutines), and the smallest behaviour tree that can run it — a 3-node
py_trees tree, ``Repeat(Sequence(model, tools))``, whose leaves run tasks, ticked when one ends —
which is what ticking a py_trees tree costs before any framework.

``python -m benchmarks bench_many_runs --profile`` adds a cProfile of the Jianmu runs.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import io
import pstats
import statistics
import sys
import time
import tracemalloc
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import py_trees
from py_trees.common import Status

from benchmarks._util import table, verdict
from jianmu import ReactiveRunner, StateManager
from jianmu.llm import LLMResponse, Message, Usage
from jianmu.llm.provider import BaseLLMProvider
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime import RunStatus
from jianmu.tools import tool

RUNS = 1000
MODEL_LATENCY = 0.050
TOOL_LATENCY = 0.010
TOOL_TURNS = 2  # turns that call tools; one more turn answers
CALLS_PER_TURN = 2
ROUNDS = 3


def ideal() -> float:
    """The wall time of a run with no overhead at all: the model's and the tools' latency."""
    return (TOOL_TURNS + 1) * MODEL_LATENCY + TOOL_TURNS * TOOL_LATENCY

TARGET_WALL = 1.5
TARGET_CPU = 3.0
TARGET_SPEEDUP = 2.0
TARGET_IDLE_KB = 100.0


def _turn(messages: Sequence[Any]) -> int:
    """How many assistant turns the history already holds (dicts or message objects)."""
    count = 0
    for m in messages:
        role = m.get("role") if isinstance(m, Mapping) else getattr(m, "role", None)
        if role in ("assistant", "ai") or getattr(m, "type", None) == "ai":
            count += 1
    return count


def _calls(turn: int) -> list[dict[str, Any]]:
    return [{"id": f"call_{turn}_{i}", "name": f"lookup{i}", "arguments": {"key": f"k{turn}{i}"}}
            for i in range(CALLS_PER_TURN)]


class FakeModel(BaseLLMProvider):
    """A model that answers after ``latency`` s: tool calls for the first turns, then text."""

    model = "fake"

    def __init__(self, latency: float | None = None, tool_name: str | None = None) -> None:
        self.latency = latency
        self.tool_name = tool_name

    async def complete(self, messages: Any, *, tools: Any = None, tool_choice: Any = None,
                       **params: Any) -> LLMResponse:
        await asyncio.sleep(MODEL_LATENCY if self.latency is None else self.latency)
        turn = _turn(messages)
        if turn >= TOOL_TURNS:
            return LLMResponse(message=Message(role="assistant", content="done"),
                               usage=Usage(input_tokens=10, output_tokens=1))
        calls = _calls(turn)
        if self.tool_name is not None:
            calls = [{**c, "name": self.tool_name} for c in calls]
        return LLMResponse(message=Message(role="assistant", tool_calls=calls),
                           usage=Usage(input_tokens=10, output_tokens=5))


def _lookup(i: int, latency: float | None = None) -> Callable[..., Awaitable[str]]:
    """Tool ``lookup{i}``: sleeps ``latency`` (default `TOOL_LATENCY`), returns a string."""
    async def lookup(key: str) -> str:
        await asyncio.sleep(TOOL_LATENCY if latency is None else latency)
        return f"value of {key}"

    lookup.__name__ = f"lookup{i}"
    lookup.__doc__ = f"Look a key up (table {i}).\n\nArgs:\n    key: the key."
    return lookup


def _make_tools(latency: float | None = None) -> list[Callable[..., Awaitable[str]]]:
    return [_lookup(i, latency) for i in range(CALLS_PER_TURN)]


def make_tool(i: int, latency: float | None = None) -> Any:
    """Jianmu's ``lookup{i}``: a read tool, so a turn's two calls run in parallel."""
    return tool(category="read")(_lookup(i, latency))


JIANMU_TOOLS = [make_tool(i) for i in range(CALLS_PER_TURN)]


@tool(category="write", permission="user_confirm")
async def pay(key: str) -> str:
    """Pay for a key (asks a person first).

    Args:
        key: the key.
    """
    return f"paid {key}"


def jianmu_runner(llm: FakeModel, tools: Sequence[Any] = JIANMU_TOOLS) -> ReactiveRunner:
    """One run: a fresh ReAct tree and state under its own runner."""
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "look it up"}]})
    return ReactiveRunner(create_react_node(llm, tools), state)


async def jianmu_wall(n: int) -> float:
    """Wall time of ``n`` concurrent Jianmu runs (building the runners included)."""
    llm = FakeModel()
    start = time.perf_counter()
    runners = [jianmu_runner(llm) for _ in range(n)]
    results = await asyncio.gather(*(r.run() for r in runners))
    wall = time.perf_counter() - start
    for result, runner in zip(results, runners, strict=True):
        assert result.status is RunStatus.SUCCESS, result
        messages = runner.state.get("messages")
        assert len(messages) == 1 + (TOOL_TURNS + 1) + TOOL_TURNS * CALLS_PER_TURN, messages
    return wall


def langgraph_factory() -> Callable[[int], Awaitable[float]] | None:
    """``n`` concurrent ``ainvoke``s of LangGraph's prebuilt ReAct agent, or None."""
    try:
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.tools import StructuredTool
        from langgraph.prebuilt import create_react_agent
    except ImportError:
        return None

    class FakeChat(BaseChatModel):
        """A chat model that answers after 50 ms, following the same script."""

        @property
        def _llm_type(self) -> str:
            return "fake"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            raise NotImplementedError("async only")

        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            await asyncio.sleep(MODEL_LATENCY)
            turn = _turn(messages)
            if turn >= TOOL_TURNS:
                message = AIMessage(content="done")
            else:
                message = AIMessage(content="", tool_calls=[
                    {"name": c["name"], "args": c["arguments"], "id": c["id"]}
                    for c in _calls(turn)])
            return ChatResult(generations=[ChatGeneration(message=message)])

    tools = [StructuredTool.from_function(coroutine=fn, name=fn.__name__, description=fn.__doc__)
             for fn in _make_tools()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph 1.x
        agent = create_react_agent(FakeChat(), tools)

    async def wall(n: int) -> float:
        start = time.perf_counter()
        outs = await asyncio.gather(*(
            agent.ainvoke({"messages": [{"role": "user", "content": "look it up"}]})
            for _ in range(n)))
        elapsed = time.perf_counter() - start
        for out in outs:
            assert len(out["messages"]) == 1 + (TOOL_TURNS + 1) + TOOL_TURNS * CALLS_PER_TURN
        return elapsed

    return wall


def idle_kb(n: int) -> float:
    """Memory kept per run parked on an approval (tracemalloc, KB)."""
    llm = FakeModel(latency=0, tool_name="pay")

    async def park() -> list[ReactiveRunner]:
        runners = [jianmu_runner(llm, [pay]) for _ in range(n)]
        results = await asyncio.gather(*(r.run() for r in runners))
        assert all(r.status is RunStatus.SUSPENDED for r in results), results[0]
        return runners

    asyncio.run(park())  # warm caches (schemas, validators) so they are not counted per run
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    parked = asyncio.run(park())
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(parked) == n
    return (after - before) / n / 1024


def active_kb(n: int) -> float:
    """Peak memory per run while ``n`` runs are in flight (tracemalloc, KB)."""
    asyncio.run(jianmu_wall(min(n, 10)))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    asyncio.run(jianmu_wall(n))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - before) / n / 1024


def profile(n: int) -> None:
    """Print where the Jianmu runs spend their time (after a warm-up batch)."""
    asyncio.run(jianmu_wall(min(n, 20)))
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(jianmu_wall(n))
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(40)
    print(out.getvalue())


async def bare_wall(n: int) -> float:
    """The floor: the same script as plain coroutines (fake model, tools), no framework."""
    llm = FakeModel()
    functions = _make_tools()

    async def one() -> None:
        messages: list[Any] = [{"role": "user", "content": "look it up"}]
        while True:
            reply = await llm.complete(messages)
            messages.append(reply.message)
            if not reply.tool_calls:
                return
            outputs = await asyncio.gather(*(
                functions[int(c.name[-1])](**c.arguments) for c in reply.tool_calls))
            messages.extend({"role": "tool", "content": o} for o in outputs)

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - start


class _AsyncLeaf(py_trees.behaviour.Behaviour):
    """A py_trees leaf that runs a coroutine as a task: RUNNING until it ends, then its verdict."""

    def __init__(self, name: str, start: Callable[[], Awaitable[bool]], run: _FloorRun) -> None:
        super().__init__(name)
        self.start = start
        self.run = run
        self.task: asyncio.Future[bool] | None = None

    def initialise(self) -> None:
        self.task = None

    def update(self) -> Status:
        if self.task is None:
            self.task = asyncio.ensure_future(self.start())
            self.run.in_flight += 1
            self.task.add_done_callback(self.run.done)
            return Status.RUNNING
        if not self.task.done():
            return Status.RUNNING
        return Status.SUCCESS if self.task.result() else Status.FAILURE


class _FloorRun:
    """One run of the script on the smallest py_trees tree that can run it, ticked on wake."""

    def __init__(self, llm: FakeModel, functions: Sequence[Callable[..., Awaitable[str]]]) -> None:
        self.llm, self.functions = llm, functions
        self.wake = asyncio.Event()
        self.in_flight = 0
        self.messages: list[Any] = [{"role": "user", "content": "look it up"}]
        self.calls: list[Any] = []
        turn = py_trees.composites.Sequence("turn", memory=True, children=[
            _AsyncLeaf("model", self.ask, self), _AsyncLeaf("tools", self.act, self)])
        self.root = py_trees.decorators.Repeat("loop", child=turn, num_success=-1)

    def done(self, _: object) -> None:
        self.in_flight -= 1
        self.wake.set()

    async def ask(self) -> bool:
        reply = await self.llm.complete(self.messages)
        self.messages.append(reply.message)
        self.calls = reply.tool_calls
        return True

    async def act(self) -> bool:
        if not self.calls:
            return False  # the answer: the loop ends
        outputs = await asyncio.gather(*(
            self.functions[int(c.name[-1])](**c.arguments) for c in self.calls))
        self.messages.extend({"role": "tool", "content": o} for o in outputs)
        return True

    async def __call__(self) -> None:
        while True:
            self.root.tick_once()
            if self.root.status is not Status.RUNNING:
                return
            if self.in_flight or self.wake.is_set():  # a RUNNING tree with nothing in flight
                await self.wake.wait()                # ticks again at once
                self.wake.clear()


async def pytrees_wall(n: int) -> float:
    """The floor of a behaviour tree: the same script on a 3-node py_trees tree
    (``Repeat(Sequence(model, tools))``, leaves running tasks), ticked when a task ends."""
    llm = FakeModel()
    functions = _make_tools()
    start = time.perf_counter()
    runs = [_FloorRun(llm, functions) for _ in range(n)]
    await asyncio.gather(*(run() for run in runs))
    wall = time.perf_counter() - start
    assert all(len(r.messages) == 1 + (TOOL_TURNS + 1) + TOOL_TURNS * CALLS_PER_TURN
               for r in runs)
    return wall


async def _timed(fn: Callable[[int], Awaitable[float]], n: int) -> tuple[float, float]:
    """Wall and CPU time of one batch."""
    cpu = time.process_time()
    wall = await fn(n)
    return wall, time.process_time() - cpu


async def walls(n: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, cpu) of each round per contender, rounds interleaved so noise hits all alike."""
    contenders: dict[str, Callable[[int], Awaitable[float]]] = {
        "bare": bare_wall, "pytrees": pytrees_wall, "jianmu": jianmu_wall}
    peer = langgraph_factory()
    if peer is not None:
        contenders["langgraph"] = peer
    for fn in contenders.values():  # warm up imports and caches
        await fn(min(n, 20))
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            gc.collect()
            out[name].append(await _timed(fn, n))
    return out


def _median(samples: list[tuple[float, float]], index: int) -> float:
    return statistics.median(s[index] for s in samples)


def report(n: int = RUNS, rounds: int = ROUNDS) -> None:
    """Measure and print the table."""
    measured = asyncio.run(walls(n, rounds))
    ours, ours_cpu = _median(measured["jianmu"], 0), _median(measured["jianmu"], 1)
    bare, bare_cpu = _median(measured["bare"], 0), _median(measured["bare"], 1)
    trees_cpu = _median(measured["pytrees"], 1)
    idle = idle_kb(n)
    active = active_kb(n)
    best = ideal()
    rows = [
        (f"{n} runs, wall", f"ideal {best * 1000:.0f} ms", f"{ours * 1000:.0f} ms",
         f"{ours / best:.2f}x", f"<= {TARGET_WALL}x", verdict(ours / best <= TARGET_WALL)),
        (f"{n} runs, floor", f"bare asyncio {bare * 1000:.0f} ms", f"{ours * 1000:.0f} ms",
         f"{ours / bare:.2f}x", "", ""),
        ("CPU per run", f"bare asyncio {bare_cpu / n * 1e6:.0f} µs",
         f"{ours_cpu / n * 1e6:.0f} µs", f"{ours_cpu / bare_cpu:.1f}x",
         f"<= {TARGET_CPU}x", verdict(ours_cpu / bare_cpu <= TARGET_CPU)),
        ("CPU per run", f"py_trees floor {trees_cpu / n * 1e6:.0f} µs "
         f"({trees_cpu / bare_cpu:.1f}x bare)", f"{ours_cpu / n * 1e6:.0f} µs",
         f"{ours_cpu / trees_cpu:.1f}x", "", ""),
    ]
    if "langgraph" not in measured:
        rows.append((f"{n} runs, throughput", "LangGraph not installed", "", "", "", ""))
    else:
        theirs = _median(measured["langgraph"], 0)
        theirs_cpu = _median(measured["langgraph"], 1)
        rows.append((f"{n} runs, throughput", f"LangGraph {n / theirs:.0f} runs/s "
                     f"({theirs * 1000:.0f} ms)", f"{n / ours:.0f} runs/s",
                     f"{theirs / ours:.2f}x", f">= {TARGET_SPEEDUP}x",
                     verdict(theirs / ours >= TARGET_SPEEDUP)))
        rows.append(("CPU per run", f"LangGraph {theirs_cpu / n * 1e6:.0f} µs",
                     f"{ours_cpu / n * 1e6:.0f} µs", f"{theirs_cpu / ours_cpu:.2f}x less",
                     "", ""))
    rows += [
        ("memory per idle run", "parked on an approval", f"{idle:.1f} KB", "",
         f"<= {TARGET_IDLE_KB:.0f} KB", verdict(idle <= TARGET_IDLE_KB)),
        ("memory per active run", "peak while in flight", f"{active:.1f} KB", "", "", ""),
    ]
    table(rows, ("measure", "baseline", "jianmu", "ratio", "target", ""))
    print(f"(each run: {TOOL_TURNS + 1} model turns of {MODEL_LATENCY * 1000:.0f} ms, "
          f"{CALLS_PER_TURN} parallel tool calls of {TOOL_LATENCY * 1000:.0f} ms on each of the "
          f"first {TOOL_TURNS}; all {n} runs start together on one event loop, so the wall is "
          f"about the ideal plus {n} x the CPU per run; medians of {rounds} interleaved rounds, "
          "Jianmu's runner building included; the py_trees floor runs the script on a 3-node "
          "py_trees tree with no framework: what ticking a behaviour tree costs by itself)")


def main() -> None:
    """Print the many-runs figures; ``--profile`` adds a cProfile of the Jianmu runs."""
    if "--profile" in sys.argv:
        profile(RUNS)
    report()


if __name__ == "__main__":
    main()
