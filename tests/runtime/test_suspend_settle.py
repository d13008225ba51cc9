"""A suspend stops the run: `ReactiveRunner.run` returns SUSPENDED only once the node tasks already
in flight have finished (no tick starts new ones); a cancel or the run's timeout meanwhile
stops them instead. Plain nodes under a py_trees Parallel: one asks a person, its siblings work.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import py_trees
import pytest
from py_trees.common import Status

from jianmu import ReactiveRunner, RunStatus
from jianmu.runtime.async_node import AsyncNode
from jianmu.runtime.context import ApprovalRequest
from tests.support.suspend_app import Asker

pytestmark = pytest.mark.anyio


class Worker(AsyncNode):
    """Waits for ``gate``, then does its work once (``effects``); may ask a person after."""

    def __init__(self, name: str, gate: asyncio.Event, effects: list[str], *,
                 asks: bool = False) -> None:
        super().__init__(name)
        self.gate = gate
        self.effects = effects
        self.asks = asks
        self.cancelled = False

    async def update_async(self) -> Status:
        interaction = self.ctx.interaction
        assert interaction is not None
        if self.asks and interaction.decision(self.name) is not None:
            self.effects.append(f"{self.name} approved")
            return Status.SUCCESS
        try:
            await asyncio.sleep(0)  # in flight when its tick ends, whatever the gate says
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.effects.append(self.name)
        if self.asks:
            interaction.suspend(ApprovalRequest(id=self.name, summary=self.name))
            return Status.RUNNING
        return Status.SUCCESS


def tree(*children: Any) -> py_trees.composites.Parallel:
    return py_trees.composites.Parallel(
        "both", policy=py_trees.common.ParallelPolicy.SuccessOnAll(), children=list(children)
    )


def still_running(runner: ReactiveRunner) -> list[str]:
    return [n.name for n in runner.root.iterate() if isinstance(n, AsyncNode) and n.in_flight]


async def test_a_sibling_in_flight_finishes_before_run_returns_suspended() -> None:
    gate, effects = asyncio.Event(), []
    worker = Worker("worker", gate, effects)
    runner = ReactiveRunner(tree(Asker("ask", opens=gate), worker))
    first = await runner.run()
    assert first.status is RunStatus.SUSPENDED and [r.id for r in first.pending] == ["ask"]
    assert effects == ["worker"] and not still_running(runner)  # done, before run() returned
    runner.approve("ask")
    assert (await runner.run()).ok
    assert effects == ["worker"]  # its result was taken, not worked out again


async def test_a_request_asked_while_siblings_finish_is_returned_too() -> None:
    gate, effects = asyncio.Event(), []
    runner = ReactiveRunner(tree(Asker("ask", opens=gate),
                                 Worker("worker", gate, effects, asks=True)))
    said: list[list[str]] = []
    runner.ctx.events.subscribe("run.suspended", lambda e: said.append(e.fields["pending"]))
    first = await runner.run()
    assert first.status is RunStatus.SUSPENDED
    assert [r.id for r in first.pending] == ["ask", "worker"]
    assert said == [["ask"], ["ask", "worker"]]  # the timeline says what it waits for now
    for request in first.pending:
        runner.approve(request.id)
    assert (await runner.run()).ok
    assert effects == ["worker", "worker approved"]


async def test_the_runs_timeout_stops_the_siblings_still_in_flight() -> None:
    never, effects = asyncio.Event(), []
    worker = Worker("worker", never, effects)
    runner = ReactiveRunner(tree(Asker("ask"), worker))
    result = await runner.run(timeout=0.2)
    assert result.status is RunStatus.TIMEOUT and result.error == "the run timed out after 0.2 s"
    assert worker.cancelled and not still_running(runner) and effects == []
    assert runner.root.status is Status.INVALID


async def test_a_cancel_while_siblings_finish_stops_them() -> None:
    never, effects = asyncio.Event(), []
    worker = Worker("worker", never, effects)
    runner = ReactiveRunner(tree(Asker("ask"), worker))
    runner.ctx.events.subscribe("run.suspended", lambda _event: runner.cancel())
    result = await runner.run()
    assert result.status is RunStatus.CANCELLED and result.error == "the run was cancelled"
    assert not still_running(runner) and effects == []
    assert runner.root.status is Status.INVALID


async def test_cancelling_run_itself_while_siblings_finish_stops_them() -> None:
    never, effects = asyncio.Event(), []
    worker = Worker("worker", never, effects)
    runner = ReactiveRunner(tree(Asker("ask"), worker))
    run = asyncio.get_running_loop().create_task(runner.run())
    runner.ctx.events.subscribe("run.suspended", lambda _event: run.cancel())
    with pytest.raises(asyncio.CancelledError):
        await run
    assert worker.cancelled and not still_running(runner)


async def test_requests_decided_while_siblings_finish_let_the_same_run_go_on() -> None:
    gate, effects = asyncio.Event(), []
    runner = ReactiveRunner(tree(Asker("ask"), Worker("worker", gate, effects)))
    loop = asyncio.get_running_loop()

    def decided_later(_event: object) -> None:  # a person answers while the worker works
        loop.call_soon(runner.approve, "ask")
        loop.call_soon(gate.set)

    runner.ctx.events.subscribe("run.suspended", decided_later)
    result = await runner.run()
    assert result.status is RunStatus.SUCCESS and result.pending == ()
    assert effects == ["worker"]


def test_the_time_a_run_waits_for_a_person_is_not_a_timeouts() -> None:
    """A py_trees Timeout above a call that asks a person: its deadline passes while the run
    is suspended (returned), yet the approved call runs once and the run finishes, as it
    does when the run is restored in another process (whose Timeout starts anew)."""
    from jianmu import AgentState, StateManager, ToolExecutor, tool

    paid: list[int] = []

    @tool(category="write", permission="user_confirm")
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        paid.append(amount)
        return "paid"

    state = StateManager(AgentState, {"actions": [
        {"id": "c1", "name": "pay", "arguments": {"amount": 5}}]})
    limit = py_trees.decorators.Timeout("limit", ToolExecutor(tools=[pay]), duration=0.05)
    runner = ReactiveRunner(limit, state)
    assert runner.run_sync(timeout=30).status is RunStatus.SUSPENDED
    while time.monotonic() <= limit.finish_time:  # the person takes longer than the Timeout
        time.sleep(0.01)
    runner.approve("c1")
    result = runner.run_sync(timeout=30)
    assert result.ok, result.error
    assert paid == [5]
