"""py_trees' semantics with async leaves: seeded random trees under `ReactiveRunner` against the
same trees with synchronous leaves under py_trees' own loop (`tests/runtime/_async_diff.py`
says how time maps and what is compared), and the runner's sleeps."""

from __future__ import annotations

import asyncio

import py_trees
import pytest
from py_trees.common import Status

import jianmu.runtime.async_node as async_node_module
from jianmu.runtime.async_node import AsyncNode
from jianmu.runtime.runner import ReactiveRunner, RunStatus
from tests.runtime._async_diff import check, check_counted

SEEDS = range(500)


def test_async_leaves_tick_as_pytrees_leaves_do() -> None:
    """Same leaf starts, ends and cancellations, tick for tick, and the same final status;
    cancels reach the coroutines in the tick, no spin, no task left, Timeouts' deadlines kept."""
    problems = [(seed, problem) for seed in SEEDS if (problem := check(seed)) is not None]
    assert not problems, f"{len(problems)} trees differ, first: {problems[:3]}"


def test_a_run_cut_by_max_ticks_ticks_as_pytrees_loop_does() -> None:
    """With no outside event (leaves end at once or after polls), the runner's ticks are
    py_trees' one for one, up to ``max_ticks`` or to where it rests."""
    problems = [(seed, problem) for seed in range(300)
                if (problem := check_counted(seed)) is not None]
    assert not problems, f"{len(problems)} trees differ, first: {problems[:3]}"


def test_the_harness_sees_a_missed_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner that forgets to tick an ended child again is caught (the comparison bites)."""
    monkeypatch.setattr(async_node_module, "ticked_again", lambda node: False)
    assert any(check(seed) is not None for seed in range(60))


class _Waits(AsyncNode):
    """Awaits ``event``; notes the CancelledError."""

    def __init__(self, event: asyncio.Event) -> None:
        super().__init__("waits")
        self.event = event
        self.cancelled = False

    async def update_async(self) -> Status:
        try:
            await self.event.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return Status.SUCCESS


def _wrapped(leaf: AsyncNode) -> py_trees.behaviour.Behaviour:
    d = py_trees.decorators
    inner = py_trees.composites.Sequence("seq", memory=False, children=[d.Count("count", leaf)])
    return d.Retry("retry", d.Inverter("not", d.Inverter("not2", inner)), num_failures=2)


@pytest.mark.anyio
async def test_a_tree_waiting_on_an_async_leaf_ticks_twice() -> None:
    """Start and end, whatever decorators wrap the leaf: no tick while it waits."""
    event = asyncio.Event()
    runner = ReactiveRunner(_wrapped(_Waits(event)))
    asyncio.get_running_loop().call_later(0.05, event.set)
    result = await runner.run()
    assert (result.status, result.ticks) == (RunStatus.SUCCESS, 2)


@pytest.mark.anyio
async def test_a_timeout_deadline_wakes_the_runner_and_cancels_the_child() -> None:
    """No tick till the deadline; then the child's coroutine sees its CancelledError."""
    leaf = _Waits(asyncio.Event())  # never set
    root = py_trees.decorators.Timeout("timeout", _wrapped(leaf), duration=0.05)
    result = await ReactiveRunner(root).run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert leaf.cancelled
    assert result.ticks <= 3  # start, the deadline (one more if the loop's timer ran early)
