"""A durable run's turn that a guardrail may refuse is recorded once the guardrails decided
(`jianmu.nodes.sealed`), and replays exactly: with a recorder in memory."""

from __future__ import annotations

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


async def test_a_sub_agents_answer_is_recorded_by_its_caller_once_judged() -> None:
    def lead_turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "ask_1", "name": "helper", "arguments": {"input": "key?"}}]
        return f"told: {messages[-1].content}"

    def lead(helper_llm: Any) -> Any:
        helper = agent_tool(lambda: create_react_node(helper_llm, [], name="helper"),
                            name="helper", description="Knows keys.")
        return create_react_node(ScriptedLLM([lead_turn] * 2), [helper],
                                 tool_output_guardrails=[no_keys])

    steps = FakeSteps()
    runner, first = await run(lead(ScriptedLLM([f"the key is {KEY}"])), steps)
    assert first.ok, first.error
    assert KEY not in repr(steps.recorded)
    assert "withheld" in str(steps.recorded["tool:ask_1"].error)
    # the helper's answer ran in a step that recorded nothing: its caller's record holds it
    assert any(k.startswith("helper/") for k in steps.ran)
    assert not any(k.startswith("helper/") for k in steps.recorded)

    again = FakeSteps(steps.recorded)
    runner2, second = await run(lead(ScriptedLLM([never])), again)
    assert second.ok and again.ran == []
    assert runner2.state.get("final_answer") == runner.state.get("final_answer")
