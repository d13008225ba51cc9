"""Tests for jianmu/llm/anthropic.py over real HTTP against tests/support/fake_anthropic.py."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.config import AppConfig, LLMConfig
from jianmu.errors import ConfigError, LLMError, LLMTransientError, MissingExtraError
from jianmu.llm import (
    AnthropicProvider,
    LLMProvider,
    Message,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    Usage,
    from_config,
)
from jianmu.nodes.react import create_react_node
from jianmu.nodes.state import AgentState
from jianmu.tools import tool
from jianmu.tools.calls import ToolCall
from tests.support.fake_anthropic import (
    FakeAnthropicServer,
    FakeDrop,
    FakeError,
    FakeMessage,
    fake_anthropic,
)

__all__ = ("fake_anthropic",)  # the fixture, imported for these tests

pytestmark = pytest.mark.anyio


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city.

    Args:
        city: the city's name.
    """
    return {"paris": "sunny", "oslo": "snow"}.get(city.lower(), "unknown")


@tool
def now() -> str:
    """The time now."""
    return "noon"


@pytest.fixture
async def llm(fake_anthropic: FakeAnthropicServer) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider("claude-fake", base_url=fake_anthropic.base_url,
                                 api_key="sk-test", max_retries=2, timeout=10)
    yield provider
    await provider.close()


def _api_key(headers: dict[str, str]) -> str | None:
    """The key a request carried: ``x-api-key``, or a bearer token (newer SDKs)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


async def _collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


async def test_plain_answer_usage_and_headers(
    fake_anthropic: FakeAnthropicServer, llm: AnthropicProvider
) -> None:
    fake_anthropic.add(FakeMessage(text="Hello there.", usage=(12, 3), cache_read=100,
                                   cache_creation=20))
    assert isinstance(llm, LLMProvider)
    reply = await llm.complete([Message.system("Be brief."), Message.user("hi")])
    assert reply.text == "Hello there." and reply.is_final
    assert reply.finish_reason == "stop" and reply.model == "claude-fake"
    assert reply.usage == Usage(input_tokens=132, output_tokens=3, cache_read_tokens=100,
                                cache_creation_tokens=20)
    body = fake_anthropic.requests[0]
    assert body["model"] == "claude-fake" and body["max_tokens"] == 4096
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    headers = {k.lower(): v for k, v in fake_anthropic.headers[0].items()}
    assert _api_key(headers) == "sk-test" and "anthropic-version" in headers


async def test_cache_control_on_the_system_prompt_and_the_last_tool(
    fake_anthropic: FakeAnthropicServer, llm: AnthropicProvider
) -> None:
    fake_anthropic.add("ok", "ok")
    await llm.complete([Message.system("Rules."), Message.user("hi")], tools=[lookup, now])
    body = fake_anthropic.requests[0]
    assert body["system"] == [
        {"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}}
    ]
    assert [t["name"] for t in body["tools"]] == ["lookup", "now"]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    # the tool definitions are Tool.to_anthropic()'s, plus the breakpoint
    assert body["tools"][0] == lookup.to_anthropic()
    assert {k: v for k, v in body["tools"][1].items() if k != "cache_control"} == (
        now.to_anthropic()
    )

    plain = AnthropicProvider("claude-fake", base_url=fake_anthropic.base_url,
                              prompt_caching=False)
    await plain.complete([Message.system("Rules."), Message.user("hi")], tools=[lookup])
    await plain.close()
    body = fake_anthropic.requests[1]
    assert body["system"] == "Rules." and "cache_control" not in body["tools"][0]


async def test_parallel_tool_calls_and_results_go_back_as_blocks(
    fake_anthropic: FakeAnthropicServer, llm: AnthropicProvider
) -> None:
    fake_anthropic.add(
        FakeMessage(text="Checking both.", tool_calls=[
            {"name": "lookup", "input": {"city": "Paris"}, "id": "toolu_1"},
            {"name": "lookup", "input": {"city": "Oslo"}, "id": "toolu_2"},
        ]),
        "Sunny and snowy.",
    )
    history = [Message.user("weather?")]
    reply = await llm.complete(history, tools=[lookup])
    assert reply.finish_reason == "tool_calls" and reply.text == "Checking both."
    assert reply.tool_calls == (
        ToolCall(name="lookup", arguments={"city": "Paris"}, id="toolu_1"),
        ToolCall(name="lookup", arguments={"city": "Oslo"}, id="toolu_2"),
    )
    history += [reply.message, Message.tool("sunny", tool_call_id="toolu_1", name="lookup"),
                Message.tool("Error: no data", tool_call_id="toolu_2", name="lookup"),
                Message.user("and be quick")]
    final = await llm.complete(history, tools=[lookup])
    assert final.text == "Sunny and snowy."
    sent = fake_anthropic.requests[1]["messages"]
    assert sent[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {"city": "Oslo"}},
    ]}
    # both results, then the user's note, in one user turn: the API wants alternating turns
    assert sent[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Error: no data",
         "is_error": True},
        {"type": "text", "text": "and be quick"},
    ]}
    assert len(sent) == 3 and not fake_anthropic.refused


async def test_streamed_answer(fake_anthropic: FakeAnthropicServer, llm: AnthropicProvider) -> None:
    fake_anthropic.add(FakeMessage(text="Streaming works fine.", chunk_size=5, usage=(40, 6),
                                   cache_read=30))
    events = await _collect(llm.stream([Message.user("hi")]))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["Strea", "ming ", "works", " fine", "."]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.response.text == "Streaming works fine." and done.response.finish_reason == "stop"
    assert done.usage == Usage(input_tokens=70, output_tokens=6, cache_read_tokens=30)
    assert fake_anthropic.requests[0]["stream"] is True


async def test_streamed_tool_use_input_is_assembled_from_json_deltas(
    fake_anthropic: FakeAnthropicServer, llm: AnthropicProvider
) -> None:
    fake_anthropic.add(FakeMessage(text="Let me look.", chunk_size=3, tool_calls=[
        {"name": "lookup", "input": {"city": "Paris"}, "id": "toolu_a"},
        {"name": "now", "input": {}, "id": "toolu_b"},
        {"name": "lookup", "input": {"city": "Oslo"}, "id": "toolu_c"},
    ]))
    events = await _collect(llm.stream([Message.user("hi")], tools=[lookup, now]))
    ready = [e for e in events if isinstance(e, ToolCallReady)]
    assert [(e.index, e.call) for e in ready] == [
        (0, ToolCall(name="lookup", arguments={"city": "Paris"}, id="toolu_a")),
        (1, ToolCall(name="now", arguments={}, id="toolu_b")),
        (2, ToolCall(name="lookup", arguments={"city": "Oslo"}, id="toolu_c")),
    ]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.response.tool_calls == tuple(e.call for e in ready)
    assert done.response.finish_reason == "tool_calls" and done.response.text == "Let me look."


async def test_529_then_success(fake_anthropic: FakeAnthropicServer,
                                llm: AnthropicProvider) -> None:
    fake_anthropic.fail_next(1, 529)
    fake_anthropic.add("Recovered.")
    assert (await llm.complete([Message.user("hi")])).text == "Recovered."
    fake_anthropic.fail_next(2, 429)
    fake_anthropic.add("Streamed after waiting.")
    events = await _collect(llm.stream([Message.user("hi")]))
    assert isinstance(events[-1], StreamDone)
    assert events[-1].response.text == "Streamed after waiting."
    assert len(fake_anthropic.requests) == 5 and fake_anthropic.remaining == 0


async def test_overload_exhausts_retries(fake_anthropic: FakeAnthropicServer,
                                         llm: AnthropicProvider) -> None:
    fake_anthropic.fail_next(3, 529)
    with pytest.raises(LLMTransientError, match=r"HTTP 529 .*Overloaded after 3 attempt"):
        await llm.complete([Message.user("hi")])
    assert len(fake_anthropic.requests) == 3


async def test_dropped_connection_is_retried(
    fake_anthropic: FakeAnthropicServer, llm: AnthropicProvider
) -> None:
    fake_anthropic.add(FakeDrop(), "After the drop.")
    assert (await llm.complete([Message.user("hi")])).text == "After the drop."


async def test_an_error_event_midstream_is_transient(
    fake_anthropic: FakeAnthropicServer, llm: AnthropicProvider
) -> None:
    fake_anthropic.add(FakeMessage(text="a long answer that fails", chunk_size=2, error_after=5))
    received: list[StreamEvent] = []
    with pytest.raises(LLMTransientError, match="Overloaded"):
        async for event in llm.stream([Message.user("hi")]):
            received.append(event)
    assert received and all(isinstance(e, TextDelta) for e in received)
    assert len(fake_anthropic.requests) == 1  # not retried: text was already yielded


async def test_a_bad_tool_schema_is_an_error_naming_the_tool(
    fake_anthropic: FakeAnthropicServer, llm: AnthropicProvider
) -> None:
    broken = {"name": "broken", "description": "Bad.", "input_schema": {"type": "string"}}
    with pytest.raises(LLMError, match=r"refused the definition of tool 'broken' \(tools\[1\]\)") \
            as info:
        await llm.complete([Message.user("hi")], tools=[lookup, broken])
    assert not isinstance(info.value, LLMTransientError)
    assert "HTTP 400" in str(info.value) and "input_schema" in str(info.value)
    assert fake_anthropic.requests == []  # refused before any answer, and not retried


async def test_401_hints_at_the_key(fake_anthropic: FakeAnthropicServer,
                                    llm: AnthropicProvider) -> None:
    fake_anthropic.add(FakeError(status=401, message="invalid x-api-key"))
    with pytest.raises(LLMError, match=r"invalid x-api-key; check llm.api_key or "
                                       r"\$ANTHROPIC_API_KEY"):
        await llm.complete([Message.user("hi")])


async def test_usage_adds_up_over_a_react_loop(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.add(
        FakeMessage(tool_calls=[{"name": "lookup", "input": {"city": "Paris"}},
                                {"name": "lookup", "input": {"city": "Oslo"}}],
                    usage=(50, 20), cache_creation=400),
        FakeMessage(text="Sunny in Paris, snow in Oslo.", usage=(80, 10), cache_read=400),
    )
    fake_anthropic.fail_next(1, 529)
    llm = AnthropicProvider("claude-fake", base_url=fake_anthropic.base_url)
    tree = create_react_node(llm, [lookup])
    state = StateManager(AgentState, {"messages": [
        {"role": "system", "content": "You answer weather questions."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
    ]})
    result = await ReactiveRunner(tree, state).run(timeout=30)
    await llm.close()
    assert result.status is RunStatus.SUCCESS, result.error
    assert state.get("final_answer") == "Sunny in Paris, snow in Oslo."
    assert [m.content for m in state.get("messages") if m.role == "tool"] == ["sunny", "snow"]
    usage = state.get("usage")
    assert usage == Usage(input_tokens=930, output_tokens=30, cache_read_tokens=400,
                          cache_creation_tokens=400, requests=2, tool_calls=2)
    last = fake_anthropic.requests[-1]
    assert [b["type"] for b in last["messages"][-1]["content"]] == ["tool_result"] * 2
    assert last["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert not fake_anthropic.refused and not fake_anthropic.problems


def test_usage_sums_cache_fields() -> None:
    a = Usage(input_tokens=10, output_tokens=2, cache_read_tokens=4, cache_creation_tokens=1)
    b = Usage(input_tokens=5, output_tokens=1, cache_creation_tokens=3)
    assert a + b == Usage(input_tokens=15, output_tokens=3, cache_read_tokens=4,
                          cache_creation_tokens=4)
    assert sum([a, b]) == a + b and (a + b).total_tokens == 18


async def test_params_tool_choice_and_stop_reach_the_body(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.add("ok", "ok")
    llm = AnthropicProvider("claude-fake", base_url=fake_anthropic.base_url, max_tokens=256,
                            temperature=0.2)
    await llm.complete([Message.user("hi")], tools=[lookup], tool_choice="required",
                       top_k=5, stop="END")
    await llm.complete([Message.user("hi")], tools=[lookup], tool_choice="lookup",
                       max_tokens=32)
    await llm.close()
    first, second = fake_anthropic.requests
    assert first["max_tokens"] == 256 and first["temperature"] == 0.2 and first["top_k"] == 5
    assert first["tool_choice"] == {"type": "any"} and first["stop_sequences"] == ["END"]
    assert second["max_tokens"] == 32
    assert second["tool_choice"] == {"type": "tool", "name": "lookup"}


async def test_from_config_and_the_api_key_from_the_environment(
    fake_anthropic: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    config = AppConfig.model_validate({"llm": {
        "provider": "anthropic", "model": "claude-fake", "base_url": fake_anthropic.base_url,
        "max_retries": 1, "params": {"max_tokens": 64, "prompt_caching": False},
    }})
    llm = from_config(config)
    assert isinstance(llm, AnthropicProvider)
    assert (llm.max_retries, llm.max_tokens, llm.prompt_caching) == (1, 64, False)
    fake_anthropic.add("ok")
    await llm.complete([Message.system("s"), Message.user("hi")])
    await llm.close()
    headers = {k.lower(): v for k, v in fake_anthropic.headers[0].items()}
    assert _api_key(headers) == "sk-from-env"
    assert fake_anthropic.requests[0]["system"] == "s"
    with pytest.raises(ConfigError, match=r"llm\.model is not set"):
        from_config(LLMConfig(provider="anthropic"))
    with pytest.raises(ConfigError, match="prompt_caching must be true or false"):
        from_config(LLMConfig(provider="anthropic", model="m",
                              params={"prompt_caching": "no"}))


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"model": ""}, "model must be"),
    ({"model": "m", "max_retries": -1}, "max_retries"),
    ({"model": "m", "timeout": 0}, "timeout"),
    ({"model": "m", "max_tokens": 0}, "max_tokens"),
])
def test_bad_arguments_are_refused(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        AnthropicProvider(**kwargs)


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingExtraError, match="anthropic"):
        AnthropicProvider("m")


async def test_stream_broken_midway_is_not_retried(
    fake_anthropic: FakeAnthropicServer, llm: AnthropicProvider
) -> None:
    fake_anthropic.add(FakeMessage(text="a long answer that breaks", chunk_size=2,
                                   break_after=5))
    received: list[StreamEvent] = []
    with pytest.raises(LLMTransientError, match="broke off midway"):
        async for event in llm.stream([Message.user("hi")]):
            received.append(event)
    assert received and all(isinstance(e, TextDelta) for e in received)
    assert len(fake_anthropic.requests) == 1
