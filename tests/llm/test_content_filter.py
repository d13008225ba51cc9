"""A reply a content filter stopped before it said anything (OpenAI ``finish_reason:
"content_filter"`` with no text and no call; Anthropic ``stop_reason: "refusal"`` with no text),
streamed or not, on a real keep-alive server: the run fails with `ContentFilterError` instead
of ending SUCCESS with an empty answer, and the model is not asked again (a filter would stop
the same request again). A filtered reply that still holds text is the answer; one that holds
tool calls never runs the call it was stopped in."""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import Any

import pytest

from jianmu import Agent, ContentFilterError, LLMError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.tools import tool
from tests.support.raw_http import (
    SSE,
    USAGE,
    RawServer,
    Recorded,
    Reply,
    anthropic_sse,
    chunk,
    completion,
    json_reply,
    message,
    openai_sse,
)

ANTHROPIC_USAGE = {"input_tokens": 10, "output_tokens": 0}


def _openai(text: str) -> Any:
    def answer(request: Recorded) -> Reply:
        if not request.body.get("stream"):
            return json_reply(completion(text, finish="content_filter", usage=USAGE))
        said = [chunk({"content": text})] if text else []
        return Reply(pieces=openai_sse([chunk({"role": "assistant"}), *said,
                                        chunk(finish="content_filter", usage=USAGE)]),
                     chunked=True, headers=SSE)
    return answer


def _anthropic(text: str) -> Any:
    content = [{"type": "text", "text": text}] if text else []

    def answer(request: Recorded) -> Reply:
        if not request.body.get("stream"):
            return json_reply(message(content, stop="refusal", usage=ANTHROPIC_USAGE))
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": message([], stop="", usage=ANTHROPIC_USAGE)}]
        if text:
            events += [
                {"type": "content_block_start", "index": 0,
                 "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "text_delta", "text": text}},
                {"type": "content_block_stop", "index": 0},
            ]
        events += [{"type": "message_delta", "delta": {"stop_reason": "refusal"},
                    "usage": {"output_tokens": 0}},
                   {"type": "message_stop"}]
        return Reply(pieces=anthropic_sse(events), chunked=True, headers=SSE)
    return answer


def _llm(api: str, url: str) -> Any:
    if api == "openai":
        return OpenAIProvider("m", base_url=url + "/v1", max_retries=2)
    return AnthropicProvider("claude", base_url=url, max_retries=2)


APIS = [("openai", _openai), ("anthropic", _anthropic)]


@pytest.mark.parametrize(("api", "reply"), APIS, ids=[a for a, _ in APIS])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("text", ["", " \n"], ids=["empty", "whitespace"])
def test_a_reply_filtered_before_it_said_anything_fails_the_run(
    api: str, reply: Any, stream: bool, text: str,
) -> None:
    with RawServer(reply(text)) as server:
        agent = Agent(_llm(api, server.url), stream=stream)
        result = agent.run_sync("something a filter stops")
        again = agent.run_sync("and again", history=result.messages)  # a later turn: the same
    for ended in (result, again):
        assert not ended.ok and ended.output is None
        assert isinstance(ended.exception, ContentFilterError), ended.error
        assert isinstance(ended.exception, LLMError)
        assert ended.exception.finish_reason == "content_filter"
        assert "content filter" in str(ended.exception)
    assert len(server.requests) == 2  # one per run: a filtered request is not asked again
    # no empty assistant turn joins the conversation (Anthropic refuses an empty text block)
    assert [m.role for m in result.messages] == ["user"]
    with pytest.raises(ContentFilterError):
        result.raise_for_status()


@pytest.mark.parametrize(("api", "reply"), APIS, ids=[a for a, _ in APIS])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_filtered_reply_that_holds_text_is_the_answer(
    api: str, reply: Any, stream: bool,
) -> None:
    with RawServer(reply("I can't help with that.")) as server:
        result = Agent(_llm(api, server.url), stream=stream).run_sync("something")
    assert result.ok, result.error
    assert result.output == "I can't help with that."


def test_a_typed_agent_spends_no_output_retry_on_a_filtered_reply() -> None:
    with RawServer(_openai("")) as server:
        result = Agent(_llm("openai", server.url), output_type=int, output_retries=3
                       ).run_sync("a number")
    assert isinstance(result.exception, ContentFilterError), result.error
    assert len(server.requests) == 1


def test_the_error_keeps_its_fields_when_pickled() -> None:
    error = ContentFilterError("stopped", "content_filter", "gpt")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.finish_reason, copy.model) == ("stopped", "content_filter", "gpt")


def _calls_then_answer(api: str) -> Any:
    """A reply a filter stopped after a whole call and while it wrote a second (both with
    arguments that parse), then, asked again, an answer."""
    args = [{"path": "a.txt"}, {"path": "b.txt"}]

    def answer(request: Recorded) -> Reply:
        if len(request.body["messages"]) > 1:  # the turn after the filtered one
            return (_openai("done.") if api == "openai" else _anthropic("done."))(request)
        if api == "openai":
            calls = [{"id": f"c{i}", "type": "function",
                      "function": {"name": "read", "arguments": json.dumps(a)}}
                     for i, a in enumerate(args)]
            if not request.body.get("stream"):
                return json_reply(completion(None, tool_calls=calls, finish="content_filter",
                                             usage=USAGE))
            return Reply(pieces=openai_sse([
                chunk({"role": "assistant", "tool_calls": [{"index": i, **c}]})
                for i, c in enumerate(calls)] + [chunk(finish="content_filter", usage=USAGE)]),
                chunked=True, headers=SSE)
        blocks = [{"type": "tool_use", "id": f"toolu_{i}", "name": "read", "input": a}
                  for i, a in enumerate(args)]
        if not request.body.get("stream"):
            return json_reply(message(blocks, stop="refusal", usage=ANTHROPIC_USAGE))
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": message([], stop="", usage=ANTHROPIC_USAGE)}]
        for i, block in enumerate(blocks):
            events += [
                {"type": "content_block_start", "index": i,
                 "content_block": {**block, "input": {}}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "input_json_delta", "partial_json": json.dumps(args[i])}},
                {"type": "content_block_stop", "index": i}]
        events += [{"type": "message_delta", "delta": {"stop_reason": "refusal"},
                    "usage": {"output_tokens": 3}}, {"type": "message_stop"}]
        return Reply(pieces=anthropic_sse(events), chunked=True, headers=SSE)
    return answer


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_call_a_filter_stopped_never_runs_and_the_model_is_told_why(
    api: str, stream: bool,
) -> None:
    ran: list[str] = []

    @tool
    def read(path: str) -> str:
        """Read a file.

        Args:
            path: the file.
        """
        ran.append(path)
        return f"contents of {path}"

    with RawServer(_calls_then_answer(api)) as server:
        agent = Agent(_llm(api, server.url), tools=[read], stream=stream)

        async def run() -> list[Any]:
            return [event async for event in agent.stream("read both", timeout=30)]

        events = asyncio.run(run())
    result = events[-1].fields["result"]
    assert result.ok, result.error
    assert result.output == "done."
    assert ran == ["a.txt"]  # the call written whole before the filter stopped the reply
    refused, read_a = sorted(m.content for m in result.messages if m.role == "tool")
    assert read_a == "contents of a.txt"
    assert refused.startswith("Error: not run") and "content filter" in refused
    (cut,) = [e for e in events if e.name == "llm.call.cut_off"]
    assert cut.fields["finish_reason"] == "content_filter"
    assert cut.fields["tool_calls"] == ["read"]
