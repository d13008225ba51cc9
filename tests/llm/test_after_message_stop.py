"""An Anthropic stream whose body goes on after ``message_stop`` (a proxy that keeps the stream
open, or sends more before it closes), on the raw keep-alive server. The message is whole at
``message_stop``: the turn no longer waits for the body's end (it waited for the read timeout,
then kept the message), nor fails on what came after it. A body that ends at once keeps its
connection for the next turn."""

from __future__ import annotations

import threading

from jianmu import AgentState, ReactiveRunner, StateManager, create_react_node
from jianmu.llm import AnthropicProvider
from tests.support.raw_http import SSE, RawServer, Reply, anthropic_sse, message


def _message(text: str) -> list[bytes]:
    start = {**message([], usage={"input_tokens": 3, "output_tokens": 1}), "stop_reason": None}
    return anthropic_sse([
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 5}},
        {"type": "message_stop"}])


def _turns(first: Reply, *, llm_timeout: float | None = None) -> tuple[list[str], RawServer]:
    """Two streamed turns on one runner, the first answered by ``first``: the answers."""
    replies = iter([first, Reply(pieces=_message("second"), chunked=True, headers=SSE)])
    with RawServer(lambda request: next(replies)) as server:
        llm = AnthropicProvider("claude", base_url=server.url, max_retries=0, timeout=60)
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        runner = ReactiveRunner(
            create_react_node(llm, [], stream=True, llm_timeout=llm_timeout), state)
        answers = []
        for turn in range(2):
            if turn:
                runner.send("again")
            result = runner.run_sync(timeout=60)
            assert result.ok, result.error
            answers.append(state.get("final_answer"))
            if first.hold is not None:
                first.hold.set()
    return answers, server


def test_a_body_held_open_after_message_stop_is_not_waited_on() -> None:
    """Held open until the turn is over: before, the turn waited for the body's end until
    the read timeout (60 s), and here the agent node's timeout (10 s) failed it."""
    held = Reply(pieces=[b"".join(_message("第一 🎉")), b": still here\n\n"], chunked=True,
                 headers=SSE, hold=threading.Event())
    answers, server = _turns(held, llm_timeout=10)
    assert answers == ["第一 🎉", "second"]
    assert len(server.requests) == 2 and server.errors == []


def test_what_comes_after_message_stop_is_no_part_of_the_message() -> None:
    """An error event after the message's end failed the turn whose message was whole."""
    after = anthropic_sse([{"type": "error",
                            "error": {"type": "overloaded_error", "message": "Overloaded"}}])
    answers, server = _turns(
        Reply(pieces=[*_message("first"), *after], chunked=True, headers=SSE))
    assert answers == ["first", "second"]
    assert len(server.requests) == 2


def test_a_stream_that_ends_at_message_stop_keeps_its_connection() -> None:
    answers, server = _turns(Reply(pieces=_message("first"), chunked=True, headers=SSE))
    assert answers == ["first", "second"]
    assert server.connections == 1
