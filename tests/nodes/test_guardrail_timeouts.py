"""A guardrail that never answers fails closed after its timeout (``guard.guardrails.timeout_s``,
or the guardrail's own ``timeout_s``): an input or output guardrail fails the run with
`GuardrailTripped`, a tool-output one withholds the result. It hung the run for ever."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jianmu import Constraints, GuardrailTripped, ReactiveRunner, StateManager, Tripwire
from jianmu.config import AppConfig
from jianmu.constraints import DEFAULT_GUARDRAIL_TIMEOUT_S, GuardrailConstraints
from jianmu.llm import ScriptedLLM
from jianmu.nodes.react import create_react_node
from jianmu.nodes.state import AgentState
from jianmu.tools.base import tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SHORT = 0.05  # how long the hung guardrail is waited for: the tests wait on events, not time


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city.

    Args:
        city: the city's name.
    """
    return f"sunny in {city}"


class Hung:
    """A guardrail that waits on an event nobody sets; ``cancelled`` is set when it is stopped."""

    def __init__(self, timeout_s: float | None = None) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        if timeout_s is not None:
            self.timeout_s = timeout_s

    async def __call__(self, ctx: Any, value: Any) -> Tripwire | None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return None


def start(question: str = "Weather in Oslo?") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": question}]})


def config(timeout_s: float | None = SHORT) -> AppConfig:
    return AppConfig.model_validate({"guard": {"guardrails": {"timeout_s": timeout_s}}})


def script() -> ScriptedLLM:
    return ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Oslo"}}], "Sunny."])


@pytest.mark.parametrize("kind", ["input", "output"])
async def test_a_hung_input_or_output_guardrail_fails_the_run_closed(kind: str) -> None:
    hung = Hung()
    tree = create_react_node(script(), [lookup], **{f"{kind}_guardrails": [hung]})
    result = await ReactiveRunner(tree, start(), config=config()).run(timeout=30)
    assert result.status.value == "failure"
    assert isinstance(result.exception, GuardrailTripped)
    assert result.exception.kind == kind and "did not answer within 0.05s" in \
        result.exception.reason
    assert hung.started.is_set() and hung.cancelled.is_set()


async def test_a_hung_tool_output_guardrail_withholds_the_result_and_the_run_goes_on() -> None:
    hung = Hung()
    llm = script()
    tree = create_react_node(llm, [lookup], tool_output_guardrails=[hung])
    state = start()
    result = await ReactiveRunner(tree, state, config=config()).run(timeout=30)
    assert result.ok and hung.cancelled.is_set()
    [seen] = [m.content or "" for m in llm.requests[1].messages if m.role == "tool"]
    assert "sunny" not in seen and "withheld" in seen and "did not answer" in seen


class Stubborn(Hung):
    """A guardrail whose client swallows the cancel and answers anyway (it passes)."""

    async def __call__(self, ctx: Any, value: Any) -> Tripwire | None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
        return None


@pytest.mark.parametrize("kind", ["input", "output"])
async def test_a_guardrail_that_swallows_its_timeout_and_passes_still_trips(kind: str) -> None:
    # its None, said only once it was stopped, passed the message (or the answer) unjudged
    stubborn = Stubborn()
    tree = create_react_node(script(), [lookup], **{f"{kind}_guardrails": [stubborn]})
    result = await ReactiveRunner(tree, start(), config=config()).run(timeout=30)
    assert isinstance(result.exception, GuardrailTripped) and stubborn.cancelled.is_set()
    assert "did not answer within 0.05s" in result.exception.reason


async def test_a_tool_output_guardrail_that_swallows_its_timeout_withholds_the_result() -> None:
    stubborn = Stubborn()
    llm = script()
    tree = create_react_node(llm, [lookup], tool_output_guardrails=[stubborn])
    result = await ReactiveRunner(tree, start(), config=config()).run(timeout=30)
    assert result.ok and stubborn.cancelled.is_set()
    [seen] = [m.content or "" for m in llm.requests[1].messages if m.role == "tool"]
    assert "sunny" not in seen and "did not answer" in seen


async def test_a_guardrails_own_timeout_overrides_the_configured_one() -> None:
    hung = Hung(timeout_s=SHORT)
    tree = create_react_node(script(), [lookup], input_guardrails=[hung])
    result = await ReactiveRunner(tree, start(), config=config(None)).run(timeout=30)
    assert isinstance(result.exception, GuardrailTripped) and "0.05s" in \
        result.exception.reason


def test_the_timeout_has_a_default_and_a_nearer_layer_only_shortens_it() -> None:
    assert GuardrailConstraints().timeout_s is None and DEFAULT_GUARDRAIL_TIMEOUT_S > 0
    merged = Constraints.merge(
        Constraints.model_validate({"guard": {"guardrails": {"timeout_s": 10}}}),
        Constraints.model_validate({"guard": {"guardrails": {"timeout_s": 20}}}),
    )
    assert merged.guard.guardrails.timeout_s == 10
    merged = Constraints.merge(
        Constraints.model_validate({"guard": {"guardrails": {"timeout_s": 20}}}),
        Constraints.model_validate({"guard": {"guardrails": {"timeout_s": 5}}}),
    )
    assert merged.guard.guardrails.timeout_s == 5


# -- a guardrail's first step is taken at once (no timer, no wait for a task when it answers) --
class OwnTimeout:
    """An input guardrail whose first step enters a timeout of its own, then waits past it:
    its timeout is the guardrail's task's, never the model call's."""

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None

    async def __call__(self, ctx: Any, value: Any) -> Tripwire | None:
        self.task = asyncio.current_task()
        async with asyncio.timeout(SHORT):
            await asyncio.Event().wait()
        return None


async def test_a_guardrails_own_timeout_in_its_first_step_ends_the_guardrail_not_the_turn(
) -> None:
    guardrail = OwnTimeout()
    model_asked = asyncio.Event()
    model_task: list[Any] = []

    class Slow(ScriptedLLM):
        async def send(self, request: Any) -> Any:
            model_asked.set()
            model_task.append(asyncio.current_task())
            await asyncio.sleep(SHORT * 4)  # still answering when the guardrail's timer ends
            return await super().send(request)

    tree = create_react_node(Slow(["Sunny."]), [lookup], input_guardrails=[guardrail])
    result = await ReactiveRunner(tree, start()).run(timeout=30)
    # the guardrail failed on its own TimeoutError (closed), in a task of its own
    assert isinstance(result.exception, GuardrailTripped), result.error
    assert "TimeoutError" in result.exception.reason and model_asked.is_set()
    assert guardrail.task is not None and model_task and guardrail.task is not model_task[0]


@pytest.mark.parametrize("kind", ["input", "output"])
@pytest.mark.parametrize("how", ["sync", "async at once"])
async def test_a_guardrail_that_trips_at_once_fails_the_run(kind: str, how: str) -> None:
    def sync_trip(ctx: Any, value: Any) -> Tripwire:
        return Tripwire(f"no: {value}")

    async def async_trip(ctx: Any, value: Any) -> Tripwire:
        return Tripwire(f"no: {value}")

    llm = script()
    guardrail = sync_trip if how == "sync" else async_trip
    tree = create_react_node(llm, [lookup], **{f"{kind}_guardrails": [guardrail]})
    result = await ReactiveRunner(tree, start()).run(timeout=30)
    assert isinstance(result.exception, GuardrailTripped)
    assert result.exception.kind == kind and result.exception.reason.startswith("no: ")
