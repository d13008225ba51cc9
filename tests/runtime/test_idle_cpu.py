"""Nothing spins: a run that waits on a 1 s async leaf, or on a `Timeout`'s 1 s deadline, costs
the process well under a tenth of a core over the wait (its CPU time, not the wall's)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import py_trees
import pytest
from py_trees.behaviour import Behaviour
from py_trees.common import ParallelPolicy, Status

from jianmu.runtime import AsyncNode
from jianmu.runtime.runner import ReactiveRunner, RunStatus

pytestmark = pytest.mark.anyio

CPU_SHARE = 0.10
"""Of one core, over the wait: generous (a run at rest costs about nothing)."""


class _Sleeps(AsyncNode):
    """Sleeps ``seconds`` (for ever when None); notes the cancel."""

    def __init__(self, name: str, seconds: float | None) -> None:
        super().__init__(name)
        self.seconds = seconds
        self.cancelled = False

    async def update_async(self) -> Status:
        try:
            if self.seconds is None:
                await asyncio.Event().wait()
            await asyncio.sleep(self.seconds or 0)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return Status.SUCCESS


def _bare(leaf: Behaviour) -> Behaviour:
    return leaf


def _decorated(leaf: Behaviour) -> Behaviour:
    d = py_trees.decorators
    return d.Retry("retry", d.Repeat("once", d.Timeout("late", d.Inverter("not", d.Inverter(
        "not not", d.FailureIsRunning("until", leaf))), duration=30), num_success=1), 2)


def _beside(leaf: Behaviour) -> Behaviour:
    done = py_trees.behaviours.Success("done")
    return py_trees.composites.Parallel(
        "both", policy=ParallelPolicy.SuccessOnAll(synchronise=True), children=[done, leaf])


def _re_entering(leaf: Behaviour) -> Behaviour:
    """py_trees' own leaf re-entered before the action: polled, as py_trees' loop ticks it."""
    return py_trees.composites.Selector("first", memory=False, children=[
        py_trees.behaviours.Failure("no"), leaf])


async def _measured(root: Behaviour) -> tuple[float, float, int, RunStatus]:
    runner = ReactiveRunner(root)
    cpu, wall = time.process_time(), time.monotonic()
    result = await runner.run()
    return time.process_time() - cpu, time.monotonic() - wall, result.ticks, result.status


@pytest.mark.parametrize("shape", [_bare, _decorated, _beside, _re_entering],
                         ids=["bare", "decorated", "beside", "re-entering"])
async def test_a_run_waiting_on_a_one_second_leaf_leaves_the_core_idle(
        shape: Callable[[Behaviour], Behaviour]) -> None:
    """Started, then woken by the leaf's end: a handful of ticks (polls of a re-entered
    py_trees leaf at the poll interval), far under a tenth of a core."""
    leaf = _Sleeps("sleep", 1.0)
    cpu, wall, ticks, status = await _measured(shape(leaf))
    assert status is RunStatus.SUCCESS and wall >= 1.0
    assert cpu < CPU_SHARE * wall, f"{cpu:.3f} s of CPU over {wall:.3f} s, {ticks} ticks"
    if shape is not _re_entering:
        assert ticks <= 3


async def test_a_run_waiting_on_a_timeouts_deadline_leaves_the_core_idle() -> None:
    """A Timeout of 1 s over a leaf that waits for ever: the runner sleeps to the deadline,
    wakes, the tick cancels the leaf (its coroutine sees the CancelledError), the run fails."""
    leaf = _Sleeps("never", None)
    root = py_trees.decorators.Timeout("deadline", leaf, duration=1.0)
    cpu, wall, ticks, status = await _measured(root)
    assert status is RunStatus.FAILURE and leaf.cancelled
    assert 1.0 <= wall < 10.0
    assert cpu < CPU_SHARE * wall, f"{cpu:.3f} s of CPU over {wall:.3f} s, {ticks} ticks"
    assert ticks <= 3


async def test_a_cycle_through_a_finished_oneshot_rests() -> None:
    """Condition(FAILURE) over Repeat(2) over a OneShot that has succeeded: each tick the
    Repeat counts the OneShot's stored SUCCESS once, in turn RUNNING and SUCCESS, the OneShot's
    child unvisited, for ever (py_trees' loop ticks it so at its rate). The tick that left a
    node unvisited looked like one two ticks back and was not trusted: the runner ticked at
    the loop's speed, a full core. Every node's status compared too, it rests."""
    d = py_trees.decorators
    leaf = _Sleeps("once", 0.01)
    root = d.Condition("until it fails", d.Repeat("twice", d.OneShot(
        "once", leaf, policy=py_trees.common.OneShotPolicy.ON_SUCCESSFUL_COMPLETION),
        num_success=2), Status.FAILURE)
    runner = ReactiveRunner(root)
    cpu = time.process_time()
    result = await runner.run(timeout=0.5)
    assert result.status is RunStatus.TIMEOUT
    assert result.ticks < 20, result.ticks
    assert time.process_time() - cpu < CPU_SHARE * 0.5


async def test_a_leaf_a_parallel_re_enters_under_count_and_running_is_success_rests() -> None:
    """A parallel that does not synchronise re-enters RunningIsSuccess over Count over a leaf
    at every tick (started, stopped at once) beside a 0.5 s leaf. The Count tallies the stop
    after RunningIsSuccess quoted its text, so the quote was a tick behind the tally that the
    runner strips from feedback: every tick looked new, and it ticked at the loop's speed."""
    d = py_trees.decorators
    root = py_trees.composites.Parallel(
        "both", policy=ParallelPolicy.SuccessOnAll(synchronise=False), children=[
            d.RunningIsSuccess("ok", d.Count("count", _Sleeps("restarted", 5.0))),
            _Sleeps("long", 0.5)])
    cpu, wall, ticks, status = await _measured(root)
    assert status is RunStatus.SUCCESS
    assert ticks < 0.5 / 0.05 * 3, ticks  # polled (the leaf re-entered), not spun
    assert cpu < CPU_SHARE * wall, f"{cpu:.3f} s of CPU over {wall:.3f} s, {ticks} ticks"


async def test_a_sequence_re_entering_an_instant_repeat_before_an_action_is_polled() -> None:
    """A sequence without memory over Repeat(3) of an instant leaf and a memory selector of
    actions: the Repeat ends on its third tick, the action starts, the next tick re-enters
    the Repeat and stops the action, for ever (py_trees' loop goes round so at its rate).
    The selector's later children are never visited, so the cycle was not trusted and the
    runner went round at the loop's speed; found through every node's status, it is polled."""
    d = py_trees.decorators
    root = py_trees.composites.Sequence("root", memory=False, children=[
        d.Repeat("three", d.FailureIsSuccess("ok", py_trees.behaviours.Failure("no")), 3),
        py_trees.composites.Selector("actions", memory=True, children=[
            _Sleeps("action", 5.0), _Sleeps("other", 5.0)])])
    runner = ReactiveRunner(root)
    cpu = time.process_time()
    result = await runner.run(timeout=0.5)
    assert result.status is RunStatus.TIMEOUT
    assert result.ticks < 150, result.ticks  # a cycle or two a poll, not thousands of ticks
    assert time.process_time() - cpu < CPU_SHARE * 0.5


class _Unavailable(AsyncNode):
    """A check whose service is down: it raises with a new request id every time."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.asked = 0

    async def update_async(self) -> Status:
        self.asked += 1
        raise ConnectionError(f"status service unavailable (request id {self.asked})")


async def test_a_check_failing_with_a_new_error_text_each_time_is_polled_not_spun() -> None:
    """A selector without memory re-enters the check before a running 0.5 s action. The
    runtime writes the error's text as the check's feedback: a new request id in it made
    every tick look like a change, and the runner went round at the loop's speed (~70% of a
    core, thousands of ticks). The text is the runtime's, not the node's: it is polled, as
    with a fixed message."""
    check = _Unavailable("emergency?")
    root = py_trees.composites.Selector("priorities", memory=False, children=[
        check, _Sleeps("work", 0.5)])
    cpu, wall, ticks, status = await _measured(root)
    assert status is RunStatus.SUCCESS
    assert ticks < 0.5 / 0.05 * 3, ticks  # polled, not spun
    assert check.asked == ticks  # re-entered at every tick, as py_trees' loop does
    assert cpu < CPU_SHARE * wall, f"{cpu:.3f} s of CPU over {wall:.3f} s, {ticks} ticks"
