"""Red team of the output guardrails past a typed answer: the last answer its output type
refuses is quoted by the run's error; the guardrails judge it first."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from jianmu import ReactiveRunner, StateManager
from jianmu.errors import GuardrailTripped
from jianmu.guard.guardrails import Tripwire
from jianmu.llm import LLMResponse, ScriptedLLM
from jianmu.llm.messages import Message
from jianmu.nodes import create_react_node
from jianmu.nodes.output import FINAL_RESULT
from jianmu.nodes.state import AgentState
from jianmu.tools.calls import ToolCall

pytestmark = pytest.mark.anyio


class Answer(BaseModel):
    n: int


def no_secret(_ctx: object, value: object) -> Tripwire | None:
    return Tripwire("says the secret") if "SECRET" in str(value) else None


def _reply(mode: str, n: object) -> LLMResponse | str:
    """An answer ``{"n": n}``, as text or as the answer tool's call."""
    if mode == "text":
        return json.dumps({"n": n})
    call = ToolCall(id="c1", name=FINAL_RESULT, arguments={"n": n})
    return LLMResponse(message=Message.assistant(None, tool_calls=[call]))


def _run(mode: str, replies: list[LLMResponse | str], retries: int, guardrail: object,
         ) -> tuple[ReactiveRunner, StateManager, list[str]]:
    node = create_react_node(
        ScriptedLLM(replies), [], output_guardrails=[guardrail],  # type: ignore[list-item]
        output_type=Answer, output_mode=mode, output_retries=retries,  # type: ignore[arg-type]
    )
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
    runner = ReactiveRunner(node, state)
    seen: list[str] = []
    runner.ctx.events.subscribe("*", lambda event: seen.append(repr(event.fields)))
    return runner, state, seen


@pytest.mark.parametrize("mode", ["text", "tool"])
@pytest.mark.parametrize("retries", [0, 1])
async def test_the_last_answer_the_output_type_refuses_passes_the_output_guardrails(
    mode: str, retries: int,
) -> None:
    # the last typed answer that did not validate was written to the conversation and quoted
    # by the run's OutputValidationError (its message, node.failed, run.finished), without
    # the output guardrails (they judged valid answers only)
    replies = [_reply(mode, "not yet")] * retries + [_reply(mode, "the SECRET is 42")]
    runner, state, seen = _run(mode, replies, retries, no_secret)

    result = await runner.run(timeout=30)

    assert isinstance(result.exception, GuardrailTripped)
    assert "SECRET" not in repr(state.get("messages"))
    assert "SECRET" not in str(result.exception)
    assert not [fields for fields in seen if "SECRET" in fields]


async def test_an_answer_refused_and_retried_is_not_previewed_past_the_output_guardrails(
) -> None:
    # a refused answer the model is told to redo was previewed in llm.call.completed; the
    # guardrails of the typed object do not judge it (they would fail on its text), and the
    # valid answer after it passes them
    judged: list[object] = []

    def small(_ctx: object, value: Answer) -> Tripwire | None:
        judged.append(value)
        return Tripwire("too big") if value.n > 10 else None

    replies = [_reply("text", "the SECRET is 42"), _reply("text", 3)]
    runner, _state, seen = _run("text", replies, 1, small)

    result = await runner.run(timeout=30)

    assert result.ok, result.error
    assert judged == [Answer(n=3)]
    assert not [fields for fields in seen if "SECRET" in fields]


async def test_a_durable_runs_record_of_the_last_refused_answer_holds_the_refusal() -> None:
    # a durable run's sealed turn recorded the replies of a typed answer that failed at its
    # last try (the guardrails judged none): its step held the answer they would refuse
    from jianmu.nodes.sealed import RefusedTurn
    from tests.runtime.test_context import FakeSteps

    steps = FakeSteps()
    runner, state, _seen = _run("text", [_reply("text", "the SECRET is 42")], 0, no_secret)
    runner.ctx.steps = steps

    result = await runner.run(timeout=30)

    assert isinstance(result.exception, GuardrailTripped)
    [record] = steps.recorded.values()
    assert isinstance(record, RefusedTurn) and "SECRET" not in repr(record)
    assert "SECRET" not in repr(state.get("messages"))
