"""Tests for jianmu/llm/openai.py over real HTTP against tests/support/fake_openai.py."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jianmu.errors import LLMError, LLMTransientError, MissingExtraError
from jianmu.llm import (
    LLMProvider,
    Message,
    OpenAIProvider,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    Usage,
)
from jianmu.llm import openai as openai_module
from jianmu.tools import tool
from jianmu.tools.calls import ToolCall
from tests.support.fake_openai import (
    FakeError,
    FakeHang,
    FakeOpenAIServer,
    FakeReply,
    fake_openai,
)

__all__ = ("fake_openai",)  # the fixture, imported for these tests

pytestmark = pytest.mark.anyio

_WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture
async def llm(fake_openai: FakeOpenAIServer) -> AsyncIterator[OpenAIProvider]:
    provider = OpenAIProvider("fake-model", base_url=fake_openai.base_url, retry_backoff=0,
                              max_retries=2, timeout=10)
    yield provider
    await provider.close()


async def _collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


async def test_plain_answer(fake_openai: FakeOpenAIServer, llm: OpenAIProvider) -> None:
    fake_openai.add(FakeReply(text="Hello!", usage=(12, 3)))
    assert isinstance(llm, LLMProvider)
    response = await llm.complete([Message.system("be kind"), Message.user("hi")],
                                  temperature=0.2)
    assert response.message == Message.assistant("Hello!")
    assert response.is_final
    assert response.usage == Usage(input_tokens=12, output_tokens=3)
    assert (response.finish_reason, response.model) == ("stop", "fake-model")
    body = fake_openai.requests[0]
    assert body["model"] == "fake-model"
    assert body["messages"] == [{"role": "system", "content": "be kind"},
                                {"role": "user", "content": "hi"}]
    assert body["temperature"] == 0.2
    assert "tools" not in body and "stream" not in body


async def test_parallel_tool_calls_and_history(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider
) -> None:
    fake_openai.add(
        [{"name": "weather", "arguments": {"city": "Paris"}},
         {"name": "weather", "arguments": {"city": "Rome"}}],
        "Paris 18C, Rome 24C.",
    )
    history: list[Message] = [Message.user("weather in Paris and Rome?")]
    first = await llm.complete(history, tools=[_WEATHER], tool_choice="auto")
    assert first.tool_calls == (
        ToolCall(name="weather", arguments={"city": "Paris"}, id="call_1"),
        ToolCall(name="weather", arguments={"city": "Rome"}, id="call_2"),
    )
    assert first.finish_reason == "tool_calls"
    assert fake_openai.tool_names(0) == ["weather"]
    assert fake_openai.requests[0]["tool_choice"] == "auto"

    history += [first.message,
                Message.tool("18C", tool_call_id="call_1", name="weather"),
                Message.tool("24C", tool_call_id="call_2", name="weather")]
    final = await llm.complete(history, tools=[_WEATHER])
    assert final.text == "Paris 18C, Rome 24C."
    sent = fake_openai.requests[1]["messages"]
    assert sent[1]["tool_calls"][1] == {
        "id": "call_2", "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
    }
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert sent[3]["tool_call_id"] == "call_2"


async def test_streamed_text_with_usage(fake_openai: FakeOpenAIServer, llm: OpenAIProvider) -> None:
    fake_openai.add(FakeReply(text="Streaming works fine.", usage=(9, 5), chunk_size=5))
    events = await _collect(llm.stream([Message.user("hi")]))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["Strea", "ming ", "works", " fine", "."]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.response.message == Message.assistant("Streaming works fine.")
    assert done.usage == Usage(input_tokens=9, output_tokens=5)
    assert done.response.finish_reason == "stop"
    body = fake_openai.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("interleave", [False, True])
async def test_streamed_tool_call_fragments_are_assembled_by_index(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider, interleave: bool
) -> None:
    fake_openai.add(FakeReply(
        text="Let me check.",
        tool_calls=[
            {"name": "weather", "arguments": {"city": "Paris", "unit": "celsius"}, "id": "a"},
            {"name": "search", "arguments": {"query": "Rome weather today"}, "id": "b"},
        ],
        chunk_size=3,
        interleave=interleave,
    ))
    events = await _collect(llm.stream([Message.user("hi")], tools=[_WEATHER]))
    ready = [e for e in events if isinstance(e, ToolCallReady)]
    expected = [
        ToolCall(name="weather", arguments={"city": "Paris", "unit": "celsius"}, id="a"),
        ToolCall(name="search", arguments={"query": "Rome weather today"}, id="b"),
    ]
    assert [(e.index, e.call) for e in ready] == list(enumerate(expected))
    # Each call is reported once, after all its fragments: nothing follows but the end.
    assert isinstance(events[-1], StreamDone)
    assert events.index(ready[-1]) == len(events) - 2
    response = events[-1].response
    assert list(response.tool_calls) == expected
    assert response.message.content == "Let me check."
    assert response.finish_reason == "tool_calls"
    assert response.usage.total_tokens > 0


async def test_429_then_success(fake_openai: FakeOpenAIServer, llm: OpenAIProvider) -> None:
    fake_openai.fail_next(1, status=429, message="slow down")
    fake_openai.add("after the wait")
    response = await llm.complete([Message.user("hi")])
    assert response.text == "after the wait"
    assert len(fake_openai.requests) == 2
    assert fake_openai.requests[0] == fake_openai.requests[1]  # the same request, resent


async def test_429_then_success_when_streaming(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider
) -> None:
    fake_openai.fail_next(2, status=429)
    fake_openai.add("streamed")
    events = await _collect(llm.stream([Message.user("hi")]))
    assert isinstance(events[-1], StreamDone) and events[-1].response.text == "streamed"
    assert len(fake_openai.requests) == 3


async def test_500_exhausts_retries(fake_openai: FakeOpenAIServer, llm: OpenAIProvider) -> None:
    fake_openai.fail_next(5, status=500, message="upstream exploded")
    with pytest.raises(LLMTransientError) as caught:
        await llm.complete([Message.user("hi")])
    text = str(caught.value)
    assert "after 3 attempt(s) (max_retries=2)" in text
    assert "HTTP 500" in text and "upstream exploded" in text
    assert len(fake_openai.requests) == 3
    assert fake_openai.remaining == 2  # the failures it did not reach are still queued


async def test_400_is_a_clear_error_at_once(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider
) -> None:
    fake_openai.fail_next(1, status=400, message="'messages' must not be empty")
    with pytest.raises(LLMError) as caught:
        await llm.complete([Message.user("hi")])
    assert not isinstance(caught.value, LLMTransientError)
    assert "HTTP 400" in str(caught.value)
    assert "'messages' must not be empty" in str(caught.value)
    assert "fake-model" in str(caught.value)
    assert len(fake_openai.requests) == 1  # never retried


async def test_404_hints_at_the_config(fake_openai: FakeOpenAIServer, llm: OpenAIProvider) -> None:
    fake_openai.fail_next(1, status=404, message="model 'fake-model' not found")
    with pytest.raises(LLMError, match=r"check llm.model and llm.base_url"):
        await llm.complete([Message.user("hi")])


async def test_connection_reset_is_retried(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider
) -> None:
    fake_openai.drop_next(2)
    fake_openai.add("survived")
    assert (await llm.complete([Message.user("hi")])).text == "survived"
    assert len(fake_openai.requests) == 3


async def test_connection_resets_exhaust_retries(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider
) -> None:
    fake_openai.drop_next(3)
    with pytest.raises(LLMTransientError, match=r"connection to .* failed"):
        await llm.complete([Message.user("hi")])


async def test_stream_broken_midway_is_not_retried(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider
) -> None:
    fake_openai.add(FakeReply(text="a long answer that breaks", chunk_size=2, break_after=3))
    received: list[StreamEvent] = []
    with pytest.raises(LLMTransientError, match="broke off midway"):
        async for event in llm.stream([Message.user("hi")]):
            received.append(event)
    assert received and all(isinstance(e, TextDelta) for e in received)
    assert len(fake_openai.requests) == 1


async def test_no_choices_is_an_error(fake_openai: FakeOpenAIServer, llm: OpenAIProvider) -> None:
    fake_openai.add(FakeReply(raw={"id": "x", "object": "chat.completion", "created": 0,
                                   "model": "fake-model", "choices": []}))
    with pytest.raises(LLMError, match="without any choice"):
        await llm.complete([Message.user("hi")])


async def test_params_reach_the_body(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add("a", "b")
    async with OpenAIProvider("m", base_url=fake_openai.base_url, temperature=0,
                              top_k=5) as provider:
        await provider.complete([Message.user("x")], temperature=0.7, seed=1,
                                extra_body={"min_p": 0.1})
        await provider.complete([Message.user("x")], tools=[_WEATHER], tool_choice="weather",
                                parallel_tool_calls=False)
    first, second = fake_openai.requests
    assert (first["temperature"], first["seed"], first["top_k"], first["min_p"]) == (
        0.7, 1, 5, 0.1
    )
    assert second["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert second["parallel_tool_calls"] is False


async def test_api_key_comes_from_env_or_a_placeholder(
    fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_openai.add("a", "b", "c")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with OpenAIProvider("m", base_url=fake_openai.base_url) as provider:
        await provider.complete([Message.user("x")])
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    async with OpenAIProvider("m", base_url=fake_openai.base_url) as provider:
        await provider.complete([Message.user("x")])
    async with OpenAIProvider("m", base_url=fake_openai.base_url, api_key="given") as provider:
        await provider.complete([Message.user("x")])
    keys = [h.get("Authorization") or h.get("authorization") for h in fake_openai.headers]
    assert keys == ["Bearer not-needed", "Bearer from-env", "Bearer given"]


async def test_tool_choice_without_tools_is_refused(llm: OpenAIProvider) -> None:
    with pytest.raises(ValueError, match="tool_choice='required' was given but no tools"):
        await llm.complete([Message.user("x")], tool_choice="required")


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"model": ""}, "model must be a non-empty model name"),
        ({"model": "m", "max_retries": -1}, "max_retries must be an integer >= 0"),
        ({"model": "m", "timeout": 0}, "timeout must be a number of seconds > 0"),
        ({"model": "m", "retry_backoff": -1}, "retry_backoff and max_backoff must be >= 0"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        OpenAIProvider(**kwargs)


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(MissingExtraError, match=r"pip install 'jianmu\[openai\]'"):
        OpenAIProvider("m")


async def test_fake_server_reports_an_exhausted_script(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider
) -> None:
    with pytest.raises(LLMError, match="no scripted reply left for request #0"):
        await llm.complete([Message.user("hi")])
    assert fake_openai.problems == ["no scripted reply left for request #0"]


async def test_fake_server_script_functions_see_the_request() -> None:
    def reply(body: dict[str, Any]) -> str:
        return f"you sent {len(body['messages'])} message(s)"

    with FakeOpenAIServer([reply]) as server:
        async with OpenAIProvider("m", base_url=server.base_url) as provider:
            response = await provider.complete([Message.user("a"), Message.user("b")])
    assert response.text == "you sent 2 message(s)"


async def test_backoff_doubles_and_honours_retry_after(
    fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(openai_module, "_backoff", record)
    fake_openai.add(
        FakeError(status=429, retry_after=0.7), "ok",
        FakeError(status=503), FakeError(status=503), FakeError(status=503), "ok again",
    )
    async with OpenAIProvider("m", base_url=fake_openai.base_url, retry_backoff=0.25,
                              max_backoff=0.75) as provider:
        await provider.complete([Message.user("x")])  # 429 (Retry-After 0.7), then "ok"
        await provider.complete([Message.user("x")])  # three 503s, then "ok again"
    assert delays == [0.7, 0.25, 0.5, 0.75]


async def test_a_hung_server_times_out_as_transient(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add(FakeHang())
    async with OpenAIProvider("m", base_url=fake_openai.base_url, timeout=0.2,
                              max_retries=0) as provider:
        with pytest.raises(LLMTransientError,
                           match=r"no byte came from .* for 0\.2s, before any answer"):
            await provider.complete([Message.user("x")])


async def test_jianmu_tools_are_sent_as_their_schema(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: the first.
            b: the second.
        """
        return a + b

    fake_openai.add([{"name": "add", "arguments": {"a": 1, "b": 2}}])
    response = await llm.complete([Message.user("1+2?")], tools=[add])
    assert fake_openai.requests[0]["tools"] == [add.to_openai()]
    assert response.tool_calls == (ToolCall(name="add", arguments={"a": 1, "b": 2}, id="call_1"),)


async def test_fake_server_reports_a_broken_script(
    fake_openai: FakeOpenAIServer, llm: OpenAIProvider
) -> None:
    fake_openai.add(42, [{"arguments": {}}])  # type: ignore[arg-type]
    with pytest.raises(LLMError, match="cannot answer with 42"):
        await llm.complete([Message.user("hi")])
    with pytest.raises(LLMError, match="script error: KeyError"):
        await llm.complete([Message.user("hi")])
    assert len(fake_openai.problems) == 2


@pytest.mark.parametrize(("header", "value", "delay"), [
    ("retry-after-ms", "600", 0.6),  # OpenAI's and Azure's own header, in milliseconds
    ("retry-after", "Wed, 21 Oct 2099 07:28:00 GMT", 0.75),  # an HTTP date: far, so capped
    ("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT", 0.25),  # a date gone: the backoff
    ("retry-after", "soon", 0.25),
])
def test_retry_after_in_milliseconds_or_as_a_date_is_honoured(
    monkeypatch: pytest.MonkeyPatch, header: str, value: str, delay: float,
) -> None:
    from tests.support.model_server import ModelServer, Raw

    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(openai_module, "_backoff", record)
    with ModelServer() as server:
        server.add(Raw(status=429, headers={header: value},
                       body={"error": {"message": "slow down"}}), "ok")
        provider = OpenAIProvider("m", base_url=server.openai_url, retry_backoff=0.25,
                                  max_backoff=0.75)
        assert asyncio.run(provider.complete([Message.user("x")])).text == "ok"
    assert delays == [delay]
