"""Red team, a run stopped while its guardrails judge a reply the model already gave: a reader
that leaves the stream, `cancel()` or the run's timeout while a slow moderation service reads
the user's message or the answer.

Fixed here: the model's reply had come (billed), but the turn was stopped before it wrote its
usage, and the usage was dropped: the run's ``usage`` said no request and no token, so the
token budget never counted it, and a run that went on asked the model again, paid twice with
one count. A turn stopped while its guardrails judge now counts the reply it was judging.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jianmu import Agent, ReactiveRunner, StateManager, tool
from jianmu.llm import ScriptedLLM
from jianmu.llm.provider import ChatRequest, LLMResponse
from jianmu.nodes import AgentState, create_react_node

pytestmark = pytest.mark.anyio


class Answering(ScriptedLLM):
    """A scripted model that says when it has answered."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__(script)
        self.answered = asyncio.Event()

    async def send(self, request: ChatRequest) -> LLMResponse:
        reply = await super().send(request)
        self.answered.set()  # the node goes on to its guardrails in this same step
        return reply


@tool(category="write")
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: what to pay.
    """
    return "paid"


async def judging_forever(_ctx: object, _value: object) -> None:
    await asyncio.Event().wait()  # a moderation service that does not answer


async def test_a_reader_leaving_while_input_guardrails_judge_keeps_the_replys_usage() -> None:
    llm = Answering([[{"name": "pay", "arguments": {"amount": 5}}], "Paid."])
    agent = Agent(llm, tools=[pay], input_guardrails=[judging_forever])
    async with agent.stream("Pay 5.") as events:
        async for event in events:
            if event.name == "llm.call.started":
                await llm.answered.wait()
                break
    (runner,) = agent._runs
    usage = runner.state.get("usage")
    assert usage.requests == 1 and usage.input_tokens > 0
    assert usage.tool_calls == 0


async def test_a_reader_leaving_while_output_guardrails_judge_keeps_the_replys_usage() -> None:
    judging = asyncio.Event()

    async def slow_output(_ctx: object, _value: object) -> None:
        judging.set()
        await asyncio.Event().wait()

    llm = ScriptedLLM(["A long answer."])
    runner = ReactiveRunner(
        create_react_node(llm, [], output_guardrails=[slow_output]),
        StateManager(AgentState, {"messages": [{"role": "user", "content": "Tell me."}]}))
    async with runner.stream() as events:
        async for event in events:
            if event.name == "llm.call.started":
                await judging.wait()
                break
    usage = runner.state.get("usage")
    assert usage.requests == 1 and usage.output_tokens > 0


async def test_a_cancel_while_guardrails_judge_keeps_the_replys_usage() -> None:
    llm = Answering(["An answer.", "Another answer."])
    agent = Agent(llm, input_guardrails=[judging_forever])
    run = asyncio.create_task(agent.run("Hello."))
    await llm.answered.wait()
    (runner,) = agent._runs
    assert agent.cancel(runner.run_id)
    result = await run
    assert result.status.value == "cancelled"
    assert result.usage is not None and result.usage.requests == 1


async def test_a_durable_turn_stopped_while_judged_keeps_the_replys_usage() -> None:
    from tests.runtime.test_context import FakeSteps  # a durable run's recorder, in memory

    judging = asyncio.Event()

    async def slow_output(_ctx: object, _value: object) -> None:
        judging.set()
        await asyncio.Event().wait()

    runner = ReactiveRunner(
        create_react_node(ScriptedLLM(["A long answer."]), [], output_guardrails=[slow_output]),
        StateManager(AgentState, {"messages": [{"role": "user", "content": "Tell me."}]}))
    runner.ctx.steps = FakeSteps()  # the turn is sealed: judged inside its step
    run = asyncio.create_task(runner.run())
    await judging.wait()
    runner.cancel()
    assert (await run).status.value == "cancelled"
    usage = runner.state.get("usage")
    assert usage.requests == 1 and usage.output_tokens > 0
