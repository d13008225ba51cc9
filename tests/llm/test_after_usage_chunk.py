"""An OpenAI stream whose body is held open after its usage chunk (``choices: []``, the last
chunk of a reply, only ``data: [DONE]`` after it) with no ``[DONE]``, on the raw keep-alive
server: the reply is whole, and the turn no longer waits for the body's end (it waited for the
read timeout; here the agent node's timeout failed it). A stream that ends as usual keeps its
connection."""

from __future__ import annotations

import threading

from jianmu import AgentState, ReactiveRunner, StateManager, create_react_node
from jianmu.llm import OpenAIProvider
from tests.support.raw_http import SSE, USAGE, RawServer, Reply, chunk, openai_sse


def _reply(text: str, *, done: bool = True) -> list[bytes]:
    return openai_sse([chunk({"role": "assistant", "content": text}), chunk(finish="stop"),
                       chunk(choices=False, usage=USAGE)], done=done)


def _turns(first: Reply) -> tuple[list[str], list[object], RawServer]:
    """Two streamed turns on one runner, the first answered by ``first``."""
    replies = iter([first, Reply(pieces=_reply("second"), chunked=True, headers=SSE)])
    with RawServer(lambda request: next(replies)) as server:
        llm = OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0, timeout=60)
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        runner = ReactiveRunner(create_react_node(llm, [], stream=True, llm_timeout=10), state)
        answers, usages = [], []
        for turn in range(2):
            if turn:
                runner.send("again")
            result = runner.run_sync(timeout=60)
            assert result.ok, result.error
            answers.append(state.get("final_answer"))
            usages.append(result.usage)
            if first.hold is not None:
                first.hold.set()
    return answers, usages, server


def test_a_body_held_open_after_the_usage_chunk_is_not_waited_on() -> None:
    held = Reply(pieces=[b"".join(_reply("第一 🎉", done=False)), b": still here\n\n"],
                 chunked=True, headers=SSE, hold=threading.Event())
    answers, usages, server = _turns(held)
    assert answers == ["第一 🎉", "second"]
    first = usages[0]
    assert first is not None and first.input_tokens == 3 and first.output_tokens == 4
    assert len(server.requests) == 2 and server.errors == []


def test_a_stream_that_ends_as_usual_keeps_its_connection() -> None:
    answers, _, server = _turns(Reply(pieces=_reply("first"), chunked=True, headers=SSE))
    assert answers == ["first", "second"]
    assert server.connections == 1
