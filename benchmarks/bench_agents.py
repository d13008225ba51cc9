"""Agents: what a history processor costs per turn, and what calling an agent as a tool adds.

(a) ``trim_history`` per turn on a stored history of 10,000 messages against the same on 100
messages, with the same token budget (a turn appends two messages, then the processor shapes
what is sent). The target: within 1.2× (linear in what is sent, not in what is stored). Beside
it, what a plain full copy of the stored list costs at each size.

(b) A lead agent that calls a sub-agent through ``agent_tool`` against the same lead calling a
plain tool, and the sub-agent's tree run alone: what the call adds over the sub-agent's own
run, target ≤ 1 ms, printed as a ratio to that 1 ms and to the sub-agent's run.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks._util import table, verdict
from jianmu import ReactiveRunner, StateManager
from jianmu.llm import Message, ScriptedLLM
from jianmu.nodes import AgentState, MessageHistory, agent_tool, create_react_node, trim_history
from jianmu.tools import tool

__all__ = ("agent_tool_overhead", "conversation", "main", "trim_costs")

SMALL, LARGE = 100, 10_000
BUDGET_TOKENS = 1_500
TARGET_TRIM_RATIO = 1.2
TARGET_AGENT_MS = 1.0
TURNS = 400
RUNS = 300


def conversation(n: int) -> list[Message]:
    """``n`` messages of a working conversation: questions, tool calls with results, answers."""
    out: list[Message] = [Message.user("Audit the invoices of March and list what is wrong.")]
    i = 0
    while len(out) < n:
        i += 1
        step = i % 3
        if step == 0:
            out.append(Message.user(f"Now invoice {i}: is the VAT right?"))
        elif step == 1:
            out.append(Message.assistant(tool_calls=[
                {"id": f"c{i}", "name": "read_invoice", "arguments": {"number": i}}]))
            out.append(Message.tool(f"invoice {i}: 3 lines, total 120.00, VAT 20.00",
                                    tool_call_id=f"c{i}", name="read_invoice"))
        else:
            out.append(Message.assistant(f"Invoice {i} is consistent: VAT is 20% of 100.00."))
    return out[:n]


def _per_turn(stored: list[Message], turns: int) -> float:
    """Seconds per turn: two messages appended, then the history trimmed for sending."""
    processor = trim_history(max_tokens=BUDGET_TOKENS)
    head = [Message.system("You audit invoices.")]
    extra = conversation(2 * turns + 2)[1:]
    samples: list[float] = []
    for turn in range(turns):
        stored.extend(extra[2 * turn:2 * turn + 2])
        start = time.perf_counter()
        processor.trim(MessageHistory(head, stored))
        samples.append(time.perf_counter() - start)
    return statistics.median(samples[turns // 4:])  # the first turns count every message


def trim_costs(turns: int = TURNS) -> dict[str, float]:
    """Median seconds per turn of ``trim_history`` and of a plain copy, at both sizes."""
    out: dict[str, float] = {}
    for label, size in (("small", SMALL), ("large", LARGE)):
        out[f"trim_{label}"] = _per_turn(conversation(size), turns)
        stored = conversation(size)
        start = time.perf_counter()
        for _ in range(turns):
            list(stored)
        out[f"copy_{label}"] = (time.perf_counter() - start) / turns
    return out


# -- an agent as a tool --------------------------------------------------------------------


@tool
def search(query: str) -> str:
    """Search the notes.

    Args:
        query: what to look for.
    """
    return f"3 notes about {query}"


@tool(name="researcher")
async def plain(input: str) -> str:
    """A plain tool in the sub-agent's place.

    Args:
        input: the question.
    """
    return "Tides come twice a day."


def _researcher(runs: int) -> Any:
    script: list[Any] = [[{"name": "search", "arguments": {"query": "tides"}}],
                         "Tides come twice a day."] * runs
    return create_react_node(ScriptedLLM(script), [search], name="researcher")


def _lead(runs: int, tool_: Any) -> Any:
    script: list[Any] = [[{"name": tool_.name, "arguments": {"input": "How often?"}}],
                         "Twice a day."] * runs
    return create_react_node(ScriptedLLM(script), [tool_], name="lead")


def _state() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "How often?"}]})


async def _timed(tree: Any) -> float:
    start = time.perf_counter()
    result = await ReactiveRunner(tree, _state()).run()
    elapsed = time.perf_counter() - start
    assert result.ok, result.error
    return elapsed


async def agent_tool_overhead(runs: int = RUNS) -> dict[str, float]:
    """Median seconds of: the sub-agent alone, the lead with the sub-agent as a tool, the lead
    with a plain tool instead; runs interleaved so that load hits all three alike."""
    alone = _researcher(runs)
    with_agent = _lead(runs, agent_tool(_researcher(runs), name="researcher",
                                        description="Researches a question."))
    with_plain = _lead(runs, plain)
    sides: dict[str, Callable[[], Awaitable[float]]] = {
        "sub_alone": lambda: _timed(alone),
        "lead_agent_tool": lambda: _timed(with_agent),
        "lead_plain_tool": lambda: _timed(with_plain),
    }
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(runs):
        for name, run in sides.items():
            samples[name].append(await run())
    warm = runs // 5
    return {name: statistics.median(values[warm:]) for name, values in samples.items()}


def main() -> None:
    """Print both tables."""
    costs = trim_costs()
    ratio = costs["trim_large"] / costs["trim_small"]
    print(f"(a) trim_history per turn (max_tokens={BUDGET_TOKENS}), "
          f"{LARGE:,} stored messages vs {SMALL}")
    table([
        (f"trim_history, {SMALL} messages", f"{costs['trim_small'] * 1e6:.1f} µs", "1.00×", ""),
        (f"trim_history, {LARGE:,} messages", f"{costs['trim_large'] * 1e6:.1f} µs",
         f"{ratio:.2f}×", f"target ≤ {TARGET_TRIM_RATIO}× {verdict(ratio <= TARGET_TRIM_RATIO)}"),
        (f"list copy, {SMALL} messages (for scale)", f"{costs['copy_small'] * 1e6:.1f} µs",
         f"{costs['copy_small'] / costs['trim_small']:.2f}×", ""),
        (f"list copy, {LARGE:,} messages (for scale)", f"{costs['copy_large'] * 1e6:.1f} µs",
         f"{costs['copy_large'] / costs['trim_small']:.2f}×", ""),
    ], ("per turn", "time", "vs trim at 100", ""))
    times = asyncio.run(agent_tool_overhead())
    added = times["lead_agent_tool"] - times["lead_plain_tool"] - times["sub_alone"]
    print(f"\n(b) a sub-agent as a tool (2 model turns and a tool call each), median of {RUNS}")
    table([
        ("sub-agent's tree alone", f"{times['sub_alone'] * 1e3:.3f} ms", "1.00×", ""),
        ("lead + plain tool", f"{times['lead_plain_tool'] * 1e3:.3f} ms",
         f"{times['lead_plain_tool'] / times['sub_alone']:.2f}×", ""),
        ("lead + agent_tool(sub-agent)", f"{times['lead_agent_tool'] * 1e3:.3f} ms",
         f"{times['lead_agent_tool'] / times['sub_alone']:.2f}×", ""),
        ("added by the call (agent − plain − alone)", f"{added * 1e3:.3f} ms",
         f"{added / times['sub_alone']:.2f}×",
         f"{added * 1e3 / TARGET_AGENT_MS:.2f}× of the {TARGET_AGENT_MS:g} ms target "
         f"{verdict(added * 1e3 <= TARGET_AGENT_MS)}"),
    ], ("run", "time", "vs sub-agent alone", ""))


if __name__ == "__main__":
    main()
