"""Red team of the output guardrails past a typed answer: an answer its output type refuses is
still written (to be told why) and quoted by the error; the guardrails judge it first."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from jianmu import ReactiveRunner, StateManager
from jianmu.errors import GuardrailTripped
from jianmu.guard.guardrails import Tripwire
from jianmu.llm import LLMResponse, Message, ScriptedLLM
from jianmu.nodes import create_react_node
from jianmu.nodes.output import FINAL_RESULT
from jianmu.nodes.state import AgentState
from jianmu.tools.calls import ToolCall

pytestmark = pytest.mark.anyio


class Answer(BaseModel):
    n: int


def no_secret(_ctx: object, value: object) -> Tripwire | None:
    return Tripwire("says the secret") if "SECRET" in str(value) else None


def _reply(mode: str) -> LLMResponse | str:
    """An answer that does not fit `Answer` and says the secret, as text or as the answer
    tool's call."""
    arguments = {"n": "the SECRET is 42"}
    if mode == "text":
        return json.dumps(arguments)
    call = ToolCall(id="c1", name=FINAL_RESULT, arguments=arguments)
    return LLMResponse(message=Message.assistant(None, tool_calls=[call]))


@pytest.mark.parametrize("mode", ["text", "tool"])
@pytest.mark.parametrize("retries", [0, 1])
async def test_an_answer_the_output_type_refuses_passes_the_output_guardrails(
    mode: str, retries: int,
) -> None:
    # a typed answer that did not validate was written to the conversation, quoted by the
    # retry prompt, previewed in llm.call.completed and, at the last try, by the run's
    # OutputValidationError, without the output guardrails (they judged valid answers only)
    node = create_react_node(
        ScriptedLLM([_reply(mode)] * 3), [], output_guardrails=[no_secret],
        output_type=Answer, output_mode=mode, output_retries=retries,  # type: ignore[arg-type]
    )
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
    runner = ReactiveRunner(node, state)
    seen: list[str] = []
    runner.ctx.events.subscribe("*", lambda event: seen.append(repr(event.fields)))

    result = await runner.run(timeout=30)

    assert isinstance(result.exception, GuardrailTripped)
    assert "SECRET" not in repr(state.get("messages"))
    assert "SECRET" not in str(result.exception)
    assert not [fields for fields in seen if "SECRET" in fields]
