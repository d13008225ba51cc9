"""Red team, a node entered again while the task a stop cancelled is still unwinding: a write
that began never runs twice.

- ``Retry(Timeout(executor))``: the Timeout cancels the calls, and the Retry enters the node
  again at once, while the cancelled batch still records its calls (or a tool's ``finally``
  still runs). The node started a second task beside the first: every payment ran again, and
  the first task's stop was read as the tool's own cancel.
- A run whose timeout left a tool's clean-up running (``run.cleanup_pending``): the next
  ``run()`` entered the node again beside it and made the write again.

The node's next task now waits for the cancelled one to unwind (`after_unwound`), so it finds
the calls recorded as maybe done and runs none of them again.
"""

from __future__ import annotations

import asyncio
import collections
import threading

import py_trees
import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, ToolExecutor, tool
from jianmu.config import AppConfig
from jianmu.nodes import ToolNode

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

MAYBE = "may or may not have taken effect"


def _said(state: StateManager) -> dict[str, list[str]]:
    said: dict[str, list[str]] = collections.defaultdict(list)
    for message in state.get("messages") or ():
        if message.role == "tool":
            said[message.tool_call_id].append(message.content or "")
    return said


async def test_a_retried_timeout_over_parallel_sync_writes_runs_each_once() -> None:
    paid: collections.Counter[str] = collections.Counter()
    release, lock = threading.Event(), threading.Lock()

    @tool(category="write", parallel_safe=True)
    def pay(key: str) -> str:
        """Pay (until the test ends).

        Args:
            key: which payment.
        """
        with lock:
            paid[key] += 1
        release.wait(60)
        return f"paid {key}"

    calls = [{"id": k, "name": "pay", "arguments": {"key": k}} for k in ("a", "b", "c")]
    state = StateManager(AgentState, {"actions": calls})
    tree = py_trees.decorators.Retry("retry", py_trees.decorators.Timeout(
        "timeout", ToolExecutor(tools=[pay]), duration=0.05), num_failures=3)
    try:
        result = await ReactiveRunner(tree, state).run(timeout=60)
    finally:
        release.set()
    assert result.ok, result.error
    assert paid == {"a": 1, "b": 1, "c": 1}
    said = _said(state)
    assert all(len(said[k]) == 1 and MAYBE in said[k][0] for k in ("a", "b", "c")), said
    assert state.get("usage").tool_calls == 3


async def test_a_retried_timeout_over_a_write_with_async_clean_up_runs_it_once() -> None:
    paid: list[str] = []
    never = asyncio.Event()

    @tool(category="write")
    async def pay(key: str = "k") -> str:
        """Pay.

        Args:
            key: which payment.
        """
        paid.append(key)
        try:
            await never.wait()
        finally:  # a clean-up that takes turns of the loop (a rollback, a polite close)
            for _ in range(3):
                await asyncio.sleep(0)
        return "paid"

    state = StateManager(AgentState)
    node = ToolNode("pay", pay, input_key=None, output_key="receipt")
    tree = py_trees.decorators.Retry("retry", py_trees.decorators.Timeout(
        "timeout", node, duration=0.05), num_failures=2)  # one more entry: the retry
    result = await ReactiveRunner(tree, state).run(timeout=60)
    assert paid == ["k"]  # the retry finds the write in doubt, and says so
    assert not result.ok and "unknown" in node.feedback_message, node.feedback_message


async def test_the_next_run_waits_for_a_clean_up_the_last_ones_timeout_left() -> None:
    paid: list[str] = []
    released = asyncio.Event()

    @tool(category="write")
    async def pay(key: str) -> str:
        """Pay.

        Args:
            key: which payment.
        """
        paid.append(key)
        try:
            await asyncio.Event().wait()
        finally:  # its clean-up outlasts the run's timeout and grace
            await released.wait()
        return f"paid {key}"

    state = StateManager(AgentState, {"actions": [
        {"id": "k1", "name": "pay", "arguments": {"key": "k1"}}]})
    runner = ReactiveRunner(ToolExecutor(tools=[pay]), state,
                            config=AppConfig(runtime={"cleanup_grace": 0.01}))
    pending: list[str] = []
    runner.ctx.events.subscribe("run.cleanup_pending", lambda e: pending.append(e.name))
    first = await runner.run(timeout=0.2)
    assert first.status.value == "timeout" and pending == ["run.cleanup_pending"]
    ticks = runner.ticks
    second = asyncio.create_task(runner.run(timeout=60))
    while runner.ticks == ticks and not second.done():  # it entered the node again
        await asyncio.sleep(0.01)
    released.set()
    result = await second
    assert result.ok, result.error
    assert paid == ["k1"]
    said = _said(state)
    assert len(said["k1"]) == 1 and MAYBE in said["k1"][0], said
