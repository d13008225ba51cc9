"""`FallbackLLM`: the next model answers when one is rate-limited or down, over real HTTP; a
caller's error (400, 401) is raised, not passed on; from the config too."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from jianmu import FallbackLLM, ReactiveRunner, StateManager
from jianmu.config import LLMConfig
from jianmu.errors import ConfigError, LLMError, LLMTransientError
from jianmu.llm import OpenAIProvider, ScriptedLLM, from_config
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import tool
from tests.support.fake_openai import FakeError, FakeOpenAIServer
from tests.support.model_server import MODES


@tool
def weather(city: str) -> str:
    """The weather.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


@pytest.fixture
def servers() -> Iterator[list[FakeOpenAIServer]]:
    """Three OpenAI-compatible servers: a rate-limited one, one that is down, one that works."""
    with ExitStack() as stack:
        yield [stack.enter_context(FakeOpenAIServer(model=name))
               for name in ("primary", "secondary", "tertiary")]


def _provider(server: FakeOpenAIServer) -> OpenAIProvider:
    return OpenAIProvider(server.model, base_url=server.base_url, api_key="test",
                          max_retries=0, retry_backoff=0)


def _run(llm: Any) -> tuple[Any, list[Any], StateManager]:
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Oslo?"}]})
    runner = ReactiveRunner(create_react_node(llm, [weather]), state)
    seen: list[Any] = []
    runner.ctx.events.subscribe("llm.*", seen.append)
    return runner.run_sync(timeout=60), seen, state


def test_429_then_503_then_an_answer(servers: list[FakeOpenAIServer]) -> None:
    primary, secondary, tertiary = servers
    primary.add(FakeError(status=429, message="slow down"), FakeError(status=429))
    secondary.add(FakeError(status=503, message="overloaded"), FakeError(status=503))
    tertiary.add([{"name": "weather", "arguments": {"city": "Oslo"}}], "Sunny in Oslo.")
    llm = FallbackLLM([_provider(s) for s in servers])
    result, seen, state = _run(llm)
    assert result.ok, result.error
    assert state.get("final_answer") == "Sunny in Oslo."
    switches = [(e.fields["from"], e.fields["to"]) for e in seen if e.name == "llm.fallback"]
    assert switches == [("primary", "secondary"), ("secondary", "tertiary")] * 2
    errors = [e.fields["error"] for e in seen if e.name == "llm.fallback"]
    assert "HTTP 429" in errors[0] and "slow down" in errors[0]
    assert "HTTP 503" in errors[1] and "overloaded" in errors[1]
    answered = [e.fields["model"] for e in seen if e.name == "llm.call.completed"]
    assert answered == ["tertiary", "tertiary"]  # which model answered each turn
    assert list(llm.usage_by_model) == ["tertiary"]  # usage counted per model
    spent = state.get("usage")
    assert llm.usage_by_model["tertiary"].total_tokens == spent.total_tokens
    assert llm.usage_by_model["tertiary"].requests == spent.requests == 2
    assert (len(primary.requests), len(secondary.requests), len(tertiary.requests)) == (2, 2, 2)


@pytest.mark.parametrize("status", [400, 401])
def test_a_callers_error_is_raised_not_passed_on(servers: list[FakeOpenAIServer],
                                                 status: int) -> None:
    primary, secondary, _ = servers
    primary.add(FakeError(status=status, message="bad key"))
    secondary.add("never asked")
    result, seen, _state = _run(FallbackLLM([_provider(primary), _provider(secondary)]))
    assert result.status.value == "failure"
    assert f"HTTP {status}" in (result.error or "")
    assert not [e for e in seen if e.name == "llm.fallback"]
    assert secondary.requests == []


@pytest.mark.anyio
async def test_the_last_models_failure_is_raised(servers: list[FakeOpenAIServer]) -> None:
    primary, secondary, _ = servers
    primary.add(FakeError(status=429))
    secondary.add(FakeError(status=502, message="bad gateway"))
    llm = FallbackLLM([_provider(primary), _provider(secondary)])
    with pytest.raises(LLMTransientError, match="HTTP 502"):
        await llm.complete([{"role": "user", "content": "hi"}])
    await llm.close()


@pytest.mark.anyio
async def test_a_stream_falls_back_before_its_first_delta(
        servers: list[FakeOpenAIServer]) -> None:
    primary, secondary, _ = servers
    primary.add(FakeError(status=503))
    secondary.add("Hello from the second model.")
    llm = FallbackLLM([_provider(primary), _provider(secondary)])
    events = [e async for e in llm.stream([{"role": "user", "content": "hi"}])]
    assert events[-1].response.text == "Hello from the second model."
    assert events[-1].response.model == "secondary"
    await llm.close()


def test_from_the_config() -> None:
    config = LLMConfig.model_validate({
        "provider": "scripted", "params": {"responses": ["one"]},
        "fallback": [{"provider": "scripted", "model": "backup",
                      "params": {"responses": ["two"]}}],
    })
    llm = from_config(config)
    assert isinstance(llm, FallbackLLM)
    assert [type(m) for m in llm.models] == [ScriptedLLM, ScriptedLLM]
    assert [m.model for m in llm.models] == ["scripted", "backup"]
    with pytest.raises(ValueError, match="fallback model lists no fallback"):
        LLMConfig.model_validate({"model": "a", "fallback": [
            {"model": "b", "fallback": [{"model": "c"}]}]})
    with pytest.raises(ConfigError, match="name the first model's own provider"):
        from_config(LLMConfig.model_validate({"provider": "fallback", "fallback": [
            {"provider": "scripted", "params": {"responses": ["x"]}}]}))


def test_no_models_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one model"):
        FallbackLLM([])
    assert issubclass(LLMTransientError, LLMError)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_fallback_serves_several_turns_on_one_kept_alive_connection(stream: bool) -> None:
    import socket

    from jianmu.llm import AnthropicProvider
    from tests.support.model_server import ModelServer

    # bound and held but never listening: a connection to it is refused, and no other socket
    # (the model server's included) can take the port meanwhile
    with socket.socket() as held, ModelServer() as server:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        server.add("First.", "Second.", "Third.")
        primary = OpenAIProvider("down", base_url=f"http://127.0.0.1:{port}/v1",
                                 api_key="test", max_retries=0, retry_backoff=0)
        backup = AnthropicProvider("backup", base_url=server.anthropic_url, max_retries=0)
        llm = FallbackLLM([primary, backup])
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        runner = ReactiveRunner(create_react_node(llm, [], stream=stream), state)
        seen: list[Any] = []
        runner.ctx.events.subscribe("llm.fallback", seen.append)
        for turn, answer in enumerate(("First.", "Second.", "Third.")):
            if turn:
                runner.send(f"and turn {turn}?")
            result = runner.run_sync(timeout=60)  # each run_sync on the runner's kept loop
            assert result.ok, result.error
            assert state.get("final_answer") == answer
        assert [(e.fields["from"], e.fields["to"]) for e in seen] == [("down", "backup")] * 3
        assert len(server.requests) == 3 and len(server.connections) == 1
        assert llm.usage_by_model["backup"].requests == 3 and "down" not in llm.usage_by_model


class _Down(ScriptedLLM):
    """A model that is always rate-limited."""

    async def send(self, request: Any) -> Any:
        raise LLMTransientError("rate limited")


@pytest.mark.anyio
async def test_fallback_events_scope_says_switches_to_a_listener_and_hides_an_outer_block(
) -> None:
    from jianmu.llm import fallback_events

    llm = FallbackLLM([_Down([], model="down"), ScriptedLLM(["ok"] * 4, model="up")])
    outer: list[str] = []
    inner: list[str] = []
    ask = [{"role": "user", "content": "hi"}]
    with fallback_events.scope(lambda name, **f: inner.append(name), heard=False):
        assert (await llm.complete(ask)).text == "ok"  # nobody hears: nothing said
    assert inner == []
    with fallback_events(lambda name, **f: outer.append(name)):
        # an outer block's emit is never borrowed: the inner one takes its place
        with fallback_events.scope(lambda name, **f: inner.append(name), heard=False):
            await llm.complete(ask)
        assert outer == [] and inner == ["llm.fallback"]
        await llm.complete(ask)
    assert outer == ["llm.fallback"]
    with fallback_events.scope(lambda name, **f: inner.append(name), heard=True):
        await llm.complete(ask)
    assert inner == ["llm.fallback", "llm.fallback"]


class _Streams(ScriptedLLM):
    """A model whose stream says when it is closed (a real one gives its connection back)."""

    def __init__(self, model: str, closed: list[str]) -> None:
        super().__init__([], model=model)
        self.closed = closed

    async def send_stream(self, request: Any) -> Any:
        from jianmu.llm import TextDelta

        try:
            yield TextDelta(text="Hel")
            yield TextDelta(text="lo")
        finally:
            self.closed.append(self.model)


@pytest.mark.anyio
@pytest.mark.parametrize("through", ["fallback", "stream"])
async def test_a_stream_closed_early_closes_the_models_stream_at_once(through: str) -> None:
    """A reader that stops (a cancel, the agent node at `StreamDone`) closes the stream; the
    model's own stream under it was left to the loop's finalizer, its connection held."""
    closed: list[str] = []
    model = _Streams("first", closed)
    llm: Any = FallbackLLM([model, ScriptedLLM(["x"])]) if through == "fallback" else model
    events = llm.stream([{"role": "user", "content": "hi"}])
    assert (await events.__anext__()).text == "Hel"
    await events.aclose()
    assert closed == ["first"]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_when_every_model_fails_the_error_names_each_failure(
        servers: list[FakeOpenAIServer], stream: bool) -> None:
    """The run's error said only the last model's failure: the primary's 429, the cause a
    person looks for first, was lost (as pydantic-ai's FallbackExceptionGroup keeps each)."""
    from jianmu.errors import FallbackFailedError

    primary, secondary, _ = servers
    primary.add(FakeError(status=429, message="slow down"))
    secondary.add(FakeError(status=502, message="bad gateway"))
    llm = FallbackLLM([_provider(primary), _provider(secondary)])
    ask = [{"role": "user", "content": "hi"}]
    with pytest.raises(FallbackFailedError) as raised:
        if stream:
            [e async for e in llm.stream(ask)]
        else:
            await llm.complete(ask)
    error = raised.value
    assert isinstance(error, LLMTransientError)  # a caller retrying these still does
    assert len(error.failures) == 2 and error.__cause__ is error.failures[-1]
    assert "HTTP 429" in str(error.failures[0]) and "HTTP 502" in str(error.failures[1])
    assert "primary" in str(error) and "slow down" in str(error)
    assert "secondary" in str(error) and "bad gateway" in str(error)
    await llm.close()


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_cancel_never_falls_through_to_the_next_model(stream: bool) -> None:
    import asyncio

    asked = asyncio.Event()

    class Slow(ScriptedLLM):
        async def send(self, request: Any) -> Any:
            asked.set()
            await asyncio.Event().wait()  # until cancelled

    backup = ScriptedLLM(["never"], model="backup")
    llm = FallbackLLM([Slow([], model="slow"), backup])
    switches: list[str] = []
    ask = [{"role": "user", "content": "hi"}]

    async def call() -> Any:
        if stream:
            return [e async for e in llm.stream(ask)]
        return await llm.complete(ask)

    from jianmu.llm import fallback_events

    with fallback_events(lambda name, **f: switches.append(name)):
        task = asyncio.ensure_future(call())
        await asked.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert backup.requests == [] and switches == []


@pytest.mark.parametrize("primary_api", ["openai", "anthropic"])
def test_a_typed_answer_in_native_mode_asks_each_model_in_its_own_terms(primary_api: str) -> None:
    """The README's fallback (OpenAI first, Anthropic next) with ``output_mode="native"``: the
    backup was sent the primary's structured-output parameter (``response_format``), which
    Anthropic refuses, and not its own (``output_config``): the run failed when it fell back."""
    import socket

    from pydantic import BaseModel

    from jianmu.llm import AnthropicProvider
    from tests.support.model_server import ModelServer

    class City(BaseModel):
        name: str

    with socket.socket() as held, ModelServer() as server:
        held.bind(("127.0.0.1", 0))  # never listening: a connection to it is refused
        down_url = f"http://127.0.0.1:{held.getsockname()[1]}"
        server.add('{"name": "Oslo"}')
        if primary_api == "openai":
            primary: Any = OpenAIProvider("down", base_url=f"{down_url}/v1", api_key="test",
                                          max_retries=0, retry_backoff=0)
            backup: Any = AnthropicProvider("backup", base_url=server.anthropic_url,
                                            max_retries=0)
        else:
            primary = AnthropicProvider("down", base_url=down_url, max_retries=0)
            backup = OpenAIProvider("backup", base_url=server.openai_url, api_key="test",
                                    max_retries=0, retry_backoff=0)
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        node = create_react_node(FallbackLLM([primary, backup]), [], output_type=City,
                                 output_mode="native")
        result = ReactiveRunner(node, state).run_sync(timeout=60)
        assert result.ok, result.error
        assert result.output == City(name="Oslo")
        [asked] = server.requests
        own, foreign = (("output_config", "response_format") if asked.api == "anthropic"
                        else ("response_format", "output_config"))
        assert own in asked.body and foreign not in asked.body


class _BreaksMidway(ScriptedLLM):
    """A model whose stream breaks off after its first words."""

    async def send_stream(self, request: Any) -> Any:
        from jianmu.llm import TextDelta

        yield TextDelta(text="The weather in ")
        raise LLMTransientError("the answer broke off midway")


@pytest.mark.anyio
async def test_a_stream_that_broke_after_its_first_delta_is_not_answered_again() -> None:
    """The reader already has the first model's words: the backup's whole answer after them
    would read as one answer glued from two. The run fails with the break instead."""
    backup = ScriptedLLM(["Sunny in Oslo."], model="backup")
    llm = FallbackLLM([_BreaksMidway([], model="first"), backup])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Oslo?"}]})
    runner = ReactiveRunner(create_react_node(llm, [], stream=True), state)
    deltas: list[str] = []
    async for event in runner.stream(timeout=60):
        if event.name == "llm.call.delta":
            deltas.append(event.fields["text"])
        if event.name == "run.finished":
            result = event.fields["result"]
    assert deltas == ["The weather in "]
    assert result.status.value == "failure" and "broke off midway" in (result.error or "")
    assert backup.requests == [] and state.get("final_answer") is None


class _Hangs(ScriptedLLM):
    """A model that never answers (a server that took the connection and says nothing)."""

    async def send(self, request: Any) -> Any:
        import asyncio

        await asyncio.Event().wait()

    async def send_stream(self, request: Any) -> Any:
        await self.send(request)
        yield  # an async generator that never yields


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_model_that_does_not_answer_within_the_timeout_is_passed_over(stream: bool) -> None:
    """The node's timeout (``llm.timeout``) held for the whole chain: a primary that hung was
    stopped with the run's "did not answer" failure, and the backup was never asked, though
    a timeout is what a fallback is for."""
    from jianmu import AppConfig

    backup = ScriptedLLM(["Hello from the backup."], model="backup")
    llm = FallbackLLM([_Hangs([], model="hung"), backup])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    # the primary hangs on an event never set: its limit always comes, however short
    config = AppConfig.model_validate({"llm": {"timeout": 0.5}})
    runner = ReactiveRunner(create_react_node(llm, [], stream=stream), state, config=config)
    seen: list[Any] = []
    runner.ctx.events.subscribe("llm.fallback", seen.append)
    result = runner.run_sync(timeout=60)
    assert result.ok, result.error
    assert state.get("final_answer") == "Hello from the backup."
    [switch] = seen
    assert (switch.fields["from"], switch.fields["to"]) == ("hung", "backup")
    assert "did not answer within 0.5 s" in switch.fields["error"]


def test_when_every_model_hangs_the_run_fails_in_time() -> None:
    from jianmu import AppConfig

    llm = FallbackLLM([_Hangs([], model="a"), _Hangs([], model="b")])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    config = AppConfig.model_validate({"llm": {"timeout": 0.25}})  # both hang: always reached
    runner = ReactiveRunner(create_react_node(llm, []), state, config=config)
    seen: list[Any] = []
    runner.ctx.events.subscribe("llm.fallback", seen.append)
    result = runner.run_sync(timeout=60)
    assert result.status.value == "failure"
    assert "did not answer" in (result.error or "")
    assert [(e.fields["from"], e.fields["to"]) for e in seen] == [("a", "b")]


class _NoNative(ScriptedLLM):
    """A model that cannot give a typed answer natively (an SDK too old for it)."""

    def output_format_params(self, **kwargs: Any) -> dict[str, Any]:
        raise ConfigError("the installed SDK has no structured output")


@pytest.mark.anyio
async def test_a_backup_without_structured_output_never_stops_the_primary_answering() -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str

    def run(llm: FallbackLLM) -> Any:
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        node = create_react_node(llm, [], output_type=City, output_mode="native")
        return ReactiveRunner(node, state).run()

    ok = await run(FallbackLLM([ScriptedLLM(['{"name": "Oslo"}']), _NoNative([], model="old")]))
    assert ok.ok and ok.output == City(name="Oslo")
    down = await run(FallbackLLM([_Down([], model="down"), _NoNative(["x"], model="old")]))
    assert down.status.value == "failure"
    assert "rate limited" in (down.error or "") and "no structured output" in (down.error or "")


def test_a_fallback_model_missing_a_setting_is_named_by_its_place() -> None:
    config = LLMConfig.model_validate({
        "provider": "scripted", "params": {"responses": ["one"]},
        "fallback": [{"provider": "scripted", "params": {"responses": ["two"]}},
                     {"provider": "scripted"}],
    })
    with pytest.raises(ConfigError, match=r"^llm\.fallback\[1\]: llm\.provider is 'scripted'"):
        from_config(config)


class _Closes(ScriptedLLM):
    """A model that notes its close, and may fail it."""

    def __init__(self, closed: list[str], name: str, fails: bool = False) -> None:
        super().__init__(["x"])
        self.closed, self.name, self.fails = closed, name, fails

    async def close(self) -> None:
        self.closed.append(self.name)
        if self.fails:
            raise RuntimeError(f"{self.name} could not close")


@pytest.mark.anyio
async def test_closing_closes_every_model_even_after_one_fails() -> None:
    """A model whose ``close`` fails does not leave the next ones' connections open; the
    failure is still raised, once every model was asked."""
    closed: list[str] = []
    llm = FallbackLLM([_Closes(closed, "a", fails=True), _Closes(closed, "b"),
                       _Closes(closed, "c", fails=True)])
    with pytest.raises(RuntimeError, match="a could not close"):
        await llm.close()
    assert closed == ["a", "b", "c"]


_TOOL_USE_THEN_OVERLOADED = [
    {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {
        "type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}},
    {"type": "content_block_delta", "index": 0, "delta": {
        "type": "input_json_delta", "partial_json": '{"city": "Oslo"}'}},
    {"type": "content_block_stop", "index": 0},
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
]


def test_a_stream_that_broke_after_a_whole_tool_call_but_before_any_delta_falls_back() -> None:
    """Anthropic streams each tool call whole before its message ends: one overloaded after
    it had shown no delta to a reader, yet the run failed instead of asking the backup (the
    first event of any kind, not the first delta, ended the fallback); the backup's answer
    comes alone, its calls numbered from 0."""
    from jianmu.llm import AnthropicProvider, ToolCallReady
    from tests.support.model_server import ModelServer, Raw, Turn

    with ModelServer(Raw(events=_TOOL_USE_THEN_OVERLOADED)) as first, ModelServer(
        Turn(calls=[{"name": "weather", "arguments": {"city": "Bergen"}, "id": "c1"}]),
        "Sunny in Bergen.",
        Turn(calls=[{"name": "weather", "arguments": {"city": "Bergen"}, "id": "c2"}]),
    ) as second:
        primary = AnthropicProvider("claude", base_url=first.anthropic_url, max_retries=0)
        backup = OpenAIProvider("gpt", base_url=second.openai_url, max_retries=0)
        llm = FallbackLLM([primary, backup])
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Oslo?"}]})
        runner = ReactiveRunner(create_react_node(llm, [weather], stream=True), state)
        result = runner.run_sync(timeout=60)
        assert result.ok, result.error
        assert state.get("final_answer") == "Sunny in Bergen."

        first.add(Raw(events=_TOOL_USE_THEN_OVERLOADED))

        async def read() -> list[Any]:
            events = [e async for e in llm.stream([{"role": "user", "content": "Oslo?"}],
                                                  tools=[weather])]
            await llm.close()
            return events

        import asyncio

        events = asyncio.run(read())
    ready = [e for e in events if isinstance(e, ToolCallReady)]
    assert [(e.index, e.call.arguments) for e in ready] == [(0, {"city": "Bergen"})]


def test_a_model_passed_over_while_it_waited_to_retry_a_429_says_so() -> None:
    """The per-model limit came while the primary waited out a 429's retry-after: the switch
    said only that it did not answer."""
    from tests.support.model_server import ModelServer, Raw

    refused = Raw(status=429, headers={"retry-after": "30"},
                  body={"error": {"message": "slow down", "type": "rate_limit_error"}})
    with ModelServer(refused, refused) as first, ModelServer("Hello from the backup.") as second:
        llm = FallbackLLM([OpenAIProvider("primary", base_url=first.openai_url, max_retries=1),
                           OpenAIProvider("backup", base_url=second.openai_url, max_retries=0)])
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        runner = ReactiveRunner(create_react_node(llm, [], llm_timeout=0.5), state)
        seen: list[Any] = []
        runner.ctx.events.subscribe("llm.fallback", seen.append)
        result = runner.run_sync(timeout=60)
    assert result.ok, result.error
    [switch] = seen
    assert "did not answer within 0.5 s (its last answer: HTTP 429)" in switch.fields["error"]


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_refusal_whose_body_broke_off_is_passed_over_and_billed_nothing(
        api: str, stream: bool) -> None:
    """A 503 whose body a proxy cut short: a streamed request's escaped as the HTTP client's
    ``RemoteProtocolError``, which is no `LLMTransientError`, so the run failed with the
    backup never asked. It is the primary's refusal: the backup answers, and only the backup's
    request counts as one billed."""
    from jianmu import Agent
    from jianmu.llm import AnthropicProvider
    from tests.support.model_server import ModelServer, Raw

    refused = Raw(status=503, cut=20, body={
        "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    with ModelServer(refused) as first, ModelServer("Hello from the backup.") as second:
        primary: Any = (
            OpenAIProvider("primary", base_url=first.openai_url, max_retries=0)
            if api == "openai" else
            AnthropicProvider("primary", base_url=first.anthropic_url, max_retries=0))
        backup = OpenAIProvider("backup", base_url=second.openai_url, max_retries=0)
        result = Agent(FallbackLLM([primary, backup]), stream=stream).run_sync("hi")
    assert result.ok, result.error
    assert result.output == "Hello from the backup."
    assert result.usage.requests == 1
    assert len(first.requests) == len(second.requests) == 1


class _CompleteOnly:
    """A provider of one's own: ``complete()`` alone, no stream."""

    def __init__(self, reply: str | None) -> None:
        self.model = "mine" if reply else "down"
        self.reply = reply

    async def complete(self, messages: Any, **_: Any) -> Any:
        from jianmu.llm import LLMResponse, Message

        if self.reply is None:
            raise LLMTransientError("HTTP 503: overloaded")
        return LLMResponse(message=Message.assistant(self.reply))

    async def close(self) -> None:
        pass


def test_a_streamed_fallback_over_providers_without_a_stream_answers() -> None:
    """A streamed run (``agent.stream``, ``runner.stream``) of a `FallbackLLM` of providers
    of ``complete()`` alone failed: "'_CompleteOnly' object has no attribute 'stream'"."""
    import asyncio

    from jianmu import Agent

    async def streamed(llm: FallbackLLM) -> tuple[list[str], Any]:
        events = [event async for event in Agent(llm).stream("Hi")]
        texts = [e.fields["text"] for e in events if e.name == "llm.call.delta"]
        return texts, events[-1].fields["result"]

    for models in ([_CompleteOnly("Hello.")], [_CompleteOnly(None), _CompleteOnly("Hello.")]):
        texts, result = asyncio.run(streamed(FallbackLLM(models)))
        assert result.ok and result.output == "Hello." and texts == ["Hello."], result.exception


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_backup_stopped_in_flight_is_counted_under_its_own_name() -> None:
    from jianmu.nodes.agent_llm import AgentLLMNode
    from tests.support.model_server import ModelServer, Raw, Stall

    with ModelServer(Raw(status=503, body={"error": {"message": "down"}})) as primary, \
            ModelServer(Stall(every=0.05)) as backup:
        llm = FallbackLLM([
            OpenAIProvider("first", base_url=primary.openai_url, api_key="k", max_retries=0),
            OpenAIProvider("second", base_url=backup.openai_url, api_key="k", max_retries=0)])
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Hi."}]})
        tree = create_react_node(llm, [])
        (node,) = [n for n in tree.iterate() if isinstance(n, AgentLLMNode)]
        runner = ReactiveRunner(tree, state)
        stopped: list[dict[str, Any]] = []
        runner.ctx.events.subscribe("llm.usage_unknown", lambda e: stopped.append(e.fields))
        run = asyncio.ensure_future(runner.run())
        while not (backup.requests and node._in_flight and node._in_flight.sent):
            await asyncio.sleep(0.01)  # the backup took the request: it bills it
        runner.cancel()
        await run
    assert [(e["model"], e["stopped"]) for e in stopped] == [("second", True)]
    assert state.get("usage").requests == 1
