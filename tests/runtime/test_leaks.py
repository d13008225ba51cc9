"""Thousands of short agents in one process end with as many threads and as much memory as they
began with. Sync tools run on the process's shared ``jianmu-tool`` threads, which a new run
reuses while they are idle: none is left once they have been idle for
`jianmu.execution.threads.IDLE_S`, whether the
agents were closed (`ReactiveRunner.aclose`) or dropped."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable

import pytest

from jianmu import ReactiveRunner, ScriptedLLM, StateManager
from jianmu.execution import threads
from jianmu.nodes import AgentState, ToolExecutor, create_react_node
from jianmu.tools import ToolSet, tool

AGENTS = 2000
WARM_UP = 200
RSS_SLACK_MIB = 48


@pytest.fixture(autouse=True)
def _threads_idle_briefly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle tool threads end after 0.2 s here, not 1 s: each test waits for them to end (four
    waits), and the runs of a test follow each other closely enough to reuse them either way."""
    monkeypatch.setattr(threads, "IDLE_S", 0.2)


def _tool_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("jianmu-tool"))


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _settles(check: Callable[[], bool], seconds: float = 60) -> bool:
    """Whether ``check`` holds within ``seconds``: idle threads end after `IDLE_S`, and ended
    threads take a moment to be reaped."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


async def _agent(*, close: bool) -> None:
    @tool
    def lookup(key: str) -> str:
        """Look a key up (sync: it runs on a worker thread).

        Args:
            key: the key.
        """
        return key.upper()

    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"key": "a"}}], "done"])
    runner = ReactiveRunner(create_react_node(llm, [lookup]), StateManager(AgentState))
    result = await runner.run(timeout=60)
    assert result.ok and runner.state.get("final_answer") == "done", result.error
    if close:
        await runner.aclose()


def test_2000_closed_agents_leave_no_thread_and_flat_memory() -> None:
    async def main() -> tuple[int, float, int, float]:
        for _ in range(WARM_UP):
            await _agent(close=True)
        gc.collect()
        assert _settles(lambda: _tool_threads() == 0)
        threads, rss = threading.active_count(), _rss_mib()
        for _ in range(AGENTS):
            await _agent(close=True)
        gc.collect()
        assert _settles(lambda: _tool_threads() == 0), f"{_tool_threads()} tool threads left"
        return threads, rss, threading.active_count(), _rss_mib()

    threads, rss, threads_after, rss_after = asyncio.run(main())
    assert threads_after <= threads
    assert rss_after - rss <= RSS_SLACK_MIB, f"RSS grew from {rss:.0f} to {rss_after:.0f} MiB"


def test_dropped_agents_end_their_threads_when_collected() -> None:
    async def main() -> None:
        for _ in range(300):
            await _agent(close=False)

    asyncio.run(main())
    gc.collect()
    assert _settles(lambda: _tool_threads() == 0), f"{_tool_threads()} tool threads left"


def test_executor_and_toolset_close_as_context_managers() -> None:
    ran_on: list[str] = []

    @tool
    def lookup(key: str) -> str:
        """Look up.

        Args:
            key: the key.
        """
        ran_on.append(threading.current_thread().name)
        return key

    async def main() -> None:
        async with ToolSet([lookup]) as toolset, ToolExecutor(tools=toolset) as executor:
            state = StateManager(AgentState, {"actions": [
                {"id": "a", "name": "lookup", "arguments": {"key": "k"}}]})
            result = await ReactiveRunner(executor, state).run(timeout=60)
            assert result.ok
            assert ran_on and ran_on[0].startswith("jianmu-tool")  # a shared tool thread
        assert _settles(lambda: _tool_threads() == 0)  # closed, then idle: none is left

    asyncio.run(main())
