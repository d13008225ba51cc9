"""Input guardrails that run before the model is asked (``run_in_parallel = False``, as the
OpenAI Agents SDK spells it): an async check (a moderation service, a PII scan) whose trip
must keep the message from the model's vendor, and bill nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jianmu import GuardrailTripped, ReactiveRunner, RunStatus, StateManager, Tripwire
from jianmu.llm import ScriptedLLM
from jianmu.nodes.react import create_react_node
from jianmu.nodes.state import AgentState
from jianmu.tools.base import tool

pytestmark = pytest.mark.anyio


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city.

    Args:
        city: the city's name.
    """
    return "sunny"


def start(question: str) -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": question}]})


class Moderation:
    """An async guardrail that answers only once ``answer`` is set: it waits on a service."""

    run_in_parallel = False

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def __call__(self, ctx: Any, text: str) -> Tripwire | None:
        self.asked.set()
        await self.answer.wait()
        return Tripwire("holds a card number") if "4111" in text else None


async def test_a_trip_before_the_model_sends_no_request_and_bills_nothing() -> None:
    guardrail = Moderation()
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}], "done"])
    runner = ReactiveRunner(create_react_node(llm, [lookup], input_guardrails=[guardrail]),
                            start("my card is 4111 1111 1111 1111"))
    run = asyncio.ensure_future(runner.run())
    await guardrail.asked.wait()
    assert llm.requests == []  # the model waits for the guardrail
    guardrail.answer.set()
    result = await run
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, GuardrailTripped)
    assert result.exception.reason == "holds a card number"
    assert llm.requests == []  # the refused message never reached the vendor
    assert result.usage.requests == 0 and result.usage.total_tokens == 0


async def test_once_it_passed_the_model_is_asked_and_its_answer_streamed() -> None:
    guardrail = Moderation()
    guardrail.answer.set()
    beside: list[str] = []

    async def in_parallel(ctx: Any, text: str) -> None:
        beside.append(text)

    llm = ScriptedLLM(["Sunny in Paris."])
    runner = ReactiveRunner(
        create_react_node(llm, [lookup], input_guardrails=[in_parallel, guardrail],
                          stream=True), start("weather in Paris?"))
    deltas: list[str] = []
    runner.ctx.events.subscribe("llm.call.delta", lambda e: deltas.append(e.fields["text"]))
    result = await runner.run()
    assert result.status is RunStatus.SUCCESS
    assert len(llm.requests) == 1 and beside == ["weather in Paris?"]
    assert "".join(deltas) == "Sunny in Paris."


def test_a_run_in_parallel_that_is_no_bool_is_refused_where_it_is_given() -> None:
    def check(ctx: Any, text: str) -> None:
        return None

    check.run_in_parallel = "no"  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="run_in_parallel is 'no'"):
        create_react_node(ScriptedLLM(["x"]), [], input_guardrails=[check])


async def test_a_run_cancelled_while_it_checks_stops_the_check_and_sends_nothing() -> None:
    stopped = asyncio.Event()

    class Hanging(Moderation):
        async def __call__(self, ctx: Any, text: str) -> Tripwire | None:
            self.asked.set()
            try:
                await asyncio.Event().wait()
            finally:
                stopped.set()
            return None

    guardrail = Hanging()
    llm = ScriptedLLM(["never"])
    runner = ReactiveRunner(create_react_node(llm, [], input_guardrails=[guardrail]),
                            start("hello"))
    run = asyncio.ensure_future(runner.run())
    await guardrail.asked.wait()
    runner.cancel()
    result = await run
    assert result.status is RunStatus.CANCELLED
    assert stopped.is_set() and llm.requests == []


async def test_a_message_one_runs_first_passed_is_not_checked_again_next_turn() -> None:
    seen: list[tuple[str, str]] = []

    def beside(ctx: Any, text: str) -> None:
        seen.append(("beside", text))

    class First:
        run_in_parallel = False

        def __call__(self, ctx: Any, text: str) -> None:
            seen.append(("first", text))

    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}], "sunny in Paris"])
    # the one that runs first is listed last: the turn puts it first, the note keeps the list
    runner = ReactiveRunner(create_react_node(llm, [lookup], input_guardrails=[beside, First()]),
                            start("weather in Paris?"))
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert len(llm.requests) == 2
    assert seen == [("first", "weather in Paris?"), ("beside", "weather in Paris?")]
