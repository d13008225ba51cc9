"""Tool calls streamed as OpenAI-compatible servers do, on the real keep-alive server: calls
without ids (each sent whole, numbered 0 or not numbered) are separate calls, not one call
whose name and arguments are the two joined."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from jianmu.llm import OpenAIProvider
from tests.support.model_server import ModelServer, Raw


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def _chunk(calls: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": {"tool_calls": calls} if calls else {},
                         "finish_reason": finish}]}


def _calls(server: ModelServer, chunks: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    server.add(Raw(events=chunks))
    llm = OpenAIProvider("m", base_url=server.openai_url, max_retries=0)

    async def ask() -> Any:
        tools = [{"name": "weather"}, {"name": "time"}]
        events = [e async for e in llm.stream([{"role": "user", "content": "q"}], tools=tools)]
        return events[-1].response

    return [(call.name, call.arguments) for call in asyncio.run(ask()).tool_calls]


@pytest.mark.parametrize("numbered", [True, False], ids=["index-0", "no-index"])
def test_calls_without_ids_sent_whole_are_separate_calls(
    server: ModelServer, numbered: bool,
) -> None:
    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        fragment: dict[str, Any] = {"type": "function", "function": {
            "name": name, "arguments": json.dumps(arguments)}}
        return {"index": 0, **fragment} if numbered else fragment

    chunks = [_chunk([call("weather", {"city": "Oslo"})]), _chunk([call("time", {})]),
              _chunk([call("weather", {"city": "Bergen"})]),
              _chunk([call("weather", {"city": "Tromsø"})]), _chunk([], "tool_calls")]
    assert _calls(server, chunks) == [("weather", {"city": "Oslo"}), ("time", {}),
                                      ("weather", {"city": "Bergen"}),
                                      ("weather", {"city": "Tromsø"})]


def test_a_call_whose_name_comes_again_with_its_arguments_stays_one(server: ModelServer) -> None:
    """Some servers repeat the name in every fragment of one call."""
    def piece(arguments: str) -> dict[str, Any]:
        return {"index": 0, "function": {"name": "weather", "arguments": arguments}}

    chunks = [_chunk([piece('{"city"')]), _chunk([piece(': "Oslo"}')]), _chunk([], "tool_calls")]
    assert _calls(server, chunks) == [("weather", {"city": "Oslo"})]


@pytest.mark.parametrize("late", ["next-call", "rest-of-arguments"])
def test_calls_after_an_early_finish_reason_are_each_ready_once_whole(
    server: ModelServer, late: str,
) -> None:
    """A gateway that puts the finish reason on a call's first chunk (LiteLLM's Gemini
    stream) and sends more after it: each call is ready once, whole, as the reply has it;
    it was ready at the first finish reason, the second call never and the first one half."""
    first = {"index": 0, "id": "a", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
    if late == "next-call":
        second = {"index": 1, "id": "b", "type": "function",
                  "function": {"name": "time", "arguments": "{}"}}
        chunks = [_chunk([first], "tool_calls"), _chunk([second], "tool_calls")]
        whole = [("a", "weather", {"city": "Oslo"}), ("b", "time", {})]
    else:
        half = {**first, "function": {"name": "weather", "arguments": '{"city": '}}
        chunks = [_chunk([half], "tool_calls"),
                  _chunk([{"index": 0, "function": {"arguments": '"Oslo"}'}}])]
        whole = [("a", "weather", {"city": "Oslo"})]
    server.add(Raw(events=chunks))
    llm = OpenAIProvider("m", base_url=server.openai_url, max_retries=0)

    async def ask() -> list[Any]:
        return [e async for e in llm.stream([{"role": "user", "content": "q"}])]

    *events, done = asyncio.run(ask())
    ready = [(e.index, e.call.id, e.call.name, e.call.arguments) for e in events]
    assert ready == [(i, *call) for i, call in enumerate(whole)]
    assert [(c.id, c.name, c.arguments) for c in done.response.tool_calls] == whole
