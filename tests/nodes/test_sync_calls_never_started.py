"""A sync call stopped before a worker thread took it never ran: it runs again, and counts once.

Found by the scenario fuzz (`tests/runtime/test_scenario_fuzz.py`): a write call in a worker
thread that the run's stop (a cancel, the timeout, a stream left) caught while it still waited
for a thread was recorded as "may have done its work", as one a thread was running is. Its
work was never done and never would be (an approved payment lost), the model was told it may
have been, and ``usage.tool_calls`` counted an execution that did not happen.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, ToolExecutor, tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

THREADS = 8  # a runner's sync calls at once (`ToolRunner.max_workers`): the ninth waits


async def test_a_write_call_that_waited_for_a_thread_when_the_run_stopped_runs_later() -> None:
    release, lock = threading.Event(), threading.Lock()
    paid: list[int] = []
    runner: ReactiveRunner | None = None

    @tool(category="write", parallel_safe=True)
    def pay(n: int) -> str:
        """Pay (every thread but one waits).

        Args:
            n: which payment.
        """
        with lock:
            paid.append(n)
            if len(paid) == THREADS:  # every thread is busy: the last call still waits
                assert runner is not None
                runner.cancel()
        if n < THREADS:
            assert release.wait(30)
        return f"paid {n}"

    calls = [{"id": f"p{n}", "name": "pay", "arguments": {"n": n}} for n in range(THREADS + 1)]
    state = StateManager(AgentState, {"actions": calls})
    runner = ReactiveRunner(ToolExecutor(tools=[pay]), state)
    first = await runner.run(timeout=30)
    release.set()
    assert first.status is RunStatus.CANCELLED
    assert sorted(paid) == list(range(THREADS))  # the last one never started
    second = await runner.run(timeout=30)
    assert second.ok, second.error
    assert sorted(paid) == list(range(THREADS + 1))  # ...and it ran once the run went on
    said = {m.tool_call_id: m.content for m in state.get("messages") if m.role == "tool"}
    assert said[f"p{THREADS}"] == f"paid {THREADS}"
    assert all("may or may not have taken effect" in said[f"p{n}"] for n in range(THREADS))
    assert state.get("usage").tool_calls == THREADS + 1


async def test_a_call_that_timed_out_waiting_for_a_thread_is_not_counted_as_executed() -> None:
    """Told it never ran (no thread took it before its timeout), it is no executed call."""
    release, lock = threading.Event(), threading.Lock()
    started: list[str] = []

    @tool(category="write", parallel_safe=True)
    def slow(key: str) -> str:
        """Hold a thread until the test ends.

        Args:
            key: which.
        """
        with lock:
            started.append(key)
        release.wait(30)
        return f"slow {key}"

    @tool(category="write", parallel_safe=True, timeout=0.3)
    def pay(key: str) -> str:
        """Pay.

        Args:
            key: which.
        """
        started.append(key)
        return f"paid {key}"

    calls = [{"id": f"s{n}", "name": "slow", "arguments": {"key": f"s{n}"}}
             for n in range(THREADS)] + [{"id": "p", "name": "pay", "arguments": {"key": "p"}}]
    state = StateManager(AgentState, {"actions": calls})
    runner = ReactiveRunner(ToolExecutor(tools=[slow, pay]), state)
    failed = asyncio.Event()
    runner.ctx.events.subscribe("tool.call.failed", lambda e: e.fields.get("call_id") == "p"
                                and failed.set())
    task = asyncio.ensure_future(runner.run(timeout=60))
    try:
        await asyncio.wait_for(failed.wait(), 30)  # the waiting call has timed out
    finally:
        release.set()
    assert (await task).ok
    said = {m.tool_call_id: m.content for m in state.get("messages") if m.role == "tool"}
    assert "never ran" in said["p"] and "p" not in started
    assert state.get("usage").tool_calls == THREADS == len(started)
