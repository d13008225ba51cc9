"""A durable run's turn that a guardrail may refuse is recorded once the guardrails decided
(`jianmu.nodes.sealed`), and replays exactly: with a recorder in memory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jianmu.guard.guardrails import Tripwire
from jianmu.llm.messages import Message
from jianmu.llm.provider import LLMResponse
from jianmu.llm.scripted import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node
from jianmu.nodes.sealed import PassedTurn, RefusedTurn
from jianmu.runtime import ReactiveRunner, RunStatus
from jianmu.state import StateManager
from jianmu.tools import tool
from tests.runtime.test_context import FakeSteps

pytestmark = pytest.mark.anyio
KEY = "sk-live-sealed-1234"


def no_keys(ctx: Any, value: Any) -> Tripwire | None:
    text = getattr(value, "text", value)
    return Tripwire("holds a key") if "sk-live" in str(text) else None


async def run(tree: Any, steps: FakeSteps) -> Any:
    runner = ReactiveRunner(tree, StateManager(AgentState))
    runner.ctx.steps = steps
    return runner, await runner.run(timeout=30)


def never(messages: list[Message]) -> Any:
    raise AssertionError("the model was asked again")


async def test_a_refused_answer_is_recorded_as_its_refusal_and_replays_it() -> None:
    steps = FakeSteps()
    tree = create_react_node(ScriptedLLM([f"the key is {KEY}"]), [],
                             output_guardrails=[no_keys])
    _, first = await run(tree, steps)
    assert first.status is RunStatus.FAILURE and "holds a key" in str(first.error)
    [record] = steps.recorded.values()
    assert isinstance(record, RefusedTurn) and KEY not in repr(record)
    assert (record.guardrail, record.kind) == ("no_keys", "output")

    again = FakeSteps(steps.recorded)
    replayed = create_react_node(ScriptedLLM([never]), [], output_guardrails=[no_keys])
    runner, second = await run(replayed, again)
    assert (second.status, second.error) == (first.status, first.error)
    assert again.ran == [] and runner.state.get("final_answer") is None
    assert runner.state.get("usage") == record.usage


async def test_a_continued_answer_the_guardrails_passed_is_one_record_and_replays() -> None:
    parts = iter([
        LLMResponse(message=Message.assistant("It is sunny"), finish_reason="length"),
        LLMResponse(message=Message.assistant(" in Oslo."), finish_reason="stop"),
    ])
    steps = FakeSteps()
    tree = create_react_node(ScriptedLLM([lambda m: next(parts)] * 2), [],
                             output_guardrails=[no_keys], on_cut_off="continue")
    runner, first = await run(tree, steps)
    assert first.ok, first.error
    [record] = steps.recorded.values()
    assert isinstance(record, PassedTurn) and len(record.replies) == 2
    assert record.message.content == "It is sunny in Oslo."

    again = FakeSteps(steps.recorded)
    replayed = create_react_node(ScriptedLLM([never]), [], output_guardrails=[no_keys],
                                 on_cut_off="continue")
    runner2, second = await run(replayed, again)
    assert second.ok and again.ran == []
    assert runner2.state.get("final_answer") == "It is sunny in Oslo."
    assert runner2.state.get("usage") == runner.state.get("usage")


async def test_input_guardrails_passed_in_a_replayed_turn_are_not_run_again() -> None:
    checked: list[str] = []

    def counted(ctx: Any, text: Any) -> None:
        checked.append(str(text))

    @tool
    def note(text: str) -> str:
        """Note something."""
        return "noted"

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "n1", "name": "note", "arguments": {"text": "a"}}]
        return "done"

    def tree(llm: Any) -> Any:
        return create_react_node(llm, [note], input_guardrails=[counted])

    steps = FakeSteps()
    runner = ReactiveRunner(tree(ScriptedLLM([turn] * 2)), StateManager(AgentState))
    runner.state.update({"messages": [Message.user("hello")]})
    runner.ctx.steps = steps
    assert (await runner.run(timeout=30)).ok
    assert checked == ["hello"]  # the first turn checked the message; the second did not
    # a crash after the first turn: it replays, the input guardrails are not run again
    again = FakeSteps({k: v for k, v in steps.recorded.items() if "#" not in k})
    runner2 = ReactiveRunner(tree(ScriptedLLM([turn] * 2)), StateManager(AgentState))
    runner2.state.update({"messages": [Message.user("hello")]})
    runner2.ctx.steps = again
    assert (await runner2.run(timeout=30)).ok
    assert checked == ["hello"] and runner2.state.get("final_answer") == "done"


async def test_a_sub_agents_answer_is_judged_by_its_callers_guardrails_in_its_own_step() -> None:
    """Withheld: the sub-agent's turn records the refusal, the caller reads the refusal it
    would have made itself, and the run replays whole (the usage too) without a model."""
    def lead_turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "ask_1", "name": "helper", "arguments": {"input": "key?"}}]
        return f"told: {messages[-1].content}"

    def lead(helper_llm: Any, lead_llm: Any) -> Any:
        helper = agent_tool(lambda: create_react_node(helper_llm, [], name="helper"),
                            name="helper", description="Knows keys.")
        return create_react_node(lead_llm, [helper], tool_output_guardrails=[no_keys])

    plain = ReactiveRunner(lead(ScriptedLLM([f"the key is {KEY}"]), ScriptedLLM([lead_turn] * 2)),
                           StateManager(AgentState))
    assert (await plain.run(timeout=30)).ok  # not durable: the caller's executor withholds
    steps = FakeSteps()
    runner, first = await run(lead(ScriptedLLM([f"the key is {KEY}"]),
                                   ScriptedLLM([lead_turn] * 2)), steps)
    assert first.ok, first.error
    assert KEY not in repr(steps.recorded) and KEY not in repr(runner.state.snapshot())
    [helper] = [v for k, v in steps.recorded.items() if k.startswith("helper/")]
    assert isinstance(helper, RefusedTurn) and helper.kind == "tool_output"
    said = runner.state.get("final_answer")
    assert said == plain.state.get("final_answer") and "withheld" in said

    again = FakeSteps(steps.recorded)
    runner2, second = await run(lead(ScriptedLLM([never]), ScriptedLLM([never])), again)
    assert second.ok and again.ran == []
    assert runner2.state.get("final_answer") == said
    assert runner2.state.get("usage") == runner.state.get("usage")


async def test_a_sub_agents_answer_is_judged_once_by_its_callers_guardrails() -> None:
    """Passed in the sub-agent's own step, the answer is not judged again by the caller's
    executor (a judge that asks a model was paid twice); a replay judges it again, by the
    rules of the day, once."""
    seen: list[Any] = []

    def counted(ctx: Any, value: Any) -> Tripwire | None:
        seen.append(getattr(value, "output", value))
        return no_keys(ctx, value)

    def lead_turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "ask_1", "name": "helper", "arguments": {"input": "weather?"}}]
        return f"told: {messages[-1].content}"

    def lead(helper_llm: Any, lead_llm: Any) -> Any:
        helper = agent_tool(lambda: create_react_node(helper_llm, [], name="helper"),
                            name="helper", description="Knows the weather.")
        return create_react_node(lead_llm, [helper], tool_output_guardrails=[counted])

    steps = FakeSteps()
    _, first = await run(lead(ScriptedLLM(["sunny"]), ScriptedLLM([lead_turn] * 2)), steps)
    assert first.ok, first.error
    assert seen == ["sunny"]
    seen.clear()
    plain = ReactiveRunner(lead(ScriptedLLM(["sunny"]), ScriptedLLM([lead_turn] * 2)),
                           StateManager(AgentState))
    assert (await plain.run(timeout=30)).ok and seen == ["sunny"]  # not durable: the executor
    seen.clear()
    again = FakeSteps(steps.recorded)
    _, second = await run(lead(ScriptedLLM([never]), ScriptedLLM([never])), again)
    assert second.ok and again.ran == [] and seen == ["sunny"]


async def test_a_reply_to_a_message_the_input_guardrails_refused_is_not_recorded() -> None:
    """They trip once the model has answered: the turn's record is the refusal."""
    answered = asyncio.Event()

    async def slow_no(ctx: Any, text: Any) -> Tripwire:
        await answered.wait()  # decides after the model answered
        return Tripwire("not allowed")

    def turn(messages: list[Message]) -> Any:
        answered.set()
        return f"sure, the key is {KEY}"

    steps = FakeSteps()
    runner = ReactiveRunner(create_react_node(ScriptedLLM([turn]), [],
                                              input_guardrails=[slow_no]),
                            StateManager(AgentState))
    runner.state.update({"messages": [Message.user("tell me the key")]})
    runner.ctx.steps = steps
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE and "not allowed" in str(result.error)
    [record] = steps.recorded.values()
    assert isinstance(record, RefusedTurn) and record.kind == "input"
    assert KEY not in repr(steps.recorded) and KEY not in repr(runner.state.snapshot())


async def test_a_judged_sub_agent_that_asks_a_person_goes_on_and_replays() -> None:
    """Its call suspends (nothing recorded), goes on after the decision and is recorded once
    judged; the run replays from the record without asking anyone or any model."""
    done: list[str] = []

    @tool(permission="user_confirm")
    def deploy(target: str) -> str:
        """Deploy (asks first)."""
        done.append(target)
        return "deployed"

    def helper_turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "d1", "name": "deploy", "arguments": {"target": "prod"}}]
        return f"deployed, the key is {KEY}"

    def lead_turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "ask_1", "name": "helper", "arguments": {"input": "deploy"}}]
        return f"told: {messages[-1].content}"

    def lead(helper_llm: Any, lead_llm: Any) -> Any:
        helper = agent_tool(lambda: create_react_node(helper_llm, [deploy], name="helper"),
                            name="helper", description="Deploys.")
        return create_react_node(lead_llm, [helper], tool_output_guardrails=[no_keys])

    steps = FakeSteps()
    runner = ReactiveRunner(lead(ScriptedLLM([helper_turn] * 2), ScriptedLLM([lead_turn] * 2)),
                            StateManager(AgentState))
    runner.ctx.steps = steps
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    runner.approve(first.pending[0].id)
    result = await runner.run(timeout=30)
    assert result.ok, result.error
    assert done == ["prod"] and KEY not in repr(steps.recorded)
    assert "withheld" in str(runner.state.get("final_answer"))

    again = FakeSteps(steps.recorded)
    replayed = ReactiveRunner(lead(ScriptedLLM([never]), ScriptedLLM([never])),
                              StateManager(AgentState))
    replayed.ctx.steps = again
    second = await replayed.run(timeout=30)  # asks again, as a durable run replays it: the
    assert second.status is RunStatus.SUSPENDED  # workflow gives it the recorded decision
    replayed.approve(second.pending[0].id)
    second = await replayed.run(timeout=30)
    assert second.ok and done == ["prod"] and again.ran == []
    assert replayed.state.get("final_answer") == runner.state.get("final_answer")


async def test_a_withheld_sub_agent_answer_leaves_the_same_namespace_as_a_plain_run() -> None:
    def lead_turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "ask_1", "name": "helper", "arguments": {"input": "key?"}}]
        return "ok"

    def lead() -> Any:
        helper = agent_tool(lambda: create_react_node(ScriptedLLM([f"key {KEY}"]), [],
                                                      name="helper"),
                            name="helper", description="Knows keys.")
        return create_react_node(ScriptedLLM([lead_turn] * 2), [helper],
                                 tool_output_guardrails=[no_keys])

    plain = ReactiveRunner(lead(), StateManager(AgentState))
    assert (await plain.run(timeout=30)).ok
    durable, result = await run(lead(), FakeSteps())
    assert result.ok
    kept = durable.state.snapshot()["namespaces"]["helper/ask_1"]
    assert kept == plain.state.snapshot()["namespaces"]["helper/ask_1"]
    assert "withheld" in kept["agent_run"]["withheld"] and KEY not in repr(kept)
