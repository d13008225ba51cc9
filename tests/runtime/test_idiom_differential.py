"""py_trees' idioms, every stock leaf and decorator, and runs that end early, under
`ReactiveRunner` against py_trees' own loop (`tests/runtime/_idiom_diff.py` says what is
compared: every ``initialise``, ``update`` and ``terminate`` with its statuses, the statuses,
the blackboard; in time, every start and end with its time)."""

from __future__ import annotations

import asyncio
import operator
from typing import Any

import py_trees
import pytest
from py_trees.blackboard import Blackboard
from py_trees.common import ComparisonExpression, Status

import jianmu.runtime.failures as failures_module
from jianmu.runtime.async_node import AsyncNode
from jianmu.runtime.runner import ReactiveRunner, RunStatus
from tests.runtime import _idiom_diff, _timed_diff
from tests.support.virtual_time import VirtualLoop

SEEDS = range(400)


def test_idioms_stock_leaves_and_interrupted_runs_go_as_pytrees_loop_goes() -> None:
    """Random trees of idioms, stock leaves, decorators and parallels, over leaves that run N
    ticks or hang; the first run ends by itself, by ``cancel()``, its task cancelled,
    ``max_ticks`` or its timeout (after a tick, or at a time, at rest too); then the same
    runner runs the tree again (after an end, once new input came): the same log as
    py_trees' loop and ``stop(INVALID)``, and each stopped coroutine saw its cancel."""
    problems = [p for seed in SEEDS if (p := _idiom_diff.first_difference(seed)) is not None]
    assert not problems, f"{len(problems)} trees differ, first: {problems[:2]}"


def test_the_idiom_harness_sees_a_stop_in_another_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner that stopped a tree leaves first, not as py_trees' ``stop`` does, is caught."""
    stop = failures_module.stop_running_nodes

    def leaves_first(root: Any) -> Any:
        for node in reversed(list(root.iterate())):
            if node.status is Status.RUNNING and not node.children:
                node.stop(Status.INVALID)
        return stop(root)

    monkeypatch.setattr(failures_module, "stop_running_nodes", leaves_first)
    assert sum(_idiom_diff.first_difference(seed) is not None for seed in range(60)) >= 5


def test_idioms_and_stock_leaves_over_sleeping_leaves_match_pytrees_loop_in_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same random trees over leaves that sleep (some kept py_trees leaves, polled),
    `Timer`s on the same clock: every start and end at the same time, some runs cancelled
    at a horizon and run again. (Leaves that count ticks are compared by ticks above: the
    runner counts its polls, not a loop's ticks.)"""
    monkeypatch.setattr(py_trees.timers, "time", _idiom_diff.WORLD_CLOCK)
    found = {}
    for seed in range(150):
        plain = _timed_diff.plain_leaves(seed, 0.3 if seed % 3 == 0 else 0.0)
        found[seed] = _timed_diff.compare_trees(
            _idiom_diff.timed_tree(seed), 2.9937, seed=seed, plain=plain,
            rerun=0.9 if seed % 2 == 0 else None)
    problems = [(s, p) for s, p in found.items() if p is not None and p != _timed_diff.ROUND]
    assert not problems, f"{len(problems)} trees differ, first: {problems[:2]}"
    assert sum(p == _timed_diff.ROUND for p in found.values()) < 40  # most are compared


# -- a status kept by a stopped run is that run's alone ------------------------------------------
class _Work(AsyncNode):
    """Work that ends after a second; the first time, its run is cancelled as it ends."""

    def __init__(self, log: list[Any]) -> None:
        super().__init__("work")
        self.log = log
        self.done = 0

    def initialise(self) -> None:
        self.log.append(("init", self.name))
        super().initialise()

    async def update_async(self) -> Status:
        await asyncio.sleep(1.0)
        self.done += 1
        if self.done == 1:
            self.ctx.runner.cancel()  # a person presses Cancel just as the work ends
        return Status.SUCCESS

    def terminate(self, new_status: Status) -> None:
        self.log.append(("term", self.name, self.status.name, new_status.name))
        super().terminate(new_status)


def _skip_or_work(log: list[Any]) -> tuple[py_trees.behaviour.Behaviour, _Work]:
    work = _Work(log)
    skip = py_trees.behaviours.CheckBlackboardVariableValue(
        "skip?", ComparisonExpression("/skip", True, operator.eq))
    return py_trees.composites.Selector("root", memory=False, children=[skip, work]), work


@pytest.mark.parametrize("reached", ["at once", "two runs later"])
def test_a_status_kept_by_a_cancelled_run_is_not_read_by_another_runners_run(
        reached: str) -> None:
    """A run cancelled as a leaf's work ended keeps that end for the run going on; a new
    runner's run of the same tree (py_trees' loop ticking it again) read it instead of doing
    the work, even after a run that never reached the leaf: the leaf started and ended in
    one tick, its work never done again. Now the new run does it, as py_trees' loop does."""
    Blackboard.clear()
    log: list[Any] = []
    root, work = _skip_or_work(log)

    async def runs() -> list[RunStatus]:
        Blackboard.set("/skip", False)
        ended = [(await ReactiveRunner(root).run(timeout=60)).status]
        if reached == "two runs later":
            Blackboard.set("/skip", True)  # this run does not reach the leaf
            ended.append((await ReactiveRunner(root).run(timeout=60)).status)
            Blackboard.set("/skip", False)
        ended.append((await ReactiveRunner(root).run(timeout=60)).status)
        return ended

    with asyncio.Runner(loop_factory=VirtualLoop) as loop:
        ended = loop.run(runs())
    assert ended[0] is RunStatus.CANCELLED and ended[-1] is RunStatus.SUCCESS
    assert work.done == 2  # done anew, as py_trees' loop does it
    assert log[-2:] == [("init", "work"), ("term", "work", "RUNNING", "SUCCESS")]


def test_a_status_kept_by_a_cancelled_run_serves_the_same_runners_next_run() -> None:
    """The run going on (the same runner's next run) still reads the kept end: the work is
    not done twice."""
    Blackboard.clear()
    Blackboard.set("/skip", False)
    log: list[Any] = []
    root, work = _skip_or_work(log)
    runner = ReactiveRunner(root)

    async def runs() -> list[RunStatus]:
        return [(await runner.run(timeout=60)).status, (await runner.run(timeout=60)).status]

    with asyncio.Runner(loop_factory=VirtualLoop) as loop:
        assert loop.run(runs()) == [RunStatus.CANCELLED, RunStatus.SUCCESS]
    assert work.done == 1
