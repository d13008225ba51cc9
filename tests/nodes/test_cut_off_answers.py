"""An answer (text, no tool call) that the token limit cut off (finish reason ``length``,
Anthropic's ``max_tokens``) is never a success with half a sentence: the model is asked to
go on and the parts join into one answer (``on_cut_off="continue"``), the run fails with
`OutputTruncatedError` keeping the text so far (``"fail"``, or continuations used up), or the
partial answer is kept and said to be cut off (``"accept"``). Each cut is an
``llm.call.cut_off`` event; every call counts in the usage."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from jianmu import Agent, OutputTruncatedError, ReactiveRunner, ScriptedLLM, StateManager, tool
from jianmu.config import parse_config
from jianmu.llm import LLMResponse, Message, Usage
from jianmu.nodes import AgentState, create_react_node
from jianmu.nodes.cut_off import CONTINUE_NOTE
from jianmu.runtime import RunStatus
from jianmu.runtime.checkpoint import SQLiteCheckpointer
from jianmu.runtime.events import Event
from tests.runtime.test_context import FakeSteps

pytestmark = pytest.mark.anyio

T = TypeVar("T")


def cut(text: str, reason: str = "length") -> LLMResponse:
    """A reply of ``text`` that the token limit ended."""
    return LLMResponse(message=Message.assistant(text), finish_reason=reason, model="m")


def cut_offs(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [e.fields for e in events if e.name == "llm.call.cut_off"]


def agent_run(agent: Agent, prompt: str = "q") -> tuple[Any, list[Event]]:
    async def go() -> list[Event]:
        return [event async for event in agent.stream(prompt)]

    events = asyncio.run(go())
    return events[-1].fields["result"], events


def test_an_answer_cut_off_is_continued_and_the_parts_are_one_answer() -> None:
    llm = ScriptedLLM([cut("The answer is forty"), cut("-two, as every", "max_tokens"),
                       " reader knows."])
    result = Agent(llm).run_sync("What is the answer?")
    assert result.ok, result.error
    assert result.output == "The answer is forty-two, as every reader knows."
    # one assistant message: the conversation reads as if the model had answered at once
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "What is the answer?"),
        ("assistant", "The answer is forty-two, as every reader knows.")]
    # each continuation was asked with the text so far as the model's turn, then the note
    assert [[(m.role, m.content) for m in r.messages][1:] for r in llm.requests] == [
        [], [("assistant", "The answer is forty"), ("user", CONTINUE_NOTE)],
        [("assistant", "The answer is forty-two, as every"), ("user", CONTINUE_NOTE)]]
    assert result.usage.requests == 3


def test_every_cut_is_an_event_and_the_streamed_deltas_are_the_answer() -> None:
    llm = ScriptedLLM([cut("The answer is forty"), "-two."])
    result, events = agent_run(Agent(llm, stream=True))
    assert result.ok and result.output == "The answer is forty-two."
    deltas = "".join(e.fields["text"] for e in events if e.name == "llm.call.delta")
    assert deltas == result.output
    assert cut_offs(events) == [{
        "model": "m", "finish_reason": "length", "tool_calls": [], "call_ids": [],
        "on_cut_off": "continue", "outcome": "continued", "continuations": 1,
        "text_chars": len("The answer is forty")}]
    completed = [e for e in events if e.name == "llm.call.completed"]
    assert [e.fields["answer_preview"] for e in completed] == ["The answer is forty-two."]


def test_still_cut_off_after_the_continuations_fails_with_the_text_so_far() -> None:
    llm = ScriptedLLM([cut("one "), cut("two "), cut("three ")])
    result, events = agent_run(Agent(llm, max_continuations=2))
    assert result.status is RunStatus.FAILURE
    error = result.exception
    assert isinstance(error, OutputTruncatedError)
    assert (error.text, error.continuations, error.finish_reason) == ("one two three ", 2,
                                                                      "length")
    assert "max_continuations=2" in str(error) and "token limit" in str(error)
    with pytest.raises(OutputTruncatedError):
        result.raise_for_status()
    # the text so far stays in the conversation (a next turn goes on from it), not as output
    assert result.messages[-1].content == "one two three " and result.output is None
    assert [f["outcome"] for f in cut_offs(events)] == ["continued", "continued", "failed"]
    assert result.usage.requests == 3


def test_fail_fails_at_once() -> None:
    llm = ScriptedLLM([cut("Half an ans")])
    result, events = agent_run(Agent(llm, on_cut_off="fail"))
    assert isinstance(result.exception, OutputTruncatedError)
    assert result.exception.text == "Half an ans" and result.exception.continuations == 0
    assert "on_cut_off='fail'" in str(result.exception)
    assert len(llm.requests) == 1
    assert [(f["on_cut_off"], f["outcome"]) for f in cut_offs(events)] == [("fail", "failed")]


def test_accept_keeps_the_partial_answer_and_says_so() -> None:
    llm = ScriptedLLM([cut("Half an ans")])
    result, events = agent_run(Agent(llm, on_cut_off="accept"))
    assert result.ok and result.output == "Half an ans"
    assert len(llm.requests) == 1
    assert [(f["on_cut_off"], f["outcome"]) for f in cut_offs(events)] == [
        ("accept", "accepted")]


def test_a_reply_cut_off_before_any_text_is_asked_again_with_the_note_only() -> None:
    llm = ScriptedLLM([cut(""), "Twice a day."])
    result = Agent(llm).run_sync("Tides?")
    assert result.ok and result.output == "Twice a day."
    assert [(m.role, m.content) for m in llm.requests[1].messages] == [
        ("user", "Tides?"), ("user", CONTINUE_NOTE)]


def test_no_continuation_is_asked_once_the_token_budget_is_spent() -> None:
    from jianmu import Constraints

    usage = Usage(input_tokens=40, output_tokens=30)
    first = LLMResponse(message=Message.assistant("Half"), finish_reason="length", usage=usage)
    llm = ScriptedLLM([first, " more."])
    budget = Constraints(guard={"budget": {"total_tokens": 50}})
    result = Agent(llm, constraints=budget).run_sync("q")
    assert isinstance(result.exception, OutputTruncatedError)
    assert "token budget is spent, 70 of 50 tokens" in str(result.exception)
    assert len(llm.requests) == 1 and result.exception.text == "Half"
    # under the budget, it is continued
    llm = ScriptedLLM([first, " more."])
    result = Agent(llm, constraints=Constraints(
        guard={"budget": {"total_tokens": 500}})).run_sync("q")
    assert result.ok and result.output == "Half more."


def test_the_configuration_sets_the_policy_for_every_agent() -> None:
    config = parse_config("llm:\n  on_cut_off: fail\n")
    result = Agent(ScriptedLLM([cut("Half")]), config=config).run_sync("q")
    assert isinstance(result.exception, OutputTruncatedError)
    config = parse_config("llm:\n  max_continuations: 0\n")
    result = Agent(ScriptedLLM([cut("Half")]), config=config).run_sync("q")
    assert isinstance(result.exception, OutputTruncatedError)
    assert result.exception.continuations == 0
    # the agent's own setting wins over the configuration's
    result = Agent(ScriptedLLM([cut("Half")]), config=config,
                   on_cut_off="accept").run_sync("q")
    assert result.ok and result.output == "Half"


@pytest.mark.parametrize("options", [{"on_cut_off": "retry"}, {"max_continuations": -1},
                                     {"max_continuations": True}])
def test_a_bad_setting_is_refused_when_the_agent_is_built(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        Agent(ScriptedLLM([]), **options)


async def test_through_the_runner_and_then_a_next_turn() -> None:
    llm = ScriptedLLM([cut("The answer is forty"), "-two.", "You are welcome."])
    runner = ReactiveRunner(create_react_node(llm, []), StateManager(AgentState, {
        "messages": [{"role": "user", "content": "What is the answer?"}]}))
    result = await runner.run(timeout=30)
    assert result.ok and runner.state.get("final_answer") == "The answer is forty-two."
    runner.send("Thanks!")
    result = await runner.run(timeout=30)
    assert result.ok and runner.state.get("final_answer") == "You are welcome."
    # the next turn sees the answer once, whole, and none of the continuation notes
    assert [(m.role, m.content) for m in llm.requests[-1].messages] == [
        ("user", "What is the answer?"), ("assistant", "The answer is forty-two."),
        ("user", "Thanks!")]


def test_a_continuation_may_end_in_a_tool_call_which_runs() -> None:
    ran: list[str] = []

    @tool
    def save(text: str) -> str:
        """Save a text.

        Args:
            text: what.
        """
        ran.append(text)
        return "saved"

    llm = ScriptedLLM([cut("Let me save th"), Message.assistant(
        "is.", tool_calls=[{"name": "save", "arguments": {"text": "x"}}]), "Saved."])
    result = Agent(llm, tools=[save]).run_sync("q")
    assert result.ok and result.output == "Saved." and ran == ["x"]
    said = result.messages[1]
    assert said.content == "Let me save this." and [c.name for c in said.tool_calls] == ["save"]


class Note(BaseModel):
    title: str
    body: str


@pytest.mark.parametrize("mode", ["text", "native"])
def test_a_typed_answer_cut_off_is_continued_then_validated(mode: str) -> None:
    llm = ScriptedLLM([cut('{"title": "Hi", "bo'), 'dy": "there"}'])
    result = Agent(llm, output_type=Note, output_mode=mode).run_sync("q")
    assert result.ok, result.error
    assert result.output == Note(title="Hi", body="there")
    assert not any(m.role == "user" and "validat" in (m.content or "")
                   for m in result.messages)  # no output retry was spent on it


def test_a_sub_agent_answer_is_continued_and_its_failure_reaches_the_caller() -> None:
    helper = Agent(ScriptedLLM([cut("Tides come"), " twice a day."]), name="helper")
    lead = ScriptedLLM([[{"name": "helper", "arguments": {"input": "tides?"}}], "Done."])
    result = Agent(lead, tools=[helper.as_tool()]).run_sync("q")
    assert result.ok
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "Tides come twice a day."]

    helper = Agent(ScriptedLLM([cut("Tides come")]), name="helper", on_cut_off="fail")
    lead = ScriptedLLM([[{"name": "helper", "arguments": {"input": "tides?"}}], "Done."])
    result = Agent(lead, tools=[helper.as_tool()]).run_sync("q")
    told = [m.content or "" for m in result.messages if m.role == "tool"]
    assert result.ok and "OutputTruncatedError" in told[0] and "token limit" in told[0]


# -- restores ---------------------------------------------------------------------------------


@tool
def look(city: str) -> str:
    """Look a city up.

    Args:
        city: which.
    """
    return f"sunny in {city}"


LOOK = [{"name": "look", "arguments": {"city": "Oslo"}}]


class _Held(ScriptedLLM):
    """A script whose continuation never comes: the process stops while it is asked."""

    def __init__(self, responses: list[Any]) -> None:
        super().__init__(responses)
        self.asked = asyncio.Event()

    async def send(self, request: Any) -> LLMResponse:
        if any(m.content == CONTINUE_NOTE for m in request.messages):
            self.asked.set()
            await asyncio.Event().wait()
        return await super().send(request)


def _start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "Weather?"}]})


async def test_a_run_restored_while_it_continued_loses_and_repeats_no_text(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.sqlite"
    held = _Held([LOOK, cut("It is sunny in")])
    runner = ReactiveRunner(create_react_node(held, [look]), _start(),
                            checkpointer=SQLiteCheckpointer(db), run_id="r1")
    task = asyncio.ensure_future(runner.run(timeout=30))
    await held.asked.wait()
    task.cancel()  # stopped mid-continuation, as a process that dies there
    with contextlib.suppress(asyncio.CancelledError):
        await task
    # in a new process: a new script, played from the turns the checkpoint holds
    later = ScriptedLLM([LOOK, cut("It is sunny in"), " Oslo."])
    restored = ReactiveRunner.restore(create_react_node(later, [look]), SQLiteCheckpointer(db),
                                      "r1", state_manager=StateManager(AgentState))
    result = await restored.run(timeout=30)
    assert result.ok, result.error
    assert restored.state.get("final_answer") == "It is sunny in Oslo."
    texts = [m.content for m in result.messages if m.role == "assistant" and m.content]
    assert texts == ["It is sunny in Oslo."]


async def test_a_restored_conversation_goes_on_after_a_continued_answer(tmp_path: Path) -> None:
    """A new `ScriptedLLM` meeting a restored conversation finds its place after a joined
    answer (one message for two script entries), not at the start of its script."""
    db = tmp_path / "runs.sqlite"
    script: list[Any] = [cut("It is sunny in"), " Oslo.", "You are welcome."]
    runner = ReactiveRunner(create_react_node(ScriptedLLM(script), []), _start(),
                            checkpointer=SQLiteCheckpointer(db), run_id="r2")
    assert (await runner.run(timeout=30)).ok
    restored = ReactiveRunner.restore(create_react_node(ScriptedLLM(script), []),
                                      SQLiteCheckpointer(db), "r2",
                                      state_manager=StateManager(AgentState))
    restored.send("Thanks!")
    result = await restored.run(timeout=30)
    assert result.ok and restored.state.get("final_answer") == "You are welcome."


KEY = "model:ReAct/ReAct.round/ReAct.llm"


async def test_a_durable_run_replays_the_parts_it_has_and_asks_only_the_rest() -> None:
    """Each continuation is a durable step of its own: a run that stopped after the first
    part replays it and asks only the continuation; one that recorded both asks nothing."""
    first = FakeSteps()
    runner = ReactiveRunner(create_react_node(ScriptedLLM([cut("It is sunny in")]), []),
                            _start())
    runner.ctx.steps = first
    assert (await runner.run(timeout=30)).status is RunStatus.FAILURE  # no continuation came
    assert list(first.recorded) == [KEY]

    again = FakeSteps(first.recorded)
    llm = ScriptedLLM([" Oslo."])
    runner = ReactiveRunner(create_react_node(llm, []), _start())
    runner.ctx.steps = again
    result = await runner.run(timeout=30)
    assert result.ok and runner.state.get("final_answer") == "It is sunny in Oslo."
    assert again.ran == [f"{KEY}#2"] and len(llm.requests) == 1
    assert result.usage.requests == 2

    replayed = FakeSteps(again.recorded)
    llm = ScriptedLLM([])
    runner = ReactiveRunner(create_react_node(llm, []), _start())
    runner.ctx.steps = replayed
    result = await runner.run(timeout=30)
    assert result.ok and runner.state.get("final_answer") == "It is sunny in Oslo."
    assert replayed.ran == [] and llm.requests == []
