"""A tick's own state writes do not wake the runner at once for ever: a node that writes the
state at every tick (a check that records itself) made the runner tick again at once, at every
turn of the loop, a full core busy while the tree waited for an async leaf. What the writes
change is still seen: the tick after them comes at once while the tree changes; at rest, the
tree is polled (``runtime.poll_interval``), as py_trees' loop ticks at its rate."""

from __future__ import annotations

import asyncio

import pytest
from py_trees.behaviour import Behaviour
from py_trees.common import ParallelPolicy, Status
from py_trees.composites import Parallel, Selector
from pydantic import BaseModel

from jianmu import AppConfig, ReactiveRunner, StateManager
from jianmu.runtime.async_node import AsyncNode, RuntimeNode

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LOOP_TURNS = 200  # turns of the event loop the async leaf waits: a busy runner ticks at each
NO_POLL = AppConfig.model_validate({"runtime": {"poll_interval": 3600}})  # no poll in a test


class Checks(BaseModel):
    checks: int = 0
    done: bool = False


class Recorder(RuntimeNode, Behaviour):
    """Running for ever, and writes the state at every tick: how many times it was checked."""

    def __init__(self) -> None:
        super().__init__(name="recorder")

    def update(self) -> Status:
        self.state.update({"checks": (self.state.get("checks") or 0) + 1})
        return Status.RUNNING


class Waiter(AsyncNode):
    """Ends once the loop has turned ``LOOP_TURNS`` times (no clock involved)."""

    def __init__(self) -> None:
        super().__init__(name="waiter")

    async def update_async(self) -> Status:
        for _ in range(LOOP_TURNS):
            await asyncio.sleep(0)
        return Status.SUCCESS


class Done(RuntimeNode, Behaviour):
    """SUCCESS once ``done`` is set in the state."""

    def __init__(self) -> None:
        super().__init__(name="done?")

    def update(self) -> Status:
        return Status.SUCCESS if self.state.get("done") else Status.FAILURE


class Finisher(RuntimeNode, Behaviour):
    """Sets ``done`` and keeps running: only the next tick, through ``Done``, ends the tree."""

    def __init__(self) -> None:
        super().__init__(name="finish")

    def update(self) -> Status:
        self.state.update({"done": True})
        return Status.RUNNING


async def test_a_node_that_writes_at_every_tick_does_not_make_the_runner_spin() -> None:
    root = Parallel("both", policy=ParallelPolicy.SuccessOnOne(),
                    children=[Waiter(), Recorder()])
    state = StateManager(Checks)
    result = await ReactiveRunner(root, state, config=NO_POLL).run(timeout=30)
    assert result.ok
    # the start, the tick that sees the tree at rest, the waiter's end: not one per loop turn
    assert result.ticks <= 4 and state.get("checks") == result.ticks


async def test_a_write_that_changes_the_tree_is_seen_by_the_next_tick() -> None:
    root = Selector("until done", memory=False, children=[Done(), Finisher()])
    state = StateManager(Checks)
    result = await ReactiveRunner(root, state, config=NO_POLL).run(timeout=30)
    assert result.ok and result.ticks == 2 and state.get("done") is True


class Counter(RuntimeNode, Behaviour):
    """Counts its ticks in the state (no status shows it) and succeeds at the fifth."""

    def __init__(self) -> None:
        super().__init__(name="count")

    def update(self) -> Status:
        checks = (self.state.get("checks") or 0) + 1
        self.state.update({"checks": checks})
        return Status.SUCCESS if checks >= 5 else Status.RUNNING


async def test_a_node_that_counts_its_ticks_in_the_state_is_polled_to_its_end() -> None:
    state = StateManager(Checks)
    fast = AppConfig.model_validate({"runtime": {"poll_interval": 0.001}})
    result = await ReactiveRunner(Counter(), state, config=fast).run(timeout=30)
    assert result.ok and result.ticks == 5 and state.get("checks") == 5


class AsksAgain(Behaviour):
    """RUNNING for ``n`` ticks, then SUCCESS; asks for each next tick (`ReactiveRunner.wake`),
    writing nothing, so no status or state shows that it moves on."""

    def __init__(self, n: int) -> None:
        super().__init__(name="asks_again")
        self.left = n
        self.wake: object = None

    def update(self) -> Status:
        self.left -= 1
        if self.left <= 0:
            return Status.SUCCESS
        self.wake()  # type: ignore[operator]
        return Status.RUNNING


async def test_a_node_that_asks_for_the_next_tick_gets_it_at_once() -> None:
    """``wake()`` in a tick is a node asking for the next one: it comes at once, not at the
    next poll (an hour here), unlike the tick's own state writes once the tree is at rest."""
    node = AsksAgain(50)
    runner = ReactiveRunner(node, StateManager(), config=NO_POLL)
    node.wake = runner.wake
    result = await runner.run(timeout=10)
    assert result.ok and result.ticks == 50, result
