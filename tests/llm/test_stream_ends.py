"""Streams that end before the reply does, on the real keep-alive server: an OpenAI stream
with no ``finish_reason``, an Anthropic one with no ``message_stop`` (a proxy's timeout, a
server that lost its worker). The text so far is no whole answer: the run fails clearly, the
request is not sent again (it was answered, and billed), and the next run goes on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, create_react_node
from jianmu.errors import LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import SDKProvider
from jianmu.runtime import RunResult, RunStatus
from tests.support.model_server import ModelServer, Raw


def provider(server: ModelServer, api: str) -> SDKProvider:
    if api == "openai":
        return OpenAIProvider("m", base_url=server.openai_url, max_retries=2, retry_backoff=0)
    return AnthropicProvider("m", base_url=server.anthropic_url, max_retries=2)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _sse(events: list[dict[str, Any]], *, done: bool) -> str:
    """OpenAI's framing, ``data: [DONE]`` at the end or not (some servers leave it out)."""
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + (
        "data: [DONE]\n\n" if done else "")


def _openai(finished: bool) -> list[dict[str, Any]]:
    out = [_chunk({"role": "assistant", "content": ""}), _chunk({"content": "The answer is"}),
           _chunk({"content": " not"})]
    return [*out, _chunk({}, "stop")] if finished else out


def _anthropic(ended: int) -> list[dict[str, Any]]:
    """A message's events, the last ``ended`` of them left out."""
    message = {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": [],
               "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 5, "output_tokens": 1}}
    events = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "The answer is not"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 4}},
        {"type": "message_stop"},
    ]
    return events[: len(events) - ended]


def _run(llm: SDKProvider) -> tuple[RunResult, StateManager]:
    """One streamed agent turn; its result and its state."""
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
    runner = ReactiveRunner(create_react_node(llm, [], stream=True), state)
    return runner.run_sync(timeout=30), state


def _ask(llm: SDKProvider) -> Any:
    async def ask() -> Any:
        events = [e async for e in llm.stream([{"role": "user", "content": "q"}])]
        return events[-1].response

    return asyncio.run(ask())


@pytest.mark.parametrize("done", [True, False], ids=["done", "no-done"])
def test_an_openai_stream_without_a_finish_reason_is_no_answer(
    server: ModelServer, done: bool,
) -> None:
    server.add(Raw(body=_sse(_openai(False), done=done), content_type="text/event-stream"),
               "Back again.")
    llm = provider(server, "openai")
    result, state = _run(llm)
    assert result.status is RunStatus.FAILURE, state.get("final_answer")
    assert isinstance(result.exception, LLMTransientError), result.error
    assert "ended before" in str(result.exception) and "127.0.0.1" in str(result.exception)
    assert len(server.requests) == 1  # answered (and billed): not asked again
    again, state = _run(llm)
    assert again.ok and state.get("final_answer") == "Back again."


def test_an_openai_stream_with_a_finish_reason_but_no_done_is_whole(server: ModelServer) -> None:
    """Some servers leave ``data: [DONE]`` out: the finish reason said the reply was whole."""
    server.add(Raw(body=_sse(_openai(True), done=False), content_type="text/event-stream"))
    response = _ask(provider(server, "openai"))
    assert response.text == "The answer is not" and response.finish_reason == "stop"


@pytest.mark.parametrize("ended", [1, 2, 3], ids=["no-stop", "no-delta", "mid-block"])
def test_an_anthropic_stream_without_message_stop_is_no_answer(
    server: ModelServer, ended: int,
) -> None:
    server.add(Raw(events=_anthropic(ended)), "Back again.")
    llm = provider(server, "anthropic")
    result, state = _run(llm)
    assert result.status is RunStatus.FAILURE, state.get("final_answer")
    assert isinstance(result.exception, LLMTransientError), result.error
    assert "ended before" in str(result.exception) and "127.0.0.1" in str(result.exception)
    assert len(server.requests) == 1
    again, state = _run(llm)
    assert again.ok and state.get("final_answer") == "Back again."


def test_a_whole_anthropic_stream_is_the_answer(server: ModelServer) -> None:
    server.add(Raw(events=_anthropic(0)))
    response = _ask(provider(server, "anthropic"))
    assert response.text == "The answer is not" and response.finish_reason == "stop"


def test_a_whole_reply_whose_connection_broke_after_its_end_is_the_answer(
    server: ModelServer,
) -> None:
    """The end marker came (a finish reason, ``message_stop``), then the connection broke
    before the body's end (a proxy that drops it, the usage chunk lost): the reply is whole,
    not an answer lost and paid for again."""
    finished = [*_openai(True), {**_chunk({}), "choices": [],
                                 "usage": {"prompt_tokens": 5, "completion_tokens": 3}}]
    up_to_the_end = len(_sse(finished[:-1], done=False))  # the usage chunk is lost
    ended = [*_anthropic(0), {"type": "ping"}]
    named = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in ended[:-1])
    server.add(Raw(events=finished, cut=up_to_the_end), Raw(events=ended, cut=len(named)))
    for api in ("openai", "anthropic"):
        llm = provider(server, api)
        result, state = _run(llm)
        assert result.ok, result.error
        assert state.get("final_answer") == "The answer is not"
    assert len(server.requests) == 2


def test_a_stream_that_says_finished_on_every_chunk_and_breaks_is_no_answer(
    server: ModelServer,
) -> None:
    """A proxy that sends a finish reason on every chunk (Open WebUI's, LiteLLM's Gemini
    stream on a call's first chunk), then breaks: more came after that finish reason, so it
    was no end, and the text so far is no answer (it was kept as the run's whole answer)."""
    pieces = [_chunk({"content": word}, "stop") for word in ("The ", "answer ", "is ", "not")]
    up_to_the_third = len(_sse(pieces[:3], done=False))
    server.add(Raw(events=pieces, cut=up_to_the_third))
    result, _ = _run(provider(server, "openai"))
    assert result.status is RunStatus.FAILURE, result
    assert isinstance(result.exception, LLMTransientError), result.error
    assert "broke off" in str(result.exception)
    assert len(server.requests) == 1
