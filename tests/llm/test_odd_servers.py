"""Servers that answer oddly, on the real keep-alive server: a proxy's HTML page with a 200, a
JSON body of another kind, token counts that are not counts, a refusal, a choice without a
message. Each is a clear `LLMError` naming the server, or (for the counts) usage left unknown,
never an ``AttributeError`` out of the provider or a reducer failing on the run's sums; and the
next run on the same provider goes on as usual."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from jianmu import Agent
from jianmu.errors import LLMError, LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import SDKProvider, token_count
from jianmu.runtime import RunResult, RunStatus
from tests.support.model_server import MODES, ModelServer, Raw


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


@pytest.fixture(autouse=True)
def _fresh_script(server: ModelServer) -> Iterator[None]:
    yield
    server._script.clear()


def provider(server: ModelServer, api: str) -> SDKProvider:
    if api == "openai":
        return OpenAIProvider("m", base_url=server.openai_url, max_retries=0, retry_backoff=0)
    return AnthropicProvider("m", base_url=server.anthropic_url, max_retries=0)


def ask(
    llm: SDKProvider, stream: bool, question: str = "q", tools: Sequence[Any] = ()
) -> tuple[RunResult, list[Any]]:
    """One run of a one-line agent, streamed or not; its result and its events."""
    agent = Agent(llm, tools=list(tools))
    events: list[Any] = []
    if not stream:
        return agent.run_sync(question, timeout=30), events

    async def read() -> RunResult:
        async for event in agent.stream(question, timeout=30):
            events.append(event)
        result: RunResult = events[-1].fields["result"]
        return result

    return asyncio.run(read()), events


def completion(message: dict[str, Any], usage: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                            "choices": [{"index": 0, "message": message,
                                         "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    return body


def chunks(*deltas: dict[str, Any], usage: Any = None) -> list[dict[str, Any]]:
    def chunk(choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": choices}

    out = [chunk([{"index": 0, "delta": d, "finish_reason": None}]) for d in deltas]
    out.append(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    if usage is not None:
        out.append({**chunk([]), "usage": usage})
    return out


def message(text: str, usage: Any) -> dict[str, Any]:
    return {"id": "m", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": usage}


def message_events(text: str, start_usage: Any, delta_usage: Any) -> list[dict[str, Any]]:
    return [
        {"type": "message_start", "message": {**message("", start_usage), "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": delta_usage},
        {"type": "message_stop"},
    ]


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_an_html_page_is_a_clear_error_and_the_next_run_goes_on(
    server: ModelServer, api: str, stream: bool,
) -> None:
    server.add(Raw(body="<html><body>502 from the proxy</body></html>",
                   content_type="text/html"), "Back again.")
    llm = provider(server, api)
    result, _ = ask(llm, stream)
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, LLMError), result.error
    said = str(result.exception)
    assert "127.0.0.1" in said and "AttributeError" not in (result.error or "")
    if stream:
        assert "streamed request without" in said, said
    else:
        assert "answered with something other than" in said and "502 from the proxy" in said
    again, _ = ask(llm, stream)
    assert again.ok and again.output == "Back again."


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_json_body_of_another_kind_is_a_clear_error(
    server: ModelServer, api: str, stream: bool,
) -> None:
    server.add(Raw(body=[1, 2, 3], events=[{"type": "ping", "unrelated": True}]))
    result, _ = ask(provider(server, api), stream)
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, LLMError), result.error
    assert "answered" in str(result.exception)


@pytest.mark.parametrize(("api", "stream"), MODES)
@pytest.mark.parametrize("counts", [("lots", 5), (3, -1), (2.5, 4), (None, None)],
                         ids=["text", "negative", "fraction", "nulls"])
def test_token_counts_that_are_not_counts_leave_usage_unknown(
    server: ModelServer, api: str, stream: bool, counts: tuple[Any, Any],
) -> None:
    given, taken = counts
    if api == "openai":
        usage = {"prompt_tokens": given, "completion_tokens": taken}
        server.add(Raw(body=completion({"role": "assistant", "content": "Fine."}, usage),
                       events=chunks({"role": "assistant", "content": "Fine."}, usage=usage)))
    else:
        usage = {"input_tokens": given, "output_tokens": taken}
        server.add(Raw(body=message("Fine.", usage),
                       events=message_events("Fine.", usage, {"output_tokens": taken})))
    result, events = ask(provider(server, api), stream)
    assert result.ok and result.output == "Fine.", result.error
    usage_now = result.usage
    assert usage_now is not None
    # an estimate, in whole tokens: the sums and a budget still hold
    assert type(usage_now.input_tokens) is int and usage_now.input_tokens > 0
    assert type(usage_now.output_tokens) is int and usage_now.output_tokens > 0
    if stream:
        assert [e.fields["model"] for e in events if e.name == "llm.usage_unknown"] == ["m"]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_whole_counts_sent_as_floats_or_digits_are_counted(server: ModelServer, api: str) -> None:
    if api == "openai":
        server.add(Raw(body=completion({"role": "assistant", "content": "Fine."},
                                       {"prompt_tokens": 7.0, "completion_tokens": "3"})))
    else:
        server.add(Raw(body=message("Fine.", {"input_tokens": 7.0, "output_tokens": "3"})))
    result, _ = ask(provider(server, api), False)
    assert result.ok
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (7, 3)
    assert type(result.usage.input_tokens) is int


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_refusal_is_the_answer_not_lost(server: ModelServer, stream: bool) -> None:
    server.add(Raw(
        body=completion({"role": "assistant", "content": None, "refusal": "I can't help."}),
        events=chunks({"role": "assistant", "content": None, "refusal": "I can't"},
                      {"refusal": " help."}),
    ))
    result, events = ask(provider(server, "openai"), stream)
    assert result.ok and result.output == "I can't help."
    if stream:
        assert "".join(e.fields["text"] for e in events if e.name == "llm.call.delta") == (
            "I can't help.")


def test_a_choice_without_a_message_is_a_clear_error(server: ModelServer) -> None:
    server.add(Raw(body={"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                         "choices": [{"index": 0, "finish_reason": "stop"}]}))
    result, _ = ask(provider(server, "openai"), False)
    assert isinstance(result.exception, LLMError)
    assert "a choice without a message" in str(result.exception)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_content_that_is_not_text_is_a_clear_error(server: ModelServer, stream: bool) -> None:
    server.add(Raw(body=completion({"role": "assistant", "content": 42}),
                   events=chunks({"role": "assistant", "content": 42})))
    result, _ = ask(provider(server, "openai"), stream)
    assert isinstance(result.exception, LLMError), result.error
    assert "cannot be read" in str(result.exception) or "not text" in str(result.exception)


def test_tool_call_fragments_of_the_wrong_shape_are_a_clear_error(server: ModelServer) -> None:
    server.add(Raw(events=chunks({"role": "assistant", "tool_calls": {"id": "c"}})))
    result, _ = ask(provider(server, "openai"), True)
    assert isinstance(result.exception, LLMError), result.error
    assert "tool-call fragments that are not a list" in str(result.exception)


def test_an_anthropic_error_body_with_a_200_says_the_error(server: ModelServer) -> None:
    server.add(Raw(body={"type": "error",
                         "error": {"type": "overloaded_error", "message": "busy now"}}))
    result, _ = ask(provider(server, "anthropic"), False)
    assert isinstance(result.exception, LLMTransientError)  # a fallback model takes over
    assert "overloaded_error: busy now" in str(result.exception)


@pytest.mark.parametrize(("value", "count"), [
    (0, 0), (12, 12), (7.0, 7), ("42", 42), (None, None), (True, None), (-1, None),
    (2.5, None), (float("inf"), None), (float("nan"), None), ("4e3", None), ("", None),
    ("9" * 40, None), ("١٢", None), ([1], None),
])
def test_token_count(value: Any, count: int | None) -> None:
    assert token_count(value) == count


def test_an_anthropic_stream_giving_the_output_count_last_is_counted(server: ModelServer) -> None:
    server.add(Raw(events=message_events("Fine.", {"input_tokens": 9}, {"output_tokens": 4})))
    result, events = ask(provider(server, "anthropic"), True)
    assert result.ok and result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (9, 4)
    assert not [e for e in events if e.name == "llm.usage_unknown"]


@pytest.mark.parametrize(("api", "stream"), MODES)
@pytest.mark.parametrize("body", ["", "{not json", "data: {not json\n\n"],
                         ids=["empty", "broken", "broken-event"])
def test_a_body_that_is_not_json_is_a_clear_error(
    server: ModelServer, api: str, stream: bool, body: str,
) -> None:
    content_type = "text/event-stream" if body.startswith("data:") else "application/json"
    server.add(Raw(body=body, content_type=content_type), "Back again.")
    llm = provider(server, api)
    result, _ = ask(llm, stream)
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, LLMError), result.error
    assert "127.0.0.1" in str(result.exception)
    again, _ = ask(llm, stream)
    assert again.ok and again.output == "Back again."


def test_an_anthropic_tool_input_given_whole_at_the_block_start_is_kept(
    server: ModelServer,
) -> None:
    """Anthropic starts a ``tool_use`` block with ``input: {}`` and streams the input as JSON
    fragments; a compatible server that gives the input whole at the start, with no fragment,
    is heard too (the call ran with no arguments), and fragments still win when both come."""
    seen: list[str] = []

    def weather(city: str) -> str:
        """The weather of a city.

        Args:
            city: the city.
        """
        seen.append(city)
        return "sunny"

    def tool_turn(start_input: dict[str, Any], fragments: list[str]) -> list[dict[str, Any]]:
        return [
            {"type": "message_start", "message": {**message("", {"input_tokens": 5}),
                                                  "content": []}},
            {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": "toolu_1", "name": "weather", "input": start_input}},
            *({"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": f}} for f in fragments),
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
             "usage": {"output_tokens": 3}},
            {"type": "message_stop"},
        ]

    llm = provider(server, "anthropic")
    for start, fragments, city in (({"city": "Oslo"}, [], "Oslo"),
                                   ({}, ['{"city": ', '"Bergen"}'], "Bergen"),
                                   ({"city": "Oslo"}, ['{"city": "Tromsø"}'], "Tromsø")):
        server.add(Raw(events=tool_turn(start, fragments)),
                   Raw(events=message_events("Done.", {"input_tokens": 9}, {"output_tokens": 2})))
        result, _ = ask(llm, True, "weather?", tools=[weather])
        assert result.ok, result.error
        assert seen[-1] == city


def _weather(seen: list[str]) -> Any:
    def weather(city: str) -> str:
        """The weather of a city.

        Args:
            city: the city.
        """
        seen.append(city)
        return "sunny"

    return weather


def test_anthropic_tool_calls_are_kept_in_block_order_even_when_a_block_never_closes(
    server: ModelServer,
) -> None:
    """A compatible server that closes its tool blocks out of order, or never closes the last
    (no ``content_block_stop`` before ``message_delta``): every call is kept, in order."""
    seen: list[str] = []

    def block(index: int, city: str) -> list[dict[str, Any]]:
        return [{"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": f"toolu_{index}", "name": "weather", "input": {}}},
                {"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": f'{{"city": "{city}"}}'}}]

    server.add(Raw(events=[
        {"type": "message_start", "message": {**message("", {"input_tokens": 5}),
                                              "content": []}},
        *block(0, "Oslo"), *block(1, "Bergen"), *block(2, "Tromsø"),
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]), Raw(events=message_events("Done.", {"input_tokens": 9}, {"output_tokens": 2})))
    result, _ = ask(provider(server, "anthropic"), True, "weather?", tools=[_weather(seen)])
    assert result.ok, result.error
    assert seen == ["Oslo", "Bergen", "Tromsø"]
    sent = server.requests[-1].body["messages"][1]["content"]
    assert [b["id"] for b in sent if b["type"] == "tool_use"] == ["toolu_0", "toolu_1", "toolu_2"]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_legacy_function_call_is_a_tool_call(server: ModelServer, stream: bool) -> None:
    """Servers that answer in the older ``function_call`` shape (finish reason
    ``function_call``): the call is made, not lost."""
    seen: list[str] = []
    legacy = {"name": "weather", "arguments": '{"city": "Oslo"}'}
    reply = completion({"role": "assistant", "content": None, "function_call": legacy})
    reply["choices"][0]["finish_reason"] = "function_call"
    events = chunks({"role": "assistant", "content": None,
                     "function_call": {"name": "weather", "arguments": ""}},
                    {"function_call": {"arguments": '{"city": '}},
                    {"function_call": {"arguments": '"Oslo"}'}})
    events[-1]["choices"][0]["finish_reason"] = "function_call"
    server.add(Raw(body=reply, events=events), Raw(
        body=completion({"role": "assistant", "content": "Sunny."}),
        events=chunks({"role": "assistant", "content": "Sunny."})))
    result, _ = ask(provider(server, "openai"), stream, "weather?", tools=[_weather(seen)])
    assert result.ok and result.output == "Sunny.", result.error
    assert seen == ["Oslo"]
    call = server.requests[-1].body["messages"][1]["tool_calls"][0]
    assert call["function"]["name"] == "weather"
    assert server.requests[-1].body["messages"][2]["tool_call_id"] == call["id"]


def test_streamed_content_given_as_parts_is_the_text(server: ModelServer) -> None:
    server.add(Raw(events=chunks({"role": "assistant", "content": [{"type": "text",
                                                                    "text": "Hel"}]},
                                 {"content": [{"type": "text", "text": "lo."}]})))
    result, events = ask(provider(server, "openai"), True)
    assert result.ok and result.output == "Hello.", result.error
    assert [e.fields["text"] for e in events if e.name == "llm.call.delta"] == ["Hel", "lo."]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize(("error", "transient"), [
    ({"message": "Overloaded", "type": "server_error", "code": 503}, True),
    ({"message": "Rate limited upstream", "code": 429}, True),
    ({"message": "Prompt too long", "type": "invalid_request_error", "code": 400}, False),
], ids=["overloaded", "rate-limited", "refused"])
def test_an_openai_error_sent_with_a_200_says_the_error(
    server: ModelServer, stream: bool, error: dict[str, Any], transient: bool,
) -> None:
    """A proxy (OpenRouter, LiteLLM) or a server that fails once the answer began sends the
    error in a 200 body or as a stream's chunk: the run fails saying it, transient when the
    error is (a fallback model may take over)."""
    events = [*chunks({"role": "assistant", "content": "Hel"})[:1], {"error": error}]
    server.add(Raw(body={"error": error}, events=events))
    result, _ = ask(provider(server, "openai"), stream)
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, LLMError), result.error
    assert isinstance(result.exception, LLMTransientError) is transient
    assert error["message"] in str(result.exception) and "127.0.0.1" in str(result.exception)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_content_parts_are_the_text_and_reasoning_parts_are_left_out(
    server: ModelServer, stream: bool,
) -> None:
    """Mistral's reasoning models answer with parts: ``thinking`` and ``text``."""
    parts = [{"type": "thinking", "thinking": [{"type": "text", "text": "Hmm."}]},
             {"type": "text", "text": "Hel"}, {"type": "text", "text": "lo."}]
    server.add(Raw(body=completion({"role": "assistant", "content": parts}),
                   events=chunks({"role": "assistant", "content": parts})))
    result, _ = ask(provider(server, "openai"), stream)
    assert result.ok and result.output == "Hello.", result.error


def test_streamed_calls_that_all_say_index_0_are_each_kept(server: ModelServer) -> None:
    """A server that numbers every streamed call 0, each with its own id: two calls, not one
    call with both calls' arguments run together (which lost both)."""
    seen: list[str] = []

    def call(ident: str, city: str) -> dict[str, Any]:
        return {"tool_calls": [{"index": 0, "id": ident, "type": "function",
                                "function": {"name": "weather", "arguments": ""}}]}

    def more(text: str) -> dict[str, Any]:
        return {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}

    events = chunks(call("a", "Oslo"), more('{"city": '), more('"Oslo"}'),
                    call("b", "Bergen"), more('{"city": "Bergen"}'))
    events[-1]["choices"][0]["finish_reason"] = "tool_calls"
    server.add(Raw(events=events), Raw(events=chunks({"content": "Both sunny."})))
    result, _ = ask(provider(server, "openai"), True, "weather?", tools=[_weather(seen)])
    assert result.ok and result.output == "Both sunny.", result.error
    assert seen == ["Oslo", "Bergen"]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_streamed_request_answered_whole_is_the_answer(server: ModelServer, api: str) -> None:
    """A server (or a proxy) that ignores ``stream`` and answers with the whole JSON reply: the
    reply is read and replayed as the stream, not an error that no chunk came."""
    seen: list[str] = []
    if api == "openai":
        call = {"id": "c1", "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
        first = completion({"role": "assistant", "content": "Looking.", "tool_calls": [call]},
                           {"prompt_tokens": 9, "completion_tokens": 4})
        last = completion({"role": "assistant", "content": "Sunny."})
    else:
        first = message("Looking.", {"input_tokens": 9, "output_tokens": 4})
        first["content"].append({"type": "tool_use", "id": "c1", "name": "weather",
                                 "input": {"city": "Oslo"}})
        first["stop_reason"] = "tool_use"
        last = message("Sunny.", {"input_tokens": 12, "output_tokens": 2})
    server.add(Raw(body=first), Raw(body=last))
    result, events = ask(provider(server, api), True, "weather?", tools=[_weather(seen)])
    assert result.ok and result.output == "Sunny.", result.error
    assert seen == ["Oslo"]
    assert [e.fields["text"] for e in events if e.name == "llm.call.delta"] == [
        "Looking.", "Sunny."]
    assert result.usage is not None and result.usage.input_tokens >= 9


def test_a_server_that_refuses_stream_options_still_streams(server: ModelServer) -> None:
    """Older Azure API versions and some proxies refuse ``stream_options`` (HTTP 400): the
    stream is asked again without it (a refusal bills nothing), and so are the next ones;
    the usage it would have brought is unknown, and said so."""
    from tests.support.model_server import Request, Turn

    def answer(request: Request) -> Raw | Turn:
        if "stream_options" in request.body:
            return Raw(status=400, body={"error": {
                "message": "Unrecognized request argument supplied: stream_options",
                "type": "invalid_request_error"}})
        return Turn(text=f"re: {request.last_user_text}")

    server.add(answer)
    llm = provider(server, "openai")
    for question in ("one", "two"):
        result, events = ask(llm, True, question)
        assert result.ok and result.output == f"re: {question}", result.error
        assert [e for e in events if e.name == "llm.usage_unknown"]
    assert [("stream_options" in r.body) for r in server.requests[-3:]] == [True, False, False]


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_huge_error_page_is_cut_short_in_the_error(
    server: ModelServer, api: str, stream: bool,
) -> None:
    """A proxy's 503 page of 200 KB: the error names the status and shows its start, not the
    whole page (written into the run's result, its events and its checkpoint)."""
    page = "<html><title>503 Service Unavailable</title>" + "<p>x</p>" * 25_000 + "</html>"
    server.add(Raw(status=503, body=page, content_type="text/html"))
    result, _ = ask(provider(server, api), stream)
    assert isinstance(result.exception, LLMTransientError), result.error
    said = str(result.exception)
    assert "503" in said and "Service Unavailable" in said and len(said) < 2_000, len(said)


def test_groq_usage_in_x_groq_is_counted(server: ModelServer) -> None:
    """Groq streams its usage in the last chunk's ``x_groq.usage``, not in ``usage``."""
    events = chunks({"role": "assistant", "content": "Fine."})
    events[-1]["x_groq"] = {"id": "req_1", "usage": {"prompt_tokens": 12,
                                                     "completion_tokens": 3}}
    server.add(Raw(events=events))
    result, events_seen = ask(provider(server, "openai"), True)
    assert result.ok and result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (12, 3)
    assert not [e for e in events_seen if e.name == "llm.usage_unknown"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 40, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 32}},
    {"prompt_tokens": 40, "completion_tokens": 2, "prompt_cache_hit_tokens": 32,
     "prompt_cache_miss_tokens": 8},
], ids=["openai", "deepseek"])
def test_cached_prompt_tokens_are_counted_as_cache_reads(
    server: ModelServer, stream: bool, usage: dict[str, Any],
) -> None:
    """OpenAI says them in ``prompt_tokens_details.cached_tokens``; DeepSeek in
    ``prompt_cache_hit_tokens``: either way they are cache reads, part of the prompt."""
    said = {"role": "assistant", "content": "Fine."}
    server.add(Raw(body=completion(said, usage), events=chunks(said, usage=usage)))
    result, _ = ask(provider(server, "openai"), stream)
    assert result.ok and result.usage is not None, result.error
    assert (result.usage.input_tokens, result.usage.output_tokens) == (40, 2)
    assert result.usage.cache_read_tokens == 32


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_event_stream_labelled_json_is_still_read_as_a_stream(
    server: ModelServer, api: str,
) -> None:
    """A server that sends its event stream as ``application/json``: read as the stream it is
    (a whole JSON reply is told apart by its first byte)."""
    events = (chunks({"role": "assistant", "content": "Fine."}) if api == "openai" else
              message_events("Fine.", {"input_tokens": 9}, {"output_tokens": 2}))
    server.add(Raw(events=events, headers={"content-type": "application/json"}))
    result, _ = ask(provider(server, api), True)
    assert result.ok and result.output == "Fine.", result.error


@pytest.mark.parametrize("role", [None, "model"], ids=["no-role", "model"])
def test_a_reply_message_without_the_assistant_role_is_the_assistants(
    server: ModelServer, role: str | None,
) -> None:
    """A compatible server that leaves the reply's role out, or names it its own way: a
    choice's message is the assistant's turn whatever it says."""
    reply: dict[str, Any] = {"content": "Fine."}
    if role is not None:
        reply["role"] = role
    server.add(Raw(body=completion(reply)))
    result, _ = ask(provider(server, "openai"), False)
    assert result.ok and result.output == "Fine.", result.error


def test_a_spent_quota_is_not_asked_again_and_a_fallback_moves_on(server: ModelServer) -> None:
    """OpenAI's 429 ``insufficient_quota``: the account's credit is spent, so retrying with
    backoff only waits; it is still transient to a `FallbackLLM`, whose next model answers."""
    from jianmu import FallbackLLM

    spent = {"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota",
                       "code": "insufficient_quota", "param": None}}
    before = len(server.requests)
    server.add(Raw(status=429, body=spent), "Sunny.")
    primary = OpenAIProvider("m", base_url=server.openai_url, max_retries=3, retry_backoff=0.01)
    backup = OpenAIProvider("backup", base_url=server.openai_url, max_retries=0)
    result, _ = ask(FallbackLLM([primary, backup]), False)
    assert result.ok and result.output == "Sunny.", result.error
    asked = [r.body["model"] for r in server.requests[before:]]
    assert asked == ["m", "backup"]  # m asked once

    server.add(Raw(status=429, body=spent), "never asked")
    alone, _ = ask(primary, False)
    assert isinstance(alone.exception, LLMTransientError), alone.error
    assert "out of quota" in str(alone.exception) and "HTTP 429" in str(alone.exception)
    assert len(server.requests) == before + 3
