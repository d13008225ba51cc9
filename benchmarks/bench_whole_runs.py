"""Whole runs, from building the agent (its tools included) to the result: Jianmu's
`create_react_node` vs LangGraph's ``create_react_agent`` vs calling the tools directly.

Two workloads, each replayed three ways with the same tool functions and the same model turns:

- **shop** (tau-bench-like): the workload of ``tests/nodes/test_replay_shop.py``: nine tools
  that exist only as OpenAI function definitions over a shop's data, 24 scripted tasks of two
  to four model turns that call tools (some turns call two at once), then an answer.
- **bfcl** (BFCL-like): `BFCL_TASKS` tasks of one model turn that makes one to four calls
  (run in parallel), then an answer. Every task brings fresh tools: half as JSON-schema
  (OpenAI) definitions with an implementation each, half as typed functions with Google
  docstrings turned into tools (``@tool`` / LangChain's ``@tool(parse_docstring=True)``).

The sides:

- directly: each scripted call is ``fn(**arguments)``, nothing else;
- threaded: each call made on a worker thread as a runner makes a sync tool's call
  (`run_in_worker` on a `WorkerPool`), nothing else: the floor of a sync tool kept off the
  event loop, which LangGraph pays as well (``run_in_executor``);
- Jianmu: per task, the tools built (``Tool.from_openai`` / ``tool(fn)``), a fresh
  `create_react_node` tree, `StateManager` and `ReactiveRunner`, run to the end;
- LangGraph: per task, the tools built (``StructuredTool`` with the definition's JSON schema
  as ``args_schema`` / ``@tool(parse_docstring=True)``) and ``create_react_agent`` compiled,
  then ``ainvoke``.

Both models are in-process fakes that return the task's next scripted turn at once. Every side
must leave the shop's data (and the bfcl calls' outputs) as the direct calls do, so a side that
skipped or garbled a call cannot look fast. Rounds are interleaved, their order rotating, so a
busy machine slows all alike; figures are medians over rounds. A full garbage collection runs
(untimed) before each side's round, so that each side pays for the collections its own objects
bring, not for those that another side's garbage (LangGraph's most) left due. The overhead
per tool call is (a side's time per task - the direct calls' time) / calls per task: it
carries the building, the model turns and the calls. ``--profile`` prints a cProfile of the
Jianmu sides.
"""

from __future__ import annotations

import asyncio
import cProfile
import functools
import gc
import io
import itertools
import pstats
import random
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks import _shop
from benchmarks._util import table, verdict
from jianmu import ReactiveRunner, StateManager
from jianmu.execution.threads import WorkerPool, run_in_worker
from jianmu.llm import LLMResponse, Message, Usage
from jianmu.llm.provider import BaseLLMProvider
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime import RunStatus
from jianmu.tools import Tool, ToolSet, tool

ROUNDS = 9
BFCL_TASKS = 200
TARGET_SHOP_MS = 0.5
"""Jianmu's time per tool call above a direct call on the shop replay, in milliseconds."""
TARGET_ONE_CALL_MS = 0.7
"""Jianmu's time per tool call above a direct call on one-call bfcl runs, in milliseconds."""
ANSWER = "Done."

Call = tuple[str, dict[str, Any]]


@dataclass
class Task:
    """One whole run: the tools to build, the model's turns, the calls' expected outputs."""

    prompt: str
    turns: list[list[Call]]
    functions: dict[str, Callable[..., Any]]
    definitions: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI definitions of the tools; empty when the tools are the typed functions."""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def calls(self) -> int:
        return sum(len(turn) for turn in self.turns)


# -- the workloads ------------------------------------------------------------------------------


def shop_tasks() -> tuple[list[Task], Callable[[], str]]:
    """The shop's tasks over fresh data, and a digest of that data."""
    data = _shop.make_shop()
    functions = _shop.make_functions(data)
    metadata = {name: {"read_only": True} for name in _shop.READ_ONLY}
    tasks = [
        Task(f"task {t}", turns, functions, _shop.DEFINITIONS, metadata)
        for t, turns in enumerate(_shop.make_tasks(_shop.make_shop()))
    ]
    return tasks, lambda: _shop.digest(data)


_TYPES: list[tuple[str, dict[str, Any], Callable[[random.Random], Any]]] = [
    ("str", {"type": "string"}, lambda r: f"w{r.randint(0, 999)}"),
    ("int", {"type": "integer"}, lambda r: r.randint(-50, 500)),
    ("float", {"type": "number"}, lambda r: round(r.random() * 100, 2)),
    ("bool", {"type": "boolean"}, lambda r: r.random() < 0.5),
    ("list[str]", {"type": "array", "items": {"type": "string"}},
     lambda r: [f"t{r.randint(0, 9)}" for _ in range(r.randint(1, 3))]),
]


def _bfcl_task(t: int, calls: int, as_functions: bool, rng: random.Random, tag: int) -> Task:
    """Task ``t``: ``calls`` fresh tools (of 1-4 typed parameters), each called once; ``tag``
    is in their names, docs and schemas, so no cache keyed by them serves a later round."""
    names = [f"fn_{t}_{i}_{tag}" for i in range(calls)]
    params = [[(f"p{j}", *rng.choice(_TYPES)) for j in range(rng.randint(1, 4))]
              for _ in names]
    turn: list[Call] = [(name, {p: make(rng) for p, _, _, make in ps})
                        for name, ps in zip(names, params, strict=True)]
    if as_functions:
        source = "".join(
            f"def {name}({', '.join(f'{p}: {py}' for p, py, _, _ in ps)}) -> str:\n"
            f'    """Compute thing {i} of task {t} ({tag}).\n\n    Args:\n'
            + "".join(f"        {p}: the {p} of thing {i}.\n" for p, _, _, _ in ps)
            + f'    """\n    return repr(({", ".join(p for p, _, _, _ in ps)},))\n'
            for i, (name, ps) in enumerate(zip(names, params, strict=True)))
        namespace: dict[str, Any] = {}
        exec(compile(source, f"<bfcl task {t}>", "exec"), namespace)
        return Task(f"task {t}", [turn], {n: namespace[n] for n in names})
    definitions = [{"type": "function", "function": {
        "name": name, "description": f"Compute thing {i} of task {t} ({tag}).",
        "parameters": {"type": "object", "required": [p for p, _, _, _ in ps], "properties": {
            p: {**schema, "description": f"the {p} of thing {i} ({tag})."}
            for p, _, schema, _ in ps}},
    }} for i, (name, ps) in enumerate(zip(names, params, strict=True))]

    def implementation(order: list[str]) -> Callable[..., str]:
        def run(**arguments: Any) -> str:
            return repr(tuple(arguments[p] for p in order))
        return run

    functions = {name: implementation([p for p, _, _, _ in ps])
                 for name, ps in zip(names, params, strict=True)}
    return Task(f"task {t}", [turn], functions, definitions)


def bfcl_tasks(n: int | None = None, tag: int = 0) -> list[Task]:
    """``n`` one-turn tasks: half one call, the rest two to four; half of each kind as
    JSON-schema definitions, half as typed functions. The calls are the same for every
    ``tag``; the tools' names and docs are new."""
    rng = random.Random(33)
    return [_bfcl_task(t, 1 if t % 2 == 0 else 2 + t % 3, t % 4 in (0, 1), rng, tag)
            for t in range(BFCL_TASKS if n is None else n)]


# -- the sides ----------------------------------------------------------------------------------


def direct(task: Task) -> list[str]:
    """The floor: the task's calls made directly, in order."""
    return [str(task.functions[name](**args)) for turn in task.turns for name, args in turn]


_POOL: list[WorkerPool] = []


async def threaded(task: Task) -> list[str]:
    """The floor of a sync tool in an agent: each call made on a worker thread, as a runner
    makes it (`run_in_worker` on a `WorkerPool`), and nothing else."""
    if not _POOL:
        _POOL.append(WorkerPool(8))
    out = []
    for turn in task.turns:
        for name, args in turn:
            fn = task.functions[name]
            out.append(str(await run_in_worker(functools.partial(fn, **args),
                                               executor=_POOL[0])))
    return out


class ScriptModel(BaseLLMProvider):
    """Jianmu's fake model: the task's next turn, at once (the turn is counted from the
    assistant messages, as LangGraph's fake counts its AI messages)."""

    model = "script"

    def __init__(self, task: Task) -> None:
        self.task = task

    async def complete(self, messages: Any, *, tools: Any = None, tool_choice: Any = None,
                       **params: Any) -> LLMResponse:
        turn = sum(1 for m in messages if m.role == "assistant")
        if turn >= len(self.task.turns):
            return LLMResponse(message=Message(role="assistant", content=ANSWER),
                               usage=Usage(input_tokens=10, output_tokens=1))
        calls = [{"id": f"call_{turn}_{i}", "name": name, "arguments": args}
                 for i, (name, args) in enumerate(self.task.turns[turn])]
        return LLMResponse(message=Message(role="assistant", tool_calls=calls),
                           usage=Usage(input_tokens=10, output_tokens=5))


def jianmu_tools(task: Task) -> ToolSet | list[Tool]:
    """The task's tools, built as a Jianmu user builds them."""
    if task.definitions:
        return ToolSet.from_openai(task.definitions, task.functions, metadata=task.metadata)
    return [tool(fn) for fn in task.functions.values()]


async def jianmu(task: Task) -> list[str]:
    """One whole run through a fresh ReAct tree and runner (closed after)."""
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": task.prompt}]})
    tree = create_react_node(ScriptModel(task), jianmu_tools(task), max_iterations=20)
    async with ReactiveRunner(tree, state) as runner:
        result = await runner.run()
    assert result.status is RunStatus.SUCCESS, result
    assert state.get("final_answer") == ANSWER, state.get("final_answer")
    return [m.content or "" for m in state.get("messages") if m.role == "tool"]


def langgraph_side() -> Callable[[Task], Awaitable[list[str]]] | None:
    """One whole run through LangGraph's prebuilt ReAct agent built for the task, or None."""
    try:
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.tools import StructuredTool
        from langchain_core.tools import tool as lc_tool
        from langgraph.prebuilt import create_react_agent
    except ImportError:
        return None

    class ScriptedChat(BaseChatModel):
        """Answers the task's next turn."""

        task: Any = None

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            raise NotImplementedError("async only")

        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            turn = sum(1 for m in messages if getattr(m, "type", None) == "ai")
            if turn >= len(self.task.turns):
                message = AIMessage(content=ANSWER)
            else:
                message = AIMessage(content="", tool_calls=[
                    {"name": name, "args": args, "id": f"call_{turn}_{i}"}
                    for i, (name, args) in enumerate(self.task.turns[turn])])
            return ChatResult(generations=[ChatGeneration(message=message)])

    def tools(task: Task) -> list[Any]:
        if not task.definitions:
            return [lc_tool(parse_docstring=True)(fn) for fn in task.functions.values()]
        out = []
        for definition in task.definitions:
            inner = definition["function"]
            out.append(StructuredTool.from_function(
                func=task.functions[inner["name"]], name=inner["name"],
                description=inner["description"], args_schema=inner["parameters"]))
        return out

    async def one(task: Task) -> list[str]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph 1.x
            agent = create_react_agent(ScriptedChat(task=task), tools(task))
        out = await agent.ainvoke({"messages": [{"role": "user", "content": task.prompt}]})
        assert out["messages"][-1].content == ANSWER, out["messages"][-1]
        return [str(m.content) for m in out["messages"] if getattr(m, "type", None) == "tool"]

    return one


# -- measuring ----------------------------------------------------------------------------------

Side = Callable[[Task], Any]
Workload = Callable[[], tuple[list[Task], Callable[[], str]]]


_TAGS = itertools.count()


def _bfcl_workload() -> tuple[list[Task], Callable[[], str]]:
    """Fresh bfcl tasks (new functions, names and docs; the same calls) each time."""
    return bfcl_tasks(tag=next(_TAGS)), lambda: ""


async def _all(side: Side, workload: Workload, pick: Callable[[Task], bool]) -> tuple[
        float, float, str, list[str]]:
    """Seconds and CPU seconds (the process's, worker threads included) for every picked task
    of a workload (fresh data, untimed), the data's digest after, and every call's output."""
    tasks, digest = workload()
    total = cpu = 0.0
    outputs: list[str] = []
    for task in tasks:
        if not pick(task):
            continue
        start, start_cpu = time.perf_counter(), time.process_time()
        done = side(task)
        if asyncio.iscoroutine(done):
            done = await done
        total += time.perf_counter() - start
        cpu += time.process_time() - start_cpu
        outputs += done
    return total, cpu, digest(), outputs


GROUPS: dict[str, tuple[Workload, Callable[[Task], bool]]] = {
    "shop": (shop_tasks, lambda t: True),
    "bfcl one call": (_bfcl_workload, lambda t: t.calls == 1),
    "bfcl 2-4 calls": (_bfcl_workload, lambda t: t.calls > 1),
}


async def measure(rounds: int = ROUNDS) -> dict[tuple[str, str], list[float]]:
    """Seconds per call of each (group, side), per round, the sides' order rotating; and CPU
    seconds per call under (group, side + " cpu")."""
    sides: dict[str, Side] = {"direct": direct, "threaded": threaded, "jianmu": jianmu}
    peer = langgraph_side()
    if peer is not None:
        sides["langgraph"] = peer
    out: dict[tuple[str, str], list[float]] = {}
    names = list(sides)
    for group, (workload, pick) in GROUPS.items():
        expected: tuple[str, list[str]] | None = None
        for name, side in sides.items():  # warm up, and check every side does the same work
            _, _, digest, outputs = await _all(side, workload, pick)
            expected = expected or (digest, outputs)
            if (digest, outputs) != expected:
                raise AssertionError(f"{name} did other work than the direct calls on {group}")
        calls = sum(t.calls for t in workload()[0] if pick(t))
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                gc.collect()  # untimed: the previous side's garbage is not this side's bill
                seconds, cpu, _, _ = await _all(sides[name], workload, pick)
                out.setdefault((group, name), []).append(seconds / calls)
                out.setdefault((group, f"{name} cpu"), []).append(cpu / calls)
    return out


def report(rounds: int = ROUNDS) -> None:
    """Measure and print the table."""
    times = asyncio.run(measure(rounds))
    rows: list[tuple[str, ...]] = []
    targets = {"shop": TARGET_SHOP_MS, "bfcl one call": TARGET_ONE_CALL_MS}
    for group in GROUPS:
        floor = statistics.median(times[group, "direct"])
        ours = [j - d for j, d in zip(times[group, "jianmu"], times[group, "direct"],
                                      strict=True)]
        over = statistics.median(ours) * 1e3
        target = targets.get(group)
        rows.append((f"{group}: per call above direct", f"direct {floor * 1e6:.1f} µs",
                     f"{over:.3f} ms", "", f"<= {target} ms" if target else "",
                     verdict(over <= target) if target else ""))
        hand_off = statistics.median(
            t - d for t, d in zip(times[group, "threaded"], times[group, "direct"],
                                  strict=True)) * 1e3
        cpu = statistics.median(
            j - d for j, d in zip(times[group, "jianmu cpu"], times[group, "direct cpu"],
                                  strict=True)) * 1e3
        rows.append((f"{group}:  of which the thread floor", "a sync call on a worker thread",
                     f"{hand_off:.3f} ms", f"{hand_off / over:.0%}" if over > 0 else "", "",
                     ""))
        rows.append((f"{group}:  CPU per call above direct", "process time, threads too",
                     f"{cpu:.3f} ms", "", "", ""))
        if (group, "langgraph") in times:
            theirs = [g - d for g, d in zip(times[group, "langgraph"], times[group, "direct"],
                                            strict=True)]
            ratio = statistics.median(
                j / g for j, g in zip(times[group, "jianmu"], times[group, "langgraph"],
                                      strict=True))
            rows.append((f"{group}: whole run vs LangGraph",
                         f"LangGraph {statistics.median(theirs) * 1e3:.3f} ms/call",
                         f"{over:.3f} ms/call", f"{ratio:.2f}x", "", ""))
    table(rows, ("measure", "baseline", "jianmu", "ratio", "target", ""))
    shop_calls = sum(t.calls for t in shop_tasks()[0])
    print(f"(whole runs: tools built, agent built, run to the answer, per task; shop: 24 tasks, "
          f"{shop_calls} calls to 9 tools from OpenAI definitions; bfcl: {BFCL_TASKS} tasks of "
          "one turn with 1-4 calls to fresh tools, half JSON-schema definitions, half typed "
          "functions; LangGraph's agent compiled per task too; ms per call are (side - direct) "
          f"/ calls; medians of {rounds} interleaved rounds, ratios of whole-run time per round)")


def profile(rounds: int = 10) -> None:
    """Print where the Jianmu whole runs spend their time (after a warm-up)."""
    async def run() -> None:
        for workload, pick in GROUPS.values():
            await _all(jianmu, workload, pick)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(rounds):
            for workload, pick in GROUPS.values():
                await _all(jianmu, workload, pick)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(45)
        stats.sort_stats("cumulative").print_stats(70)
        print(out.getvalue())

    asyncio.run(run())


def main() -> None:
    """Print the whole-run figures; ``--profile`` adds a cProfile of the Jianmu side."""
    if "--profile" in sys.argv:
        profile()
    report()


if __name__ == "__main__":
    main()
