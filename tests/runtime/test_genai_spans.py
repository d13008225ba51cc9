"""Spans against the OpenTelemetry GenAI semantic conventions: a model call is a ``CLIENT``
span naming its provider and what answered (model, reply id, finish reason); a failed model
call, tool call or run is an ``ERROR`` span with a low-cardinality ``error.type``, a call that
waits for a person is not; a resumed run links to the run it goes on from."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import py_trees
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jianmu import ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.llm import AnthropicProvider, OpenAIProvider, ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node
from jianmu.runtime.checkpoint import links_from
from jianmu.runtime.events import ERROR_TYPE, chat_attributes
from jianmu.tools import tool
from tests.support.model_server import ModelServer, Turn

pytestmark = pytest.mark.anyio


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city.

    Args:
        city: the city's name.
    """
    if city == "nowhere":
        raise ValueError("no such city")
    return "sunny"


@tool(permission="user_confirm")
def pay(amount: int) -> str:
    """Pay an amount (asks first).

    Args:
        amount: how much.
    """
    return f"paid {amount}"


def traced() -> tuple[InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


def chat_state(text: str = "Weather?") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": text}]})


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_call_is_a_client_span_naming_the_provider_and_the_answer(
    api: str, stream: bool
) -> None:
    exporter, provider = traced()
    with ModelServer(model="served-model") as server:
        server.add(Turn(calls=[{"name": "lookup", "arguments": {"city": "Paris"}}]),
                   Turn(text="Sunny.", usage=None))
        llm = (OpenAIProvider("m", base_url=server.openai_url) if api == "openai"
               else AnthropicProvider("m", base_url=server.anthropic_url, api_key="k"))
        tree = create_react_node(llm, [lookup], stream=stream)
        result = await ReactiveRunner(tree, chat_state(), tracer_provider=provider).run(
            timeout=30)
        await llm.close()
    assert result.ok, result.error
    first, second = named(exporter, "chat ")
    for chat in (first, second):
        assert chat.name == "chat m" and chat.kind is SpanKind.CLIENT
        assert chat.attributes["gen_ai.provider.name"] == api
        assert chat.attributes["gen_ai.system"] == api
        assert chat.attributes["gen_ai.request.model"] == "m"
        assert chat.attributes["gen_ai.response.model"] == "served-model"
        assert chat.attributes["server.address"] == "127.0.0.1"
        assert chat.attributes["server.port"] == server.port
        assert str(chat.attributes["gen_ai.response.id"]).startswith(
            "chatcmpl" if api == "openai" else "msg")
        assert chat.status.status_code is StatusCode.UNSET
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert first.attributes["gen_ai.usage.input_tokens"] == 10
    # the server said nothing of the second call's tokens: no count, rather than a 0
    assert "gen_ai.usage.input_tokens" not in second.attributes
    assert "gen_ai.usage.output_tokens" not in second.attributes
    (tool_span,) = named(exporter, "execute_tool ")
    assert tool_span.kind is SpanKind.INTERNAL


def test_a_chat_span_names_its_server_by_host_and_port_alone() -> None:
    llm = OpenAIProvider("m", base_url="https://user:s3cret@models.example/v1", api_key="k")
    attributes = chat_attributes(llm, "m", "agent")
    assert attributes["server.address"] == "models.example"
    assert attributes["server.port"] == 443
    assert not any("s3cret" in str(v) for v in attributes.values())
    # a model that is no server's (a scripted one) names none
    assert "server.address" not in chat_attributes(ScriptedLLM(["hi"]), "m", "agent")


async def test_a_model_call_the_server_fails_is_an_error_span() -> None:
    exporter, provider = traced()
    with ModelServer() as server:  # nothing scripted: the server answers 500
        llm = OpenAIProvider("m", base_url=server.openai_url, max_retries=0)
        tree = create_react_node(llm, [lookup])
        runner = ReactiveRunner(tree, chat_state(), tracer_provider=provider)
        result = await runner.run(timeout=30)
        await llm.close()
    assert result.status is RunStatus.FAILURE
    (chat,) = named(exporter, "chat ")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes[ERROR_TYPE] in {"LLMError", "LLMTransientError"}
    (run,) = named(exporter, "invoke_workflow ")
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes[ERROR_TYPE] == "failure"


async def test_a_tool_call_that_raised_is_an_error_span_typed_by_its_exception() -> None:
    exporter, provider = traced()
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "nowhere"}},
                        {"name": "lookup", "arguments": {"city": "Paris"}}], "Sunny."])
    tree = create_react_node(llm, [lookup])
    result = await ReactiveRunner(tree, chat_state(), tracer_provider=provider).run(timeout=30)
    assert result.ok
    failed, done = sorted(named(exporter, "execute_tool "),
                          key=lambda s: s.attributes["jianmu.tool.ok"])
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes[ERROR_TYPE] == "ValueError"
    assert done.status.status_code is StatusCode.UNSET and ERROR_TYPE not in done.attributes
    (run,) = named(exporter, "invoke_workflow ")
    assert run.status.status_code is StatusCode.UNSET  # the agent went on: the run succeeded


async def test_a_run_that_times_out_is_an_error_span() -> None:
    exporter, provider = traced()
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}]] * 3)
    tree = create_react_node(llm, [lookup])
    result = await ReactiveRunner(tree, chat_state(), tracer_provider=provider).run(
        max_ticks=2)
    assert result.status is not RunStatus.SUCCESS
    (run,) = named(exporter, "invoke_workflow ")
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes[ERROR_TYPE] == result.status.value


async def test_a_resumed_run_links_to_the_run_that_suspended() -> None:
    exporter, provider = traced()
    llm = ScriptedLLM([[{"id": "p1", "name": "pay", "arguments": {"amount": 5}}], "Paid."])
    tree = create_react_node(llm, [pay])
    runner = ReactiveRunner(tree, chat_state("pay 5"), tracer_provider=provider)
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    (suspended,) = named(exporter, "invoke_workflow ")
    assert suspended.status.status_code is StatusCode.UNSET  # waiting is not failing
    runner.approve("p1")
    assert (await runner.run(timeout=30)).ok
    _, resumed = named(exporter, "invoke_workflow ")
    assert [link.context.span_id for link in resumed.links] == [suspended.context.span_id]
    (paid,) = named(exporter, "execute_tool pay")  # in the resumed run's trace
    assert paid.context is not None and resumed.context is not None
    assert paid.context.trace_id == resumed.context.trace_id


def test_a_run_restored_from_its_checkpoint_links_to_the_run_that_saved_it(
    tmp_path: Path,
) -> None:
    """``jianmu resume`` restores in another process: the link comes from the checkpoint."""
    exporter, provider = traced()
    db = tmp_path / "runs.sqlite"
    llm = ScriptedLLM([[{"id": "p1", "name": "pay", "arguments": {"amount": 5}}]])
    runner = ReactiveRunner(create_react_node(llm, [pay]), chat_state("pay 5"),
                            checkpointer=SQLiteCheckpointer(db), run_id="r1",
                            tracer_provider=provider)
    assert runner.run_sync(timeout=30).status is RunStatus.SUSPENDED
    (suspended,) = named(exporter, "invoke_workflow ")
    restored = ReactiveRunner.restore(
        create_react_node(ScriptedLLM(["Paid."]), [pay]), SQLiteCheckpointer(db), "r1",
        state_manager=StateManager(AgentState), tracer_provider=provider)
    restored.approve("p1")
    assert restored.run_sync(timeout=30).ok
    _, resumed = named(exporter, "invoke_workflow ")
    assert [(link.context.trace_id, link.context.span_id) for link in resumed.links] == [
        (suspended.context.trace_id, suspended.context.span_id)]


@pytest.mark.parametrize("record", [None, "x", {"trace_id": "zz", "span_id": "1"},
                                    {"trace_id": "0" * 32, "span_id": "0" * 16}])
def test_a_checkpoint_naming_no_valid_span_links_to_nothing(record: Any) -> None:
    assert links_from(record) == ()


async def test_a_model_call_names_the_agent_that_made_it() -> None:
    exporter, provider = traced()
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}], "Sunny."])
    tree = create_react_node(llm, [lookup], name="forecaster")
    assert (await ReactiveRunner(tree, chat_state(), tracer_provider=provider).run()).ok
    assert {s.attributes["gen_ai.agent.name"] for s in named(exporter, "chat ")} == {
        "forecaster"}


async def test_a_call_waiting_for_a_person_in_a_sub_agent_is_not_an_error() -> None:
    exporter, provider = traced()
    payer = create_react_node(
        ScriptedLLM([[{"id": "p1", "name": "pay", "arguments": {"amount": 5}}], "Paid."]),
        [pay], name="payer")
    lead = create_react_node(
        ScriptedLLM([[{"name": "payer", "arguments": {"input": "pay 5"}}], "Done."]),
        [agent_tool(payer, name="payer", description="Pays.")], name="lead")
    runner = ReactiveRunner(lead, chat_state("pay 5"), tracer_provider=provider)
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    (waiting,) = named(exporter, "execute_tool payer")
    assert waiting.status.status_code is StatusCode.UNSET and ERROR_TYPE not in waiting.attributes
    assert waiting.attributes["jianmu.suspended"] is True
    (sub,) = named(exporter, "invoke_agent payer")
    assert sub.parent is not None and sub.parent.span_id == waiting.context.span_id
    runner.approve(first.pending[0].id)
    assert (await runner.run(timeout=30)).ok
    _, done = named(exporter, "execute_tool payer")
    assert done.status.status_code is StatusCode.UNSET and done.attributes["jianmu.tool.ok"]


class _Open(SpanProcessor):
    """The spans started and not yet ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        del self.open[span.context.span_id]  # a KeyError if a span ended twice


def parent_name(exporter: InMemorySpanExporter, span: ReadableSpan) -> str | None:
    names = {s.context.span_id: s.name for s in exporter.get_finished_spans() if s.context}
    return names.get(span.parent.span_id) if span.parent is not None else None


async def test_an_agent_is_a_span_between_the_run_and_its_calls_closed_at_each_suspend() -> None:
    exporter, provider = traced()
    tracking = _Open()
    provider.add_span_processor(tracking)
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Paris"}}],
                       [{"id": "p1", "name": "pay", "arguments": {"amount": 5}}], "Paid."])
    tree = create_react_node(llm, [lookup, pay], name="clerk")
    runner = ReactiveRunner(tree, chat_state("pay 5"), tracer_provider=provider)
    assert (await runner.run(timeout=30)).status is RunStatus.SUSPENDED
    assert tracking.open == {}  # nothing is left open while a person decides
    runner.approve("p1")
    assert (await runner.run(timeout=30)).ok
    assert tracking.open == {}
    first, second = named(exporter, "invoke_agent clerk")
    assert first.kind is SpanKind.INTERNAL
    assert first.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert first.attributes["gen_ai.agent.name"] == "clerk"
    assert parent_name(exporter, first) == parent_name(exporter, second) == (
        "invoke_workflow clerk")
    for call in [*named(exporter, "chat "), *named(exporter, "execute_tool ")]:
        assert parent_name(exporter, call) == "invoke_agent clerk"
    assert first.context is not None and second.context is not None
    assert first.context.trace_id != second.context.trace_id  # each run its own trace


async def test_a_sub_agent_is_one_agent_span_under_the_call_that_started_it() -> None:
    exporter, provider = traced()
    researcher = create_react_node(ScriptedLLM(["Tides: twice a day."]), [], name="researcher")
    lead = create_react_node(
        ScriptedLLM([[{"name": "researcher", "arguments": {"input": "tides?"}}], "Twice."]),
        [agent_tool(researcher, name="researcher", description="Researches.")], name="lead")
    assert (await ReactiveRunner(lead, chat_state(), tracer_provider=provider).run()).ok
    (sub,) = named(exporter, "invoke_agent researcher")
    assert parent_name(exporter, sub) == "execute_tool researcher"
    (call,) = named(exporter, "execute_tool researcher")
    assert parent_name(exporter, call) == "invoke_agent lead"
    sub_chat = next(s for s in named(exporter, "chat ")
                    if s.attributes["gen_ai.agent.name"] == "researcher")
    assert parent_name(exporter, sub_chat) == "invoke_agent researcher"


@tool
def store(blob: str) -> str:
    """Store a blob and echo it.

    Args:
        blob: what to store.
    """
    return blob


async def test_captured_content_is_cut_to_a_bounded_size() -> None:
    """With capture_content, a call's arguments went on its span whole: an argument of a
    megabyte was a megabyte attribute in every backend (the result was already cut)."""
    from jianmu.config import AppConfig
    from jianmu.runtime.events import CONTENT_CHARS

    exporter, provider = traced()
    blob = "x" * 1_000_000
    llm = ScriptedLLM([[{"name": "store", "arguments": {"blob": blob}}], "Stored."])
    runner = ReactiveRunner(create_react_node(llm, [store]), chat_state(),
                            tracer_provider=provider,
                            config=AppConfig(telemetry={"capture_content": True}))
    assert (await runner.run(timeout=30)).ok
    (call,) = named(exporter, "execute_tool store")
    arguments = str(call.attributes["gen_ai.tool.call.arguments"])
    result = str(call.attributes["gen_ai.tool.call.result"])
    assert arguments.startswith('{"blob": "xxx') and len(arguments) == CONTENT_CHARS
    assert result.startswith("xxx") and len(result) <= CONTENT_CHARS


@tool
async def wait_long(topic: str) -> str:
    """Take a long time.

    Args:
        topic: about what.
    """
    await asyncio.Event().wait()
    return "never"


class _Switch(py_trees.behaviour.Behaviour):
    """A condition that holds once `on` is set."""

    def __init__(self) -> None:
        super().__init__("Urgent?")
        self.on = False

    def update(self) -> py_trees.common.Status:
        return py_trees.common.Status.SUCCESS if self.on else py_trees.common.Status.FAILURE


@pytest.mark.parametrize("how", ["pre-empted", "cancelled"])
async def test_a_call_stopped_from_outside_is_not_an_error_span(how: str) -> None:
    """A call a higher-priority branch pre-empted (or `cancel()` stopped) was an ``ERROR``
    span typed ``CancelledError``: a red call in the trace of a run that did what it should."""
    exporter, provider = traced()
    tracking = _Open()
    provider.add_span_processor(tracking)
    started = asyncio.Event()
    provider.add_span_processor(_OnStart("execute_tool wait_long", started))
    urgent = _Switch()
    agent = create_react_node(ScriptedLLM([[{"name": "wait_long", "arguments": {"topic": "x"}}]]),
                              [wait_long], name="worker")
    tree = py_trees.composites.Selector("Either", memory=False, children=[
        urgent, agent])
    runner = ReactiveRunner(tree, chat_state(), tracer_provider=provider)
    running = asyncio.create_task(runner.run(timeout=30))
    await asyncio.wait_for(started.wait(), 30)
    if how == "cancelled":
        runner.cancel()
    else:
        urgent.on = True
        runner.wake()
    result = await running
    assert result.status is (RunStatus.CANCELLED if how == "cancelled" else RunStatus.SUCCESS)
    assert tracking.open == {}
    (call,) = named(exporter, "execute_tool wait_long")
    assert call.status.status_code is StatusCode.UNSET and ERROR_TYPE not in call.attributes
    assert call.attributes["jianmu.stopped"] is True
    (run,) = named(exporter, "invoke_workflow ")
    assert run.status.status_code is StatusCode.UNSET


class _OnStart(SpanProcessor):
    """Sets ``event`` when a span named ``name`` starts."""

    def __init__(self, name: str, event: asyncio.Event) -> None:
        self.name, self.event = name, event
        self.loop = asyncio.get_running_loop()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if span.name == self.name:
            self.loop.call_soon_threadsafe(self.event.set)


async def test_a_recovered_durable_runs_replayed_calls_say_so_and_spend_no_tokens() -> None:
    """A recovered durable run replays the model's recorded answers and the tools' recorded
    results: its spans drew them as calls made again, each answer with its tokens, which a
    backend adding up the cost counted a second time."""
    pytest.importorskip("dbos")
    from jianmu.durable._workflow import DBOSSteps
    from tests.runtime.test_context import FakeSteps

    def agent(llm: ScriptedLLM) -> Any:
        return create_react_node(llm, [lookup], name="clerk")

    recorder = FakeSteps()
    first = ReactiveRunner(agent(ScriptedLLM([
        [{"id": "c1", "name": "lookup", "arguments": {"city": "Paris"}}], "Sunny."])),
        chat_state())
    first.ctx.steps = recorder
    assert (await first.run(timeout=30)).ok
    exporter, provider = traced()
    # every step recorded, as DBOS names them: the recovered run asks and runs nothing
    again = ReactiveRunner(agent(ScriptedLLM([])), chat_state(), tracer_provider=provider)
    again.ctx.steps = DBOSSteps({f"jianmu:{k}": v for k, v in recorder.recorded.items()},
                                set())
    result = await again.run(timeout=30)
    assert result.ok and result.usage is not None and result.usage.input_tokens > 0
    chats, (call,) = named(exporter, "chat "), named(exporter, "execute_tool lookup")
    assert len(chats) == 2
    for replayed in (*chats, call):
        assert replayed.attributes["jianmu.replayed"] is True
    for chat in chats:
        assert "gen_ai.usage.input_tokens" not in chat.attributes
        assert chat.attributes["gen_ai.response.model"] == "scripted"  # what answered, then
    for other in named(exporter, "invoke_"):
        assert "jianmu.replayed" not in other.attributes
