"""A tree that goes round through a task is polled, not ticked at the loop's speed.

A selector without memory re-enters its check before a running action; a check whose task
ends after one turn of the loop is RUNNING for that turn and pre-empts the action, then fails,
and the action starts again. py_trees' loop goes round so at its rate; the runner went round
at the loop's speed, a full core (about 28,000 ticks a second). Each round now starts and
stops the same leaves in the same order, and the runner polls between rounds.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable

import py_trees
import pytest
from py_trees.common import Status
from pydantic import BaseModel

import jianmu.runtime.async_node as async_node_module
from jianmu import ReactiveRunner, StateManager
from jianmu.config import AppConfig
from jianmu.runtime import AsyncNode
from jianmu.runtime.async_node import TickPlan
from jianmu.runtime.runner import RunStatus

pytestmark = pytest.mark.anyio

POLL = AppConfig.model_validate({"runtime": {"poll_interval": 0.001}})
TICKS = 60


class _S(BaseModel):
    x: int = 0


class _Check(AsyncNode):
    """Answers ``answer`` after one turn of the loop."""

    def __init__(self, name: str, answer: Status, log: list[str]) -> None:
        super().__init__(name)
        self.answer, self.log = answer, log

    async def update_async(self) -> Status:
        await asyncio.sleep(0)
        self.log.append(f"{self.name} {self.answer.name}")
        return self.answer


class _Action(AsyncNode):
    """Waits for an event nobody sets; notes its starts and cancels."""

    def __init__(self, log: list[str], never: asyncio.Event) -> None:
        super().__init__("action")
        self.log, self.never = log, never

    async def update_async(self) -> Status:
        self.log.append("action start")
        try:
            await self.never.wait()
        except asyncio.CancelledError:
            self.log.append("action cancel")
            raise
        return Status.SUCCESS


def _selector(log: list[str], never: asyncio.Event) -> py_trees.behaviour.Behaviour:
    return py_trees.composites.Selector("reactive", memory=False, children=[
        _Check("check", Status.FAILURE, log), _Action(log, never)])


def _sequence(log: list[str], never: asyncio.Event) -> py_trees.behaviour.Behaviour:
    return py_trees.composites.Sequence("reactive", memory=False, children=[
        _Check("check", Status.SUCCESS, log), _Action(log, never)])


def _inverted(log: list[str], never: asyncio.Event) -> py_trees.behaviour.Behaviour:
    check = py_trees.decorators.Inverter("not", _Check("check", Status.SUCCESS, log))
    return py_trees.composites.Selector("reactive", memory=False,
                                        children=[check, _Action(log, never)])


def _parallel(log: list[str], never: asyncio.Event) -> py_trees.behaviour.Behaviour:
    policy = py_trees.common.ParallelPolicy.SuccessOnAll(synchronise=False)
    return py_trees.composites.Parallel("both", policy=policy, children=[
        _Check("check", Status.SUCCESS, log), _Action(log, never)])


@pytest.fixture(autouse=True)
def _rounds_take_no_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ticker's clock stands still: a round slower than the poll interval is no spin and
    is ticked at once, and a busy machine must not make these rounds look slow."""
    monkeypatch.setattr(async_node_module, "time", types.SimpleNamespace(monotonic=lambda: 0.0))


async def _run(build: Callable[[list[str], asyncio.Event], py_trees.behaviour.Behaviour],
               ) -> tuple[list[TickPlan], list[str], RunStatus]:
    log: list[str] = []
    runner = ReactiveRunner(build(log, asyncio.Event()), StateManager(_S, {}), config=POLL)
    plans: list[TickPlan] = []
    tick = runner._ticker.tick

    def noted(root: py_trees.behaviour.Behaviour, woken: object) -> TickPlan:
        plan = tick(root, woken)  # type: ignore[arg-type]
        plans.append(plan)
        return plan

    runner._ticker.tick = noted  # type: ignore[method-assign]
    result = await runner.run(max_ticks=TICKS)
    return plans, log, result.status


@pytest.mark.parametrize("build", [_selector, _sequence, _inverted],
                         ids=["selector", "sequence", "inverter"])
async def test_a_check_that_pre_empts_its_action_every_round_is_polled(
        build: Callable[[list[str], asyncio.Event], py_trees.behaviour.Behaviour]) -> None:
    """The first round is ticked at once; once the tree is back where it was before the
    check's task ended, the check is re-entered at the poll interval, never at once."""
    plans, log, status = await _run(build)
    assert status is RunStatus.FAILURE  # max_ticks: the action never ends, as in py_trees
    # ticks: the check started, the action started (at once: the check is re-entered), the
    # check again, then back where it was: from there, every other tick waits for the task,
    # and the one after it for the poll
    assert [plan.again for plan in plans[:3]] == [False, True, False]
    assert not any(plan.again for plan in plans[3:])
    assert all(plan.poll for plan in plans[3::2])
    # py_trees' order, round after round: the check, the action started, then pre-empted
    rounds = log[:12]
    assert rounds[0].startswith("check") and rounds[1] == "action start"
    assert rounds == [rounds[0], "action start", "action cancel"] * 4


async def test_a_check_polled_beside_a_running_action_is_polled() -> None:
    """A parallel that does not synchronise re-enters its ended check while the action runs:
    the check runs again at the poll interval, the action is left running."""
    plans, log, status = await _run(_parallel)
    assert status is RunStatus.FAILURE
    assert not any(plan.again for plan in plans[3:])
    assert all(plan.poll for plan in plans[3::2])
    assert log.count("action start") == 1 and "action cancel" in log[-1:]
    assert log.count("check SUCCESS") >= TICKS // 2 - 2


async def test_rounds_that_move_on_are_ticked_at_once() -> None:
    """A Repeat over a sequence of such leaves goes round by itself (the Repeat between runs):
    every round is ticked at once, none waits for a poll."""
    log: list[str] = []
    body = py_trees.composites.Sequence("body", memory=True, children=[
        _Check("a", Status.SUCCESS, log), _Check("b", Status.SUCCESS, log)])
    root = py_trees.decorators.Repeat("repeat", body, num_success=20)
    slow = AppConfig.model_validate({"runtime": {"poll_interval": 600}})
    runner = ReactiveRunner(root, StateManager(_S, {}), config=slow)
    result = await runner.run(timeout=300)  # a poll would wait 10 minutes
    assert result.status is RunStatus.SUCCESS
    assert log == ["a SUCCESS", "b SUCCESS"] * 20


def _retried(log: list[str], never: asyncio.Event) -> py_trees.behaviour.Behaviour:
    retry = py_trees.decorators.Retry("retry", _Check("check", Status.FAILURE, log), 2)
    return py_trees.composites.Selector("reactive", memory=False,
                                        children=[retry, _Action(log, never)])


def _repeated(log: list[str], never: asyncio.Event) -> py_trees.behaviour.Behaviour:
    twice = py_trees.decorators.Repeat("twice", _Check("check", Status.SUCCESS, log), 2)
    return py_trees.composites.Sequence("reactive", memory=False,
                                        children=[twice, _Action(log, never)])


def _unvisited(log: list[str], never: asyncio.Event) -> py_trees.behaviour.Behaviour:
    checks = py_trees.composites.Sequence("checks", memory=True, children=[
        _Check("a", Status.SUCCESS, log), _Check("b", Status.FAILURE, log)])
    return py_trees.composites.Selector("reactive", memory=False,
                                        children=[checks, _Action(log, never)])


def _pre_empted(log: list[str], never: asyncio.Event) -> py_trees.behaviour.Behaviour:
    checks = [_Check("a", Status.SUCCESS, log), _Check("b", Status.SUCCESS, log)]
    return py_trees.composites.Sequence("reactive", memory=False,
                                        children=[*checks, _Action(log, never)])


def _wait_until(log: list[str], never: asyncio.Event) -> py_trees.behaviour.Behaviour:
    until = py_trees.decorators.FailureIsRunning("until", _Check("check", Status.FAILURE, log))
    return py_trees.composites.Sequence("wait", memory=True,
                                        children=[until, _Action(log, never)])


@pytest.mark.parametrize("build", [_retried, _repeated, _unvisited, _pre_empted, _wait_until],
                         ids=["retry", "repeat", "unvisited", "pre-empted", "wait-until"])
async def test_rounds_through_counters_and_unvisited_nodes_are_polled(
        build: Callable[[list[str], asyncio.Event], py_trees.behaviour.Behaviour]) -> None:
    """A round whose counters come round to the same (a Retry or a Repeat re-entered every
    round), that leaves a node unvisited (a check after a memory sequence's first, an action
    pre-empted before it starts), or that a decorator turns RUNNING ("wait until") is polled
    once back where it was: it went round at the loop's speed, a full core."""
    plans, _, status = await _run(build)
    assert status is RunStatus.FAILURE  # max_ticks
    # the first round or two at once, then none: every tick waits for a task or the poll
    assert sum(plan.again for plan in plans) <= 8
    assert any(plan.poll for plan in plans)


@pytest.mark.parametrize("build", [_pre_empted, _selector, _parallel],
                         ids=["pre-empted", "selector", "parallel"])
async def test_a_resting_round_waits_for_the_poll_not_for_the_task_it_started(
        build: Callable[[list[str], asyncio.Event], py_trees.behaviour.Behaviour]) -> None:
    """The tick that finds the round may start a task that ends after a turn of the loop (the
    second check, entered as the first passed): its end waking the runner took the tree round
    again at once, poll or no poll. It waits for the poll's tick: a round per poll."""
    log: list[str] = []
    runner = ReactiveRunner(build(log, asyncio.Event()), StateManager(_S, {}), config=POLL)
    waiter = runner._wait_for_wake
    polls = 0

    async def wait_for_wake(wait: float | None) -> bool:
        nonlocal polls
        woken = await waiter(wait)
        polls += not woken
        return woken

    runner._wait_for_wake = wait_for_wake  # type: ignore[method-assign,assignment]
    result = await runner.run(max_ticks=TICKS)
    assert result.status is RunStatus.FAILURE
    # every round but the first two: one tick after the poll ran out, one after its task
    assert polls >= TICKS // 2 - 4
