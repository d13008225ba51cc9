"""A stream whose JSON escapes split a character outside the BMP (an emoji) between two pieces,
``"\\ud83d"`` then ``"\\ude00"``, as a server that cuts UTF-16 text can: legal JSON, and each
piece alone a lone surrogate. The pieces are joined into the character, in the deltas and the
reply: a lone surrogate cannot be encoded, so printing the answer raised."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jianmu import Agent
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import TextDelta
from tests.support.raw_http import SSE, RawServer, Reply, anthropic_sse, message

_OPENAI = [b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n',
           b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n']
_DELTA = (b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
          b'"delta": {"type": "text_delta", "text": "%s"}}\n\n')


def _reply(pieces: list[bytes], anthropic: bool) -> Reply:
    if not anthropic:
        events = [_OPENAI[0] % piece for piece in pieces] + [_OPENAI[1]]
        return Reply(pieces=events, chunked=True, headers=SSE)
    start = {**message([], usage={"input_tokens": 3, "output_tokens": 1}), "stop_reason": None}
    events = [
        *anthropic_sse([{"type": "message_start", "message": start},
                        {"type": "content_block_start", "index": 0,
                         "content_block": {"type": "text", "text": ""}}]),
        *(_DELTA % piece for piece in pieces),
        *anthropic_sse([{"type": "content_block_stop", "index": 0},
                        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                         "usage": {"output_tokens": 5}},
                        {"type": "message_stop"}]),
    ]
    return Reply(pieces=events, chunked=True, headers=SSE)


def _llm(server: RawServer, anthropic: bool) -> AnthropicProvider | OpenAIProvider:
    if anthropic:
        return AnthropicProvider("claude", base_url=server.url, max_retries=0)
    return OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0)


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
@pytest.mark.parametrize(("pieces", "text"), [
    ([rb"hi \ud83d", rb"\ude00!"], "hi \U0001f600!"),
    ([rb"\ud83d", rb"\ude00", rb"\ud83d", rb"\ude01"], "\U0001f600\U0001f601"),
    # a half that no other half follows: the replacement character, as a UTF-8 decoder gives
    ([rb"a \ud83d", rb"b"], "a \ufffdb"),
    ([rb"end \ud83d"], "end \ufffd"),
], ids=["split", "each-half-alone", "unpaired", "unpaired-last"])
def test_a_surrogate_pair_split_between_pieces_is_one_character(
        anthropic: bool, pieces: list[bytes], text: str) -> None:
    with RawServer(lambda request: _reply(pieces, anthropic)) as server:
        llm = _llm(server, anthropic)
        agent = Agent(llm, stream=True)
        deltas: list[str] = []

        async def run() -> str:
            async for event in llm.stream([{"role": "user", "content": "hi"}]):
                if isinstance(event, TextDelta):
                    deltas.append(event.text)
            result = await agent.run("hi")
            await llm.close()
            return str(result.output)

        import asyncio

        answer = asyncio.run(run())
    assert answer == "".join(deltas) == text
    assert all(delta.encode() for delta in deltas)  # each one printable as it came
    assert server.connections == 1




_CALL_OPENAI = [
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", '
    b'"type": "function", "function": {"name": "say", "arguments": ""}}]}}]}\n\n',
    *(b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": '
      b'{"arguments": "%s"}}]}}]}\n\n' % piece
      for piece in [rb'{\"text\": \"hi \ud83d', rb'\ude00 \ud83d', rb'\ude01!\"}']),
    b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}\n\n',
]
_CALL_ANTHROPIC = (b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
                   b'"delta": {"type": "input_json_delta", "partial_json": "%s"}}\n\n')


def _call_reply(anthropic: bool) -> Reply:
    if not anthropic:
        return Reply(pieces=_CALL_OPENAI, chunked=True, headers=SSE)
    start = {**message([], usage={"input_tokens": 3, "output_tokens": 1}), "stop_reason": None}
    events = [
        *anthropic_sse([{"type": "message_start", "message": start},
                        {"type": "content_block_start", "index": 0, "content_block": {
                            "type": "tool_use", "id": "toolu_1", "name": "say", "input": {}}}]),
        *(_CALL_ANTHROPIC % piece
          for piece in [rb'{\"text\": \"hi \ud83d', rb'\ude00 \ud83d', rb'\ude01!\"}']),
        *anthropic_sse([{"type": "content_block_stop", "index": 0},
                        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                         "usage": {"output_tokens": 5}},
                        {"type": "message_stop"}]),
    ]
    return Reply(pieces=events, chunked=True, headers=SSE)


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
def test_a_surrogate_pair_split_between_pieces_of_tool_call_arguments_is_one_character(
        anthropic: bool) -> None:
    """The arguments of a streamed tool call, split so: the tool was given two lone
    surrogates (a text no file or UTF-8 encoder takes) and the history sent back two
    replacement characters."""
    from jianmu import tool

    said: list[str] = []

    @tool
    def say(text: str) -> str:
        """Say something.

        Args:
            text: what to say.
        """
        said.append(text)
        return f"said {text}"

    replies = iter([_call_reply(anthropic), _reply([b"ok"], anthropic)])
    with RawServer(lambda request: next(replies)) as server:
        llm = _llm(server, anthropic)
        agent = Agent(llm, tools=[say])

        async def run() -> list[Any]:
            events = [event async for event in agent.stream("hi")]
            await llm.close()
            return events

        import asyncio

        events = asyncio.run(run())
    assert events[-1].fields["result"].ok
    assert said == ["hi \U0001f600 \U0001f601!"]
    assert [e.fields["args_preview"] for e in events if e.name == "tool.call.started"] == [
        '{"text": "hi \U0001f600 \U0001f601!"}']
    assert "hi \U0001f600 \U0001f601!" in json.dumps(server.requests[1].body, ensure_ascii=False)


_THINKING = (b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
             b'"delta": {"type": "thinking_delta", "thinking": "%s"}}\n\n')
_REASONING = b'data: {"choices": [{"index": 0, "delta": {"reasoning_content": "%s"}}]}\n\n'


def _thought_reply(anthropic: bool) -> Reply:
    halves = [rb"think \ud83d", rb"\ude00 done"]
    if not anthropic:
        return Reply(pieces=[*(_REASONING % half for half in halves), _OPENAI[0] % b"ok",
                             _OPENAI[1]], chunked=True, headers=SSE)
    start = {**message([], usage={"input_tokens": 3, "output_tokens": 1}), "stop_reason": None}
    events = [
        *anthropic_sse([{"type": "message_start", "message": start},
                        {"type": "content_block_start", "index": 0,
                         "content_block": {"type": "thinking", "thinking": ""}}]),
        *(_THINKING % half for half in halves),
        *anthropic_sse([
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "signature_delta", "signature": "sig"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1,
             "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 1,
             "delta": {"type": "text_delta", "text": "ok"}},
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": 5}},
            {"type": "message_stop"}]),
    ]
    return Reply(pieces=events, chunked=True, headers=SSE)


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
def test_a_surrogate_pair_split_between_pieces_of_reasoning_is_one_character(
        anthropic: bool) -> None:
    """The reasoning kept on the message (Claude's thinking, signed: sent back as it came)
    held two lone surrogates, and went back as two replacement characters."""
    replies = iter([_thought_reply(anthropic), _reply([b"fine"], anthropic)])
    with RawServer(lambda request: next(replies)) as server:
        llm: Any = (AnthropicProvider("claude", base_url=server.url, max_retries=0,
                                      thinking={"type": "enabled", "budget_tokens": 1024})
                    if anthropic else OpenAIProvider("m", base_url=server.url + "/v1",
                                                     max_retries=0, send_reasoning=True))
        agent = Agent(llm, stream=True)
        first = agent.run_sync("hi")
        assert first.ok, first.error
        assert agent.run_sync("again", history=first.messages).ok
    [thought] = first.messages[-1].reasoning
    assert thought.get("thinking", thought.get("text")) == "think \U0001f600 done"
    if anthropic:  # Claude's thinking goes back with its signature, as it came
        assert "think \U0001f600 done" in json.dumps(server.requests[1].body, ensure_ascii=False)
