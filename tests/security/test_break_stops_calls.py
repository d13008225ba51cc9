"""A reader that leaves a stream by a plain ``break`` has stopped the run: a call the model had
just asked for (a payment) never starts, through `ReactiveRunner.stream` and `Agent.stream` alike.
Python closes a dropped generator only a loop step later; the run must not go on until then."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jianmu import Agent, ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime.events import Event
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


def payments() -> tuple[Any, list[int], ScriptedLLM]:
    paid: list[int] = []

    @tool
    async def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: what to pay.
        """
        paid.append(amount)
        return "paid"

    return pay, paid, ScriptedLLM([[{"name": "pay", "arguments": {"amount": 5}}], "Paid."])


async def _settled(finished: list[Any], before: set[asyncio.Task[Any]]) -> None:
    for _ in range(200):  # the dropped generator's own close, a task the loop made
        if finished and asyncio.all_tasks() == before:
            return
        await asyncio.sleep(0)


async def test_a_break_out_of_a_runners_stream_stops_a_payment_before_it_starts() -> None:
    pay, paid, llm = payments()
    runner = ReactiveRunner(create_react_node(llm, [pay]), StateManager(
        AgentState, {"messages": [{"role": "user", "content": "Pay 5."}]}))
    finished: list[Event] = []
    runner.ctx.events.subscribe("run.finished", finished.append)
    before = asyncio.all_tasks()
    async for event in runner.stream():
        if event.name == "llm.call.completed":
            break  # the model asked for the payment; the reader leaves
    await _settled(finished, before)
    assert [e.fields["status"] for e in finished] == ["cancelled"]
    assert paid == []
    assert asyncio.all_tasks() == before


async def test_a_break_out_of_an_agents_stream_stops_a_payment_before_it_starts() -> None:
    pay, paid, llm = payments()
    agent = Agent(llm, tools=[pay])
    finished: list[Any] = []
    before = asyncio.all_tasks()
    async for event in agent.stream("Pay 5."):
        if event.name == "llm.call.completed":
            runner = next(iter(agent._runs))
            runner.ctx.events.subscribe("run.finished", finished.append)
            break
    await _settled(finished, before)
    assert [e.fields["status"] for e in finished] == ["cancelled"]
    assert paid == []
    assert asyncio.all_tasks() == before


async def test_a_stream_dropped_before_it_was_read_stops_nothing() -> None:
    """A generator made and dropped unread never ran its run; another run of the runner,
    going on meanwhile, is not stopped by it."""
    pay, paid, llm = payments()
    runner = ReactiveRunner(create_react_node(llm, [pay]), StateManager(
        AgentState, {"messages": [{"role": "user", "content": "Pay 5."}]}))
    running = asyncio.ensure_future(runner.run())
    await asyncio.sleep(0)
    unread = runner.stream()
    del unread
    result = await running
    assert result.ok and paid == [5]
