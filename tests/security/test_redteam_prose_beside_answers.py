"""Red team of the output guardrails beside a typed answer: text the model writes next to the
answer (prose beside the answer tool's call, words around a JSON answer) is written to the
conversation and `final_answer` with the typed object, so the guardrails judge it too."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from jianmu import Agent, ReactiveRunner, StateManager
from jianmu.errors import GuardrailTripped
from jianmu.guard.guardrails import Tripwire
from jianmu.llm import LLMResponse, ScriptedLLM
from jianmu.llm.messages import Message
from jianmu.nodes import create_react_node
from jianmu.nodes.output import FINAL_RESULT
from jianmu.nodes.state import AgentState
from jianmu.tools.calls import ToolCall

pytestmark = pytest.mark.anyio


class City(BaseModel):
    name: str


def _reply(mode: str, prose: str, name: str = "Oslo") -> LLMResponse:
    """An answer ``{"name": name}`` with ``prose`` beside it."""
    if mode == "tool":
        call = ToolCall(id="c1", name=FINAL_RESULT, arguments={"name": name})
        return LLMResponse(message=Message.assistant(prose or None, tool_calls=[call]))
    body = json.dumps({"name": name})
    return LLMResponse(message=Message.assistant(f"{prose} {body}".strip()))


class Judge:
    """An output guardrail that refuses what says SECRET, and remembers what it saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, _ctx: object, value: object) -> Tripwire | None:
        self.seen.append(str(value))
        return Tripwire("says the secret") if "SECRET" in str(value) else None


def _runner(mode: str, reply: LLMResponse, judge: Judge,
            ) -> tuple[ReactiveRunner, StateManager, list[str]]:
    node = create_react_node(ScriptedLLM([reply]), [], output_guardrails=[judge],
                             output_type=City, output_mode=mode)  # type: ignore[arg-type]
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "where?"}]})
    runner = ReactiveRunner(node, state)
    seen: list[str] = []
    runner.ctx.events.subscribe("*", lambda event: seen.append(repr(event.fields)))
    return runner, state, seen


@pytest.mark.parametrize("mode", ["tool", "text", "native"])
async def test_prose_beside_a_valid_typed_answer_passes_the_output_guardrails(mode: str) -> None:
    # the typed object was judged, and the prose beside it went into the conversation, the
    # final answer, the events and the checkpoints unjudged
    judge = Judge()
    runner, state, seen = _runner(mode, _reply(mode, "Here it is: SECRET 4111."), judge)
    result = await runner.run()
    assert not result.ok
    assert isinstance(result.exception, GuardrailTripped)
    assert result.exception.kind == "output"
    everything = repr(state.snapshot()) + "".join(seen) + repr(result)
    assert "4111" not in everything
    assert state.get("final_output") is None


@pytest.mark.parametrize("mode", ["tool", "text", "native"])
async def test_clean_prose_beside_the_answer_is_judged_and_kept(mode: str) -> None:
    judge = Judge()
    runner, _, _ = _runner(mode, _reply(mode, "Oslo, I think."), judge)
    result = await runner.run()
    assert result.ok, result.error
    assert result.output == City(name="Oslo")
    assert any("Oslo, I think." in seen for seen in judge.seen)


@pytest.mark.parametrize("mode", ["tool", "text", "native"])
async def test_an_answer_with_nothing_beside_it_is_judged_once(mode: str) -> None:
    # a guardrail may be a paid model call: the JSON of the answer itself is not judged again
    judge = Judge()
    runner, _, _ = _runner(mode, _reply(mode, ""), judge)
    result = await runner.run()
    assert result.ok, result.error
    assert len(judge.seen) == 1, judge.seen


async def test_through_agent_the_prose_is_judged() -> None:
    judge = Judge()
    agent = Agent(ScriptedLLM([_reply("tool", "psst, SECRET")]), output_type=City,
                  output_guardrails=[judge])
    result = await agent.run("where?")
    assert isinstance(result.exception, GuardrailTripped)
    assert all("SECRET" not in (m.content or "") for m in result.messages)
