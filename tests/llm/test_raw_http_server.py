"""The providers against a real HTTP/1.1 server (`tests.support.raw_http`) that sends what real
servers send on the wire: event streams in their many spellings, chunked and gzip bodies,
tool calls in pieces, errors, broken and stale connections, and output that is not the API's."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import zlib
from typing import Any

import pytest

import jianmu.llm.openai as openai_module
from jianmu.errors import LLMError, LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import ChatRequest, LLMResponse, StreamDone, TextDelta
from tests.support.raw_http import (
    SSE,
    USAGE,
    RawServer,
    Reply,
    anthropic_sse,
    chunk,
    completion,
    json_reply,
    message,
    openai_sse,
)

REQUEST = ChatRequest.build([{"role": "user", "content": "hi"}], None, None, {})


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The OpenAI provider's delays between attempts, recorded instead of slept."""
    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(openai_module, "_backoff", record)
    return delays


def _stream(pieces: list[bytes], **options: Any) -> Reply:
    return Reply(pieces=pieces, chunked=True, headers=dict(SSE), **options)


def _call(index: int, ident: str | None = None, name: str | None = None,
          arguments: Any = "") -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name:
        function["name"] = name
    fragment: dict[str, Any] = {"index": index, "function": function}
    if ident:
        fragment.update(id=ident, type="function")
    return fragment


def _ask(server: RawServer, *, stream: bool, anthropic: bool = False,
         **options: Any) -> tuple[LLMResponse, list[Any]]:
    """One reply of the provider at ``server``, and a stream's events."""

    async def ask() -> tuple[LLMResponse, list[Any]]:
        llm: OpenAIProvider | AnthropicProvider = (
            AnthropicProvider("claude", base_url=server.url, **options) if anthropic else
            OpenAIProvider("m", base_url=server.url + "/v1", **options))
        try:
            if not stream:
                return await llm.send(REQUEST), []
            events = [event async for event in llm.send_stream(REQUEST)]
            assert isinstance(events[-1], StreamDone)
            return events[-1].response, events
        finally:
            await llm.close()

    return asyncio.run(ask())


def _serving(*replies: Reply) -> RawServer:
    script = iter(replies)
    return RawServer(lambda request: next(script))


# -- OpenAI streams in the ways servers write them -------------------------------------------

_TEXT = [chunk({"role": "assistant", "content": "hel"}), chunk({"content": "lo"}),
         chunk(finish="stop")]
_UNICODE = b"".join(openai_sse([chunk({"content": "héllo 世界 🎉"}), chunk(finish="stop")]))


@pytest.mark.parametrize("reply", [
    _stream(openai_sse(_TEXT, space=False, crlf=True, keepalive=True)),
    _stream(openai_sse([*_TEXT, chunk(choices=False, usage=USAGE)])),
    _stream(openai_sse([*_TEXT[:2], chunk({}), chunk(finish="stop", usage=USAGE)])),
    Reply(pieces=openai_sse(_TEXT, done=False), no_length=True, headers=SSE),
    _stream([b"event: message\n", *openai_sse(_TEXT[:1], done=False), b"id: 2\nretry: 10\n",
             *openai_sse(_TEXT[1:])]),
    _stream(openai_sse([chunk({"content": "hel", "unknown": 1}, fingerprint="x"),
                        chunk({"content": "lo"}, extra={"a": [1]}), chunk(finish="stop")])),
    # events without data, legal in an event stream: a reconnection delay first (as
    # sse-starlette can send), an empty ``data:`` and a named event with none as keep-alives
    _stream([b"retry: 3000\n\n", *openai_sse(_TEXT[:1], done=False), b"data:\n\n",
             b"event: ping\n\n", b"id: 7\ndata: \r\n\r\n", *openai_sse(_TEXT[1:])]),
], ids=["nospace-crlf-keepalive", "usage-chunk", "finish-later", "no-done", "sse-fields",
        "unknown-fields", "no-data"])
def test_an_openai_stream_in_any_spelling_gives_its_text(reply: Reply) -> None:
    with _serving(reply) as server:
        response, events = _ask(server, stream=True)
    assert response.text == "hello" and response.finish_reason == "stop"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello"
    assert server.errors == []


def test_unicode_split_across_chunks_and_gzip_streams_arrive_whole() -> None:
    pieces = [_UNICODE[i:i + 3] for i in range(0, len(_UNICODE), 3)]
    compress = zlib.compressobj(wbits=31)
    zipped = [compress.compress(_UNICODE[:30]) + compress.flush(zlib.Z_SYNC_FLUSH),
              compress.compress(_UNICODE[30:]) + compress.flush()]
    with _serving(_stream(pieces), Reply(pieces=zipped, chunked=True, headers={
            **SSE, "content-encoding": "gzip"})) as server:
        assert _ask(server, stream=True)[0].text == "héllo 世界 🎉"
        assert _ask(server, stream=True)[0].text == "héllo 世界 🎉"


def test_parallel_tool_calls_in_pieces_interleaved_by_index() -> None:
    events = [
        chunk({"role": "assistant", "tool_calls": [_call(0, "a", "calc", '{"ex')]}),
        chunk({"tool_calls": [_call(1, "b", "other", '{"q"')]}),
        chunk({"tool_calls": [_call(0, arguments='pr": "1')]}),
        chunk({"tool_calls": [_call(1, arguments=': "x"}')]}),
        chunk({"tool_calls": [_call(0, arguments='+2"}')]}),
        chunk(choices=False),
        chunk(finish="tool_calls"),
        chunk(choices=False, usage=USAGE),
    ]
    with _serving(_stream(openai_sse(events))) as server:
        response, _ = _ask(server, stream=True)
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("a", "calc", {"expr": "1+2"}), ("b", "other", {"q": "x"})]
    assert response.usage is not None and response.usage.output_tokens == 4


def test_arguments_sent_as_a_json_object_work_without_warnings() -> None:
    # pytest turns warnings into errors (pyproject): a warning fails this test
    whole = completion(None, tool_calls=[{"id": "a", "type": "function", "function": {
        "name": "f", "arguments": {"x": [1, 2]}}}])
    streamed = openai_sse([chunk({"tool_calls": [_call(0, "a", "f", {"x": [1, 2]})]}),
                           chunk(finish="tool_calls")])
    with _serving(json_reply(whole), _stream(streamed)) as server:
        for stream in (False, True):
            (call,) = _ask(server, stream=stream)[0].tool_calls
            assert (call.id, call.name, call.arguments) == ("a", "f", {"x": [1, 2]})


def test_a_reply_without_usage_leaves_it_unknown() -> None:
    with _serving(json_reply(completion("x")), _stream(openai_sse(_TEXT)),
                  json_reply(message([{"type": "text", "text": "x"}]))) as server:
        assert _ask(server, stream=False)[0].usage is None
        assert _ask(server, stream=True)[0].usage is None
        assert _ask(server, stream=False, anthropic=True)[0].usage is None


# -- failures and retries ----------------------------------------------------------------------


def test_a_429_is_retried_after_the_time_the_server_asked(no_backoff: list[float]) -> None:
    limited = json_reply({"error": {"message": "slow down"}}, status=429,
                         headers={"retry-after": "2"})
    failed = json_reply({"error": {"message": "oops"}}, status=500, close=True)
    ok = json_reply(completion("fine", usage=USAGE), gzip=True)
    with _serving(limited, ok, failed, ok) as server:
        assert _ask(server, stream=False)[0].text == "fine"
        assert _ask(server, stream=False)[0].text == "fine"
    assert no_backoff == [2.0, 0.5]
    assert len(server.requests) == 4


def test_a_stream_that_breaks_midway_is_not_asked_again() -> None:
    broken = _stream(openai_sse(_TEXT), break_after=2)
    with _serving(broken) as server, pytest.raises(LLMTransientError, match="broke off"):
        _ask(server, stream=True, max_retries=3)
    assert len(server.requests) == 1


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
def test_a_kept_alive_connection_the_server_closed_is_not_a_failure(
        reset: bool, anthropic: bool) -> None:
    ok = (json_reply(message([{"type": "text", "text": "fine"}])) if anthropic
          else json_reply(completion("fine")))

    async def turns(server: RawServer) -> list[str]:
        llm: OpenAIProvider | AnthropicProvider = (
            AnthropicProvider("c", base_url=server.url, max_retries=0) if anthropic else
            OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0))
        texts = [(await llm.send(REQUEST)).text]
        # the server closes the idle connection (its keep-alive timeout) between two turns
        await asyncio.to_thread(server.close_idle, reset=reset)
        texts.append((await llm.send(REQUEST)).text)
        # the server takes the next request on a kept-alive connection and closes it unanswered
        replies = iter([Reply(drop=True), ok])
        server.handler = lambda request: next(replies)
        texts.append((await llm.send(REQUEST)).text)
        await llm.close()
        return texts

    with RawServer(lambda request: ok) as server:
        assert asyncio.run(turns(server)) == ["fine"] * 3
    assert server.errors == []


# -- output that is not the API's: clear errors, nothing lost ---------------------------------


@pytest.mark.parametrize(("anthropic", "stream", "reply"), [
    (False, False, Reply(pieces=[b'{"id": "x", "choices": [{"index": 0, "message": '])),
    (False, True, _stream([b'data: {"id": "x", "choices": [{"delta": \n\n'])),
    (True, False, Reply(pieces=[b'{"id": "x", "type": "message", "content": ['])),
    (True, True, _stream([*anthropic_sse([{"type": "message_start", "message": message([])}]),
                          b'event: content_block_start\ndata: {"index": 0, \n\n'])),
], ids=["openai", "openai-stream", "anthropic", "anthropic-stream"])
def test_text_that_is_not_json_is_shown_in_the_error(
        anthropic: bool, stream: bool, reply: Reply) -> None:
    with _serving(reply) as server, pytest.raises(LLMError) as caught:
        _ask(server, stream=stream, anthropic=anthropic)
    said = str(caught.value)
    assert "not JSON" in said
    assert '{"id": "x"' in said or '{"index": 0, ' in said  # the text itself, not a position


_HALF = "世".encode()[:2]  # half a character: older llama.cpp builds streamed one split so


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
def test_a_stream_with_half_a_character_reads_on_with_a_replacement_character(
        anthropic: bool) -> None:
    """The event-stream standard decodes a byte that is not UTF-8 as U+FFFD and reads on; the
    SDKs' decoders failed the reply with a bare ``UnicodeDecodeError``. Sent a few bytes at a
    time: a whole character split between pieces is still whole."""
    if anthropic:
        raw = b"".join(anthropic_sse(_anthropic_events())).replace(
            "Sure 世".encode(), b"Sure " + _HALF + "世".encode())
    else:
        raw = b"".join(openai_sse(_TEXT)).replace(b'"hel"', b'"h' + _HALF + "é".encode() + b'l"')
    with _serving(_stream([raw[i:i + 5] for i in range(0, len(raw), 5)])) as server:
        response, events = _ask(server, stream=True, anthropic=anthropic)
    said = "Sure \ufffd世" if anthropic else "h\ufffdéllo"
    assert response.text == said
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == said
    if anthropic:  # the rest of the message is read on
        assert [c.arguments for c in response.tool_calls] == [{"expr": "1+1"}]


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream-ignored"])
def test_a_json_body_that_is_not_utf8_is_a_clear_error_showing_it(
        anthropic: bool, stream: bool) -> None:
    """JSON is UTF-8: a whole reply with half a character (to a streamed request too, from a
    server that ignores ``stream``) is an `LLMError` naming the server and showing the text
    around it, not a bare ``UnicodeDecodeError``; answered (and billed), it is not asked
    again."""
    whole = message([{"type": "text", "text": "hi"}]) if anthropic else completion("hi")
    body = json.dumps(whole).encode().replace(b'"hi"', b'"hi' + _HALF + b'"')
    with _serving(Reply(pieces=[body])) as server, pytest.raises(LLMError) as caught:
        _ask(server, stream=stream, anthropic=anthropic, max_retries=2)
    said = str(caught.value)
    assert not isinstance(caught.value, LLMTransientError)
    assert "127.0.0.1" in said and "not UTF-8" in said and '"hi\ufffd"' in said, said
    assert len(server.requests) == 1


def test_wrong_types_are_refused_with_what_came() -> None:
    with _serving(_stream(openai_sse([{"id": "x", "choices": "nope"}])),
                  json_reply({"id": "x", "choices": [{"index": 0, "message": {
                      "role": "assistant", "tool_calls": "x"}}]})) as server:
        with pytest.raises(LLMError, match="nope"):
            _ask(server, stream=True)
        with pytest.raises(LLMError, match="tool_calls"):
            _ask(server, stream=False)


# -- Anthropic streams --------------------------------------------------------------------------


def _anthropic_events(tool_input: Any = None) -> list[dict[str, Any]]:
    start = {**message([], usage={"input_tokens": 10, "output_tokens": 1}), "stop_reason": None}
    tool: dict[str, Any] = {"type": "tool_use", "id": "tu1", "name": "calc", "input": {}}
    pieces: list[dict[str, Any]] = []
    if tool_input is None:
        pieces = [{"type": "content_block_delta", "index": 2, "delta": {
            "type": "input_json_delta", "partial_json": part}}
            for part in ("", '{"ex', 'pr": "1+1"}')]
    else:
        tool["input"] = tool_input
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "let me "}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "think"}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "signature_delta", "signature": "sig=="}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "text_delta", "text": "Sure 世"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": tool},
        *pieces,
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 20}, "unknown": 1},
        {"type": "message_stop"},
    ]


def _check_anthropic(response: LLMResponse, arguments: Any = None) -> None:
    assert response.text == "Sure 世"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("tu1", "calc", arguments or {"expr": "1+1"})]
    assert response.message.reasoning == [
        {"type": "thinking", "thinking": "let me think", "signature": "sig=="}]
    assert response.usage is not None and (
        response.usage.input_tokens, response.usage.output_tokens) == (10, 20)


def test_an_anthropic_stream_with_thinking_and_tool_input_in_pieces() -> None:
    raw = b"".join(anthropic_sse(_anthropic_events(), crlf=True, ping=True))
    split = [raw[i:i + 5] for i in range(0, len(raw), 5)]
    with _serving(_stream(split)) as server:
        _check_anthropic(_ask(server, stream=True, anthropic=True)[0])


def test_an_anthropic_stream_of_data_lines_only_is_read() -> None:
    # some compatible gateways name no event (no ``event:`` line): the SDK skipped them all
    unnamed = [b"\n".join(line for line in piece.split(b"\n") if not line.startswith(b"event:"))
               for piece in anthropic_sse(_anthropic_events())]
    with _serving(_stream(unnamed)) as server:
        _check_anthropic(_ask(server, stream=True, anthropic=True)[0])


def test_an_unnamed_anthropic_event_that_is_not_json_is_shown() -> None:
    events = [*anthropic_sse(_anthropic_events()[:1]), b"data: {not json\n\n"]
    with _serving(_stream(events)) as server, pytest.raises(LLMError, match="not json"):
        _ask(server, stream=True, anthropic=True)


def test_an_anthropic_tool_input_sent_whole_as_a_string_streams_without_warnings() -> None:
    # pytest turns warnings into errors (pyproject): the SDK's model declares a dict
    with _serving(_stream(anthropic_sse(_anthropic_events('{"expr": "9"}')))) as server:
        _check_anthropic(_ask(server, stream=True, anthropic=True)[0], {"expr": "9"})


def test_an_anthropic_stream_that_ends_early_or_reports_an_error() -> None:
    events = _anthropic_events()
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    with _serving(Reply(pieces=anthropic_sse(events[:-1]), no_length=True, headers=SSE),
                  _stream(anthropic_sse([*events[:3], error]))) as server:
        with pytest.raises(LLMTransientError, match="no message_stop"):
            _ask(server, stream=True, anthropic=True)
        with pytest.raises(LLMTransientError, match="busy"):
            _ask(server, stream=True, anthropic=True)
    assert len(server.requests) == 2


@pytest.mark.parametrize("data", [b"Internal server error", b'{"message": "boom"}'],
                         ids=["text", "no-type"])
def test_an_anthropic_error_event_of_a_gateway_says_its_message(data: bytes) -> None:
    """An error event without Anthropic's error object (a compatible gateway's): its text
    said once, not after an empty kind (``failed midway: : ...``)."""
    start = _anthropic_events()[:1]
    with _serving(_stream([*anthropic_sse(start), b"event: error\ndata: " + data + b"\n\n"])
                  ) as server, pytest.raises(LLMError) as failed:
        _ask(server, stream=True, anthropic=True)
    said = str(failed.value)
    assert ": :" not in said and said.endswith(("failed midway: Internal server error",
                                                "failed midway: boom"))


def test_no_task_exception_is_left_unretrieved(caplog: pytest.LogCaptureFixture) -> None:
    broken = _stream(openai_sse(_TEXT), break_after=1)
    with _serving(broken, json_reply(completion("fine"))) as server, \
            caplog.at_level(logging.ERROR, logger="asyncio"):
        with pytest.raises(LLMTransientError):
            _ask(server, stream=True)
        assert _ask(server, stream=False)[0].text == "fine"
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert json.loads(json.dumps(server.bodies()))  # every request was JSON


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
@pytest.mark.parametrize(("kind", "page"), [
    ("text/html", b"<html><body>Please log in to the proxy</body></html>"),
    ("text/plain", b"upstream connect error or disconnect/reset before headers"),
])
def test_a_page_instead_of_an_event_stream_is_shown_in_the_error(
        anthropic: bool, kind: str, page: bytes) -> None:
    # a proxy's page sent with status 200: what it said is the only clue
    with _serving(Reply(pieces=[page], headers={"content-type": kind})) as server, \
            pytest.raises(LLMError, match="without") as caught:
        _ask(server, stream=True, anthropic=anthropic)
    assert page.decode() in str(caught.value)


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_byte_order_mark_before_the_answer_loses_nothing(anthropic: bool, stream: bool) -> None:
    # a server writing UTF-8 with a BOM: before a stream's first event, the event-stream
    # standard drops it; the SDKs' decoders read "\ufeffdata" as an unknown field
    bom = "\ufeff".encode()
    if not stream:
        whole = message([{"type": "text", "text": "hello"}]) if anthropic else completion("hello")
        reply = Reply(pieces=[bom + json.dumps(whole).encode()])
    elif anthropic:
        reply = _stream([bom, *anthropic_sse(_anthropic_events())])
    else:
        reply = _stream([bom + b"".join(openai_sse(_TEXT))])
    with _serving(reply) as server:
        response, _ = _ask(server, stream=stream, anthropic=anthropic)
    if anthropic and stream:
        _check_anthropic(response)
    else:
        assert response.text == "hello"


@pytest.mark.parametrize("first", ['{"x": 1}', "{}"], ids=["repeated", "placeholder"])
def test_whole_arguments_sent_again_for_one_call_replace_the_first(first: str) -> None:
    # a server that repeats the whole call in its last chunk, or sends "{}" before the real
    # arguments: joined, they were no JSON, and the call failed
    call = {"index": 0, "id": "a", "type": "function",
            "function": {"name": "calc", "arguments": '{"x": 1}'}}
    opening = {**call, "function": {**call["function"], "arguments": first}}
    events = [chunk({"tool_calls": [opening]}), chunk({"tool_calls": [call]}, finish="tool_calls")]
    with _serving(_stream(openai_sse(events))) as server:
        (got,) = _ask(server, stream=True)[0].tool_calls
    assert (got.id, got.name, got.arguments) == ("a", "calc", {"x": 1})


def _compressed(data: bytes, encoding: str) -> Reply:
    """``data`` as one body of ``encoding`` (what a proxy compressing JSON sends)."""
    packed = zlib.compress(data) if encoding == "deflate" else gzip.compress(data)
    return Reply(pieces=[packed], headers={"content-encoding": encoding})


@pytest.mark.parametrize("anthropic", [False, True], ids=["openai", "anthropic"])
@pytest.mark.parametrize("how", ["gzip", "deflate", "white-space-first"])
def test_a_streamed_request_answered_whole_compressed_or_after_white_space(
        anthropic: bool, how: str) -> None:
    # a server that ignores ``stream`` behind a proxy that compresses JSON, or that keeps the
    # connection alive with white space while the model works: its first raw byte is no "{",
    # and the whole reply, answered and billed, failed as "a streamed request without any chunk"
    whole = json.dumps(message([{"type": "text", "text": "hello"}], usage={
        "input_tokens": 3, "output_tokens": 4}) if anthropic else completion(
        "hello", usage=USAGE)).encode()
    # more white space than one read of the client takes: it comes alone, before the reply
    reply = (_compressed(whole, how) if how != "white-space-first" else
             Reply(pieces=[b" " * 70_000 + b"\n", whole], chunked=True))
    async def twice(url: str) -> list[Any]:
        llm: OpenAIProvider | AnthropicProvider = (
            AnthropicProvider("claude", base_url=url) if anthropic else
            OpenAIProvider("m", base_url=url + "/v1"))
        try:
            return [[event async for event in llm.send_stream(REQUEST)][-1].response
                    for _ in range(2)]
        finally:
            await llm.close()

    with _serving(reply, reply) as server:
        responses = asyncio.run(twice(server.url))
    assert [(r.text, r.usage and r.usage.output_tokens) for r in responses] == [("hello", 4)] * 2
    # each asked once, and the kept-alive connection served the next request
    assert (len(server.requests), server.connections) == (2, 1)


def test_a_compressed_page_instead_of_an_event_stream_is_shown_decoded() -> None:
    page = b"<html><body>Sign in to continue</body></html>"
    reply = _compressed(page, "gzip")
    reply.headers["content-type"] = "text/html"
    with _serving(reply) as server, pytest.raises(LLMError, match="Sign in to continue"):
        _ask(server, stream=True)
