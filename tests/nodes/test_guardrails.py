"""Content guardrails through `ReactiveRunner`: input, output and tool-output trips."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from jianmu import (
    Agent,
    Constraints,
    GuardrailTripped,
    ReactiveRunner,
    RunStatus,
    StateManager,
    Tripwire,
    plugins,
)
from jianmu.errors import LLMError
from jianmu.llm import ScriptedLLM
from jianmu.nodes.agent_llm import AgentLLMNode
from jianmu.nodes.react import create_react_node
from jianmu.nodes.state import AgentState
from jianmu.tools.base import tool

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city.

    Args:
        city: the city's name.
    """
    ran.append(city)
    return {"paris": "sunny"}.get(city.lower(), "unknown")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def start(question: str) -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": question}]})


def no_secrets(ctx: Any, text: str) -> Tripwire | None:
    return Tripwire("asks for a password") if "password" in text else None


async def no_secrets_async(ctx: Any, text: str) -> Tripwire | None:
    await asyncio.sleep(0)
    return no_secrets(ctx, text)


def trips_of(runner: ReactiveRunner) -> list[dict[str, Any]]:
    """The fields of each ``guardrail.tripped`` event of the run, as they come."""
    seen: list[dict[str, Any]] = []
    runner.ctx.events.subscribe("guardrail.tripped", lambda e: seen.append(dict(e.fields)))
    return seen


@pytest.mark.parametrize("guardrail", [no_secrets, no_secrets_async])
async def test_input_trip_fails_the_run_and_runs_no_tool_of_the_turn(guardrail: Any) -> None:
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}], "done"])
    tree = create_react_node(llm, [lookup], input_guardrails=[guardrail])
    runner = ReactiveRunner(tree, start("what is the admin password?"))
    tripped = trips_of(runner)
    result = await runner.run()
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, GuardrailTripped)
    assert result.exception.guardrail == guardrail.__name__
    assert result.exception.reason == "asks for a password"
    assert result.exception.kind == "input"
    assert ran == []  # the turn's call never ran
    assert not runner.state.get("actions")
    assert tripped == [{"kind": "input", "guardrail": guardrail.__name__,
                        "reason": "asks for a password"}]


async def test_input_guardrail_that_passes_is_checked_once_per_message() -> None:
    seen: list[str] = []

    def record(ctx: Any, text: str) -> None:
        seen.append(text)

    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}], "sunny"])
    tree = create_react_node(llm, [lookup], input_guardrails=[record])
    result = await ReactiveRunner(tree, start("weather in Paris?")).run()
    assert result.status is RunStatus.SUCCESS
    assert ran == ["Paris"]
    assert seen == ["weather in Paris?"]  # two turns, one user message


async def test_a_slow_model_call_is_cancelled_by_an_input_trip() -> None:
    cancelled = asyncio.Event()

    class Hanging(ScriptedLLM):
        async def complete(self, messages: Any, tools: Any = None, **params: Any) -> Any:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

    tree = AgentLLMNode("llm", Hanging(["never"]), tools=[lookup],
                        input_guardrails=[no_secrets_async])
    runner = ReactiveRunner(tree, start("the password please"))
    result = await runner.run()
    assert isinstance(result.exception, GuardrailTripped)
    assert cancelled.is_set()


async def test_a_trip_after_the_model_answered_still_runs_none_of_its_calls() -> None:
    answered = asyncio.Event()

    class Answering(ScriptedLLM):
        async def complete(self, messages: Any, tools: Any = None, **params: Any) -> Any:
            reply = await super().complete(messages, tools=tools, **params)
            answered.set()
            return reply

    async def slow_check(ctx: Any, text: str) -> Tripwire:
        await answered.wait()  # trips only once the model has asked for its calls
        return Tripwire("too late for the calls")

    llm = Answering([[{"name": "lookup", "arguments": {"city": "Paris"}}], "done"])
    tree = create_react_node(llm, [lookup], input_guardrails=[slow_check])
    runner = ReactiveRunner(tree, start("weather in Paris?"))
    result = await runner.run()
    assert isinstance(result.exception, GuardrailTripped)
    assert answered.is_set() and ran == []
    assert not runner.state.get("actions")
    assert runner.state.get("usage").requests == 1  # the answered call's tokens count


async def test_a_failed_model_call_with_passing_guardrails_is_the_calls_failure() -> None:
    gate = asyncio.Event()

    async def waits(ctx: Any, text: str) -> None:
        await gate.wait()  # still running when the call fails: it is cancelled
        return None

    class Failing(ScriptedLLM):
        async def complete(self, messages: Any, tools: Any = None, **params: Any) -> Any:
            raise LLMError("HTTP 500 from the server")

    tree = AgentLLMNode("llm", Failing(["never"]), tools=[lookup], input_guardrails=[waits])
    result = await ReactiveRunner(tree, start("hello")).run()
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, LLMError)


async def test_output_trip_fails_the_run_and_writes_no_answer() -> None:
    def no_shouting(ctx: Any, answer: str) -> Tripwire | None:
        return Tripwire("shouts") if answer.isupper() else None

    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}], "SUNNY"])
    tree = create_react_node(llm, [lookup], output_guardrails=[no_shouting])
    runner = ReactiveRunner(tree, start("weather in Paris?"))
    result = await runner.run()
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, GuardrailTripped)
    assert (result.exception.guardrail, result.exception.kind) == ("no_shouting", "output")
    assert runner.state.get("final_answer") is None
    assert all(m.content != "SUNNY" for m in runner.state.get("messages"))
    assert runner.state.get("usage").requests == 2  # the tripped turn's tokens still count


class Weather(BaseModel):
    city: str
    degrees: int


async def test_output_guardrail_sees_the_typed_output() -> None:
    seen: list[Any] = []

    def too_hot(ctx: Any, value: Weather) -> Tripwire | None:
        seen.append(value)
        return Tripwire("implausible") if value.degrees > 60 else None

    llm = ScriptedLLM([[{"name": "final_result", "arguments": {"city": "Oslo", "degrees": 99}}]])
    tree = create_react_node(llm, [], output_type=Weather, output_guardrails=[too_hot])
    result = await ReactiveRunner(tree, start("weather?")).run()
    assert isinstance(result.exception, GuardrailTripped)
    assert seen == [Weather(city="Oslo", degrees=99)]
    assert result.output is None


async def test_tool_output_trip_withholds_the_result_and_the_run_goes_on() -> None:
    def no_sun(ctx: Any, result: Any) -> Tripwire | None:
        return Tripwire("mentions the sun") if "sunny" in result.text else None

    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}], "no idea"])
    tree = create_react_node(llm, [lookup], tool_output_guardrails=[no_sun])
    runner = ReactiveRunner(tree, start("weather in Paris?"))
    tripped = trips_of(runner)
    result = await runner.run()
    assert result.status is RunStatus.SUCCESS
    assert ran == ["Paris"]
    observation = next(m for m in runner.state.get("messages") if m.role == "tool")
    assert "sunny" not in observation.content
    assert "withheld" in observation.content and "no_sun" in observation.content
    # the model read the refusal, not the result
    sent = llm.requests[1].messages
    assert any("withheld" in (m.content or "") for m in sent if m.role == "tool")
    assert [(t["kind"], t["tool"]) for t in tripped] == [("tool_output", "lookup")]


async def test_a_guardrail_that_raises_or_returns_junk_trips(
        caplog: pytest.LogCaptureFixture) -> None:
    def broken(ctx: Any, text: str) -> None:
        raise RuntimeError("boom")

    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}]])
    result = await ReactiveRunner(
        create_react_node(llm, [lookup], input_guardrails=[broken]), start("hi")).run()
    assert isinstance(result.exception, GuardrailTripped)
    assert "RuntimeError" in result.exception.reason
    assert "boom" not in result.exception.reason  # a message may quote what it checked
    # its author reads the whole error in the log
    assert any(r.name == "jianmu.guard.guardrails" and r.exc_info and "boom" in str(r.exc_info[1])
               for r in caplog.records)
    assert ran == []

    def junk(ctx: Any, text: str) -> Any:
        return False

    llm = ScriptedLLM(["hello"])
    result = await ReactiveRunner(
        create_react_node(llm, [], output_guardrails=[junk]), start("hi")).run()
    assert isinstance(result.exception, GuardrailTripped)


class Flag:
    """A plug-in guardrail: trips on the word 'forbidden'."""

    def __call__(self, ctx: Any, value: Any) -> Tripwire | None:
        text = getattr(value, "text", value)
        return Tripwire("forbidden word") if "forbidden" in str(text) else None


async def test_configured_guardrails_by_plugin_name() -> None:
    with plugins.registered("guardrail", "flag", Flag):
        constraints = Constraints.model_validate(
            {"guard": {"guardrails": {"input": ["flag"]}}}
        )
        llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}]])
        runner = ReactiveRunner(create_react_node(llm, [lookup]), start("a forbidden thing"),
                                constraints=constraints)
        result = await runner.run()
        assert isinstance(result.exception, GuardrailTripped)
        assert result.exception.guardrail == "flag"
        assert ran == []


async def test_trip_span_is_recorded() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    llm = ScriptedLLM(["the password is hunter2"])
    tree = create_react_node(llm, [], output_guardrails=[no_secrets])
    runner = ReactiveRunner(tree, start("hi"), tracer_provider=provider)
    result = await runner.run()
    assert isinstance(result.exception, GuardrailTripped)
    spans = [s for s in exporter.get_finished_spans() if s.name == "guardrail no_secrets"]
    assert len(spans) == 1
    assert spans[0].attributes["jianmu.guardrail.kind"] == "output"
    assert spans[0].attributes["error.type"] == "GuardrailTripped"


@pytest.mark.parametrize("kind", ["input", "output", "tool_output"])
@pytest.mark.parametrize("reason", [123, None])
async def test_a_trip_whose_reason_is_not_text_trips_alike_when_traced(
    kind: str, reason: object,
) -> None:
    # with a tracer and capture_content, the reason was cut to length for the span and a
    # reason that is not text raised TypeError there: the node failed with it instead of the
    # trip (a tool-output trip failed the run where untraced it withheld the result)
    from jianmu import AppConfig

    def odd(_ctx: Any, _value: Any) -> Tripwire:
        return Tripwire(reason)  # type: ignore[arg-type]

    config = AppConfig.model_validate({"telemetry": {"capture_content": True}})
    outcomes = []
    for provider in (None, TracerProvider()):
        llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}], "done"])
        tree = create_react_node(llm, [lookup], **{f"{kind}_guardrails": [odd]})
        runner = ReactiveRunner(tree, start("hi"), config=config, tracer_provider=provider)
        result = await runner.run(timeout=30)
        told = [m.content for m in runner.state.get("messages") if m.role == "tool"]
        outcomes.append((result.status, type(result.exception).__name__, told))
    assert outcomes[0] == outcomes[1]
    if kind == "tool_output":  # withheld, the model told why
        assert outcomes[0][0] is RunStatus.SUCCESS and "not text" in str(outcomes[0][2])
    else:
        assert outcomes[0][1] == "GuardrailTripped"


async def test_agent_takes_the_guardrail_keywords() -> None:
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}], "done"])
    agent = Agent(llm, tools=[lookup], input_guardrails=[no_secrets])
    result = await agent.run("the password?")
    assert isinstance(result.exception, GuardrailTripped)
    assert ran == []


def test_tool_output_guardrails_need_an_executor() -> None:
    with pytest.raises(ValueError, match="ToolExecutor"):
        AgentLLMNode("llm", ScriptedLLM(["x"]), tools=[lookup],
                     tool_output_guardrails=[no_secrets])


def test_guardrail_tripped_pickles() -> None:
    import pickle

    exc = pickle.loads(pickle.dumps(GuardrailTripped("g", "why", "output")))
    assert (exc.guardrail, exc.reason, exc.kind) == ("g", "why", "output")
    assert str(exc) == "output guardrail 'g' tripped: why"



async def test_in_a_durable_run_a_replayed_result_is_checked_again_and_a_trip_fails() -> None:
    from tests.runtime.test_context import FakeSteps

    def no_sun(ctx: Any, result: Any) -> Tripwire | None:
        return Tripwire("mentions the sun") if "sunny" in result.text else None

    def script() -> ScriptedLLM:
        return ScriptedLLM([[{"id": "c1", "name": "lookup", "arguments": {"city": "Paris"}}],
                            "no idea"])

    steps = FakeSteps()
    runner = ReactiveRunner(create_react_node(script(), [lookup],
                                              tool_output_guardrails=[no_sun]), start("go"))
    runner.ctx.steps = steps
    assert (await runner.run(timeout=30)).ok
    # the step keeps what the model may read, never the result a guardrail withheld
    assert not steps.recorded["tool:c1"].ok and "withheld" in steps.recorded["tool:c1"].error
    # replayed from the record: the tool does not run again, and its result stays withheld
    again = ReactiveRunner(create_react_node(script(), [lookup],
                                             tool_output_guardrails=[no_sun]), start("go"))
    again.ctx.steps = FakeSteps(steps.recorded)
    assert (await again.run(timeout=30)).ok
    assert ran == ["Paris"]
    observation = next(m for m in again.state.get("messages") if m.role == "tool")
    assert "withheld" in observation.content
    # a result recorded before a guardrail was added is checked by it on replay
    passed = FakeSteps()
    plain = ReactiveRunner(create_react_node(script(), [lookup]), start("go"))
    plain.ctx.steps = passed
    assert (await plain.run(timeout=30)).ok and passed.recorded["tool:c1"].output == "sunny"
    later = ReactiveRunner(create_react_node(script(), [lookup],
                                             tool_output_guardrails=[no_sun]), start("go"))
    later.ctx.steps = FakeSteps(passed.recorded)
    assert (await later.run(timeout=30)).ok
    assert ran == ["Paris", "Paris"]
    observation = next(m for m in later.state.get("messages") if m.role == "tool")
    assert "withheld" in observation.content

    tripped = ReactiveRunner(create_react_node(script(), [lookup],
                                               input_guardrails=[no_secrets]),
                             start("the password"))
    tripped.ctx.steps = FakeSteps()
    result = await tripped.run(timeout=30)
    assert isinstance(result.exception, GuardrailTripped) and ran == ["Paris", "Paris"]


def test_a_given_history_is_the_runs_own_and_its_earlier_user_messages_are_not_checked() -> None:
    # README: a history given to a run is the run's own; a service that takes the whole
    # conversation from its client checks that history itself
    seen: list[Any] = []

    def secrets_seen(ctx: Any, text: str) -> Tripwire | None:
        seen.append(text)
        return no_secrets(ctx, text)

    agent = Agent(ScriptedLLM(["ok"]), input_guardrails=[secrets_seen])
    result = agent.run_sync("hello", history=[
        {"role": "user", "content": "my password is hunter2"},
        {"role": "assistant", "content": "fine"}])
    assert result.ok and seen == ["hello"]


async def no_secrets_at_once(ctx: Any, text: str) -> Tripwire | None:
    return no_secrets(ctx, text)  # async, but answers without waiting


@pytest.mark.parametrize("guardrail", [no_secrets, no_secrets_at_once])
async def test_input_guardrails_that_passed_at_once_leave_the_turn_streamed(
    guardrail: Any,
) -> None:
    # README: a turn that input guardrails *still* check is not streamed; once they passed
    # (a sync one, before the model was asked) the chat loop prints the answer as it comes
    async def deltas(question: str) -> tuple[list[str], Any]:
        agent = Agent(ScriptedLLM(["Hello Ada, nice to meet you."]), input_guardrails=[guardrail])
        events = [event async for event in agent.stream(question)]
        texts = [e.fields["text"] for e in events if e.name == "llm.call.delta"]
        return texts, events[-1].fields["result"]

    texts, result = await deltas("I am Ada.")
    assert result.ok and len(texts) > 1 and "".join(texts) == "Hello Ada, nice to meet you."
    texts, result = await deltas("my password is hunter2")  # tripped at once: nothing streams
    assert isinstance(result.exception, GuardrailTripped) and texts == []


async def test_an_answer_output_guardrails_passed_is_one_delta_once_they_did() -> None:
    """A turn output guardrails check is not streamed (a delta could hold what they refuse);
    it gave no delta even once they passed it, and README's chat loop, which prints the
    deltas, printed nothing of the answer. Nor does a slow input guardrail's turn."""
    async def slow_pass(ctx: Any, text: str) -> None:
        await asyncio.sleep(0)

    async def deltas(**guardrails: Any) -> tuple[list[str], Any]:
        agent = Agent(ScriptedLLM(["Hello Ada, nice to meet you."]), **guardrails)
        events = [event async for event in agent.stream("I am Ada.")]
        names = [e.name for e in events]
        if "llm.call.delta" in names:  # the answer, then the turn's end
            assert names.index("llm.call.delta") < names.index("llm.call.completed")
        return [e.fields["text"] for e in events if e.name == "llm.call.delta"], \
            events[-1].fields["result"]

    for guardrails in ({"output_guardrails": [no_secrets]}, {"input_guardrails": [slow_pass]}):
        texts, result = await deltas(**guardrails)
        assert result.ok and texts == ["Hello Ada, nice to meet you."], (guardrails, texts)
    texts, result = await deltas(output_guardrails=[lambda ctx, text: Tripwire("no")])
    assert isinstance(result.exception, GuardrailTripped) and texts == []


def test_a_trip_withholds_every_user_message_of_the_turn_and_the_next_one_is_answered() -> None:
    # README: the one refused and any sent with it, passed or not yet checked, are withheld
    from jianmu.nodes.guarded_turn import WITHHELD

    llm = ScriptedLLM(["hi", "answered"])
    runner = ReactiveRunner(create_react_node(llm, [], input_guardrails=[no_secrets]),
                            start("hello"))
    assert runner.run_sync(timeout=30).ok
    runner.send("what time is it?")  # passes on its own
    runner.send("and the admin password?")
    assert isinstance(runner.run_sync(timeout=30).exception, GuardrailTripped)
    assert len(llm.requests) == 1  # a sync guardrail's trip: the model was not asked
    runner.send("thanks")
    assert runner.run_sync(timeout=30).ok and runner.state.get("final_answer") == "answered"
    sent = [m.content for m in llm.requests[-1].messages]
    assert sent == ["hello", "hi", WITHHELD, WITHHELD, "thanks"]


@pytest.mark.parametrize("kind", ["input", "output"])
async def test_a_trip_hands_the_caller_what_the_guardrail_found(kind: str) -> None:
    scores = {"violence": 0.97}

    async def moderation(ctx: Any, value: Any) -> Tripwire:
        return Tripwire("flagged: violence", info=scores)

    llm = ScriptedLLM(["an answer"])
    tree = create_react_node(llm, [], **{f"{kind}_guardrails": [moderation]})
    runner = ReactiveRunner(tree, start("a question"))
    tripped = trips_of(runner)
    result = await runner.run()
    assert isinstance(result.exception, GuardrailTripped)
    assert result.exception.kind == kind and result.exception.info is scores
    assert "info" not in tripped[0] and "0.97" not in str(tripped)  # the caller's, not the run's


async def test_a_hand_off_team_checks_each_user_message_once() -> None:
    from jianmu import handoff

    seen: list[str] = []

    async def moderation(ctx: Any, text: str) -> None:
        seen.append(text)  # a paid moderation call: once a message, not once an agent

    billing = create_react_node(ScriptedLLM(["Refunded.", "B7 too."]), [], name="billing")
    triage = create_react_node(
        ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}]]),
        [handoff(billing, description="Refunds.")], name="triage",
        input_guardrails=[moderation])
    runner = ReactiveRunner(triage, start("Refund A1?"))
    assert (await runner.run()).status is RunStatus.SUCCESS
    runner.send("And B7?")
    assert (await runner.run()).status is RunStatus.SUCCESS
    assert runner.state.get("final_answer") == "B7 too."
    assert seen == ["Refund A1?", "And B7?"]
