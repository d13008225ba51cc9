"""Whatever a conversation holds, the request a provider builds of it is one the strict APIs
take (`tests.support.strict_api`): loose histories drawn at random (results without their
call, calls without their result, turns of one role in a row, blank text, names and ids of
any characters, arguments that are not JSON, system messages anywhere, the assistant's turn
first or last) go through `OpenAIProvider` and `AnthropicProvider`'s request building."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jianmu.llm import AnthropicProvider, Message, OpenAIProvider
from jianmu.llm.provider import ChatRequest
from jianmu.tools.calls import MediaPart, ToolCall
from tests.support.strict_api import anthropic_problems, openai_problems

_ids = st.sampled_from(["c1", "c2", "call_0", "functions.lookup:0", "a" * 50, "x y"])
_names = st.sampled_from(["lookup", "functions.lookup", "look up", "", "查询", "n" * 70])
_texts = st.sampled_from(["hi", "", " ", "\n\n", "Error: failed", "ok "])
_arguments = st.sampled_from([{"city": "Oslo"}, {}, '{"city":', "[1, 2]", '"text"', "x"])
_media = st.lists(st.sampled_from([
    MediaPart(kind="image", mime_type="image/png", data="iVBORw0KGgo="),
    MediaPart(kind="image", mime_type="image/tiff", data="AAAA"),
    MediaPart(kind="audio", mime_type="audio/wav", data="UklGRg=="),
]), max_size=2)
_thinking = st.lists(st.sampled_from([
    {"type": "thinking", "thinking": "Hm.", "signature": "sig"},
    {"type": "redacted_thinking", "data": "opaque"},
    {"type": "reasoning_content", "text": "Hm."},
]), max_size=2)


@st.composite
def _message(draw: Any) -> Message:
    role = draw(st.sampled_from(["system", "user", "assistant", "assistant", "tool", "tool"]))
    if role == "tool":
        return Message.tool(draw(_texts), tool_call_id=draw(_ids), name=draw(_names) or None,
                            media=draw(_media))
    if role == "assistant":
        calls = [ToolCall(name=draw(_names), arguments=draw(_arguments), id=draw(_ids))
                 for _ in range(draw(st.integers(0, 2)))]
        return Message(role="assistant", content=draw(st.none() | _texts), tool_calls=calls,
                       reasoning=draw(_thinking))
    if role == "user":
        return Message(role="user", content=draw(_texts), name=draw(st.none() | _names) or None,
                       media=draw(_media))
    return Message.system(draw(_texts))


_histories = st.lists(_message(), max_size=8)
_TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


_OPENAI = OpenAIProvider("m", base_url="http://127.0.0.1:9/v1")
_ANTHROPIC = AnthropicProvider("m", base_url="http://127.0.0.1:9")


def _request(history: list[Message], tools: bool) -> ChatRequest:
    return ChatRequest.build(history, _TOOLS if tools else None, None, {})


@settings(deadline=None, max_examples=200)
@given(_histories, st.booleans(), st.booleans())
def test_openai_requests_are_valid(history: list[Message], tools: bool, stream: bool) -> None:
    body = _OPENAI._request(_request(history, tools), stream=stream)
    if not history:  # no message at all: nothing a provider could send
        return
    assert openai_problems(body) == []


@settings(deadline=None, max_examples=200)
@given(_histories, st.booleans())
def test_anthropic_requests_are_valid(history: list[Message], tools: bool) -> None:
    body = _ANTHROPIC._request(_request(history, tools))
    assert anthropic_problems(body) == []
