"""A reader that leaves a stream (a plain ``break``) while the model's HTTP answer is still
coming, fifty times over, on a real keep-alive server: each answer's connection is closed (the
server sees it go, none is left open), the process holds no more file descriptors, tasks or
warnings than before, and the provider still answers after."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import warnings
from typing import Any

import pytest

from jianmu import Agent, AgentState, ReactiveRunner, StateManager, create_react_node
from jianmu.llm import AnthropicProvider, OpenAIProvider
from tests.support.raw_http import (
    SSE,
    RawServer,
    Recorded,
    Reply,
    anthropic_sse,
    chunk,
    message,
    openai_sse,
)

pytestmark = pytest.mark.timeout(120)

_WORDS = [f" word{i}" for i in range(40)]


def _answer(api: str) -> list[bytes]:
    """An answer of many deltas, the first alone in the first piece."""
    if api == "openai":
        pieces = openai_sse([chunk({"role": "assistant", "content": "Once"}),
                             *(chunk({"content": w}) for w in _WORDS), chunk(finish="stop")])
        return pieces
    start = {**message([], usage={"input_tokens": 3, "output_tokens": 1}), "stop_reason": None}
    pieces = anthropic_sse([
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": 0,
           "delta": {"type": "text_delta", "text": t}} for t in ["Once", *_WORDS]),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 41}},
        {"type": "message_stop"},
    ])
    return [b"".join(pieces[:3]), *pieces[3:]]


class _Watched(RawServer):
    """The raw server, saying when each connection it served is gone."""

    def __init__(self, api: str) -> None:
        super().__init__(self._reply)
        self.api = api
        self.gone = threading.Semaphore(0)
        self.holds: list[threading.Event] = []
        self.whole = False  # answer at once, not held after the first piece

    def _reply(self, request: Recorded) -> Reply:
        hold = threading.Event()
        if self.whole:
            hold.set()
        self.holds.append(hold)
        return Reply(pieces=_answer(self.api), chunked=True, headers=SSE, hold=hold)

    async def _serve(self, reader: Any, writer: Any) -> None:
        try:
            await super()._serve(reader, writer)
        finally:
            self.gone.release()


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("through", ["agent", "runner"])
def test_fifty_breaks_mid_answer_close_each_connection_and_leak_nothing(
    api: str, through: str
) -> None:
    with _Watched(api) as server:
        if api == "openai":
            llm: Any = OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0)
        else:
            llm = AnthropicProvider("m", base_url=server.url, max_retries=0)
        agent = Agent(llm)

        def events() -> Any:
            if through == "agent":
                return agent.stream("Tell me a story.")
            state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Hi."}]})
            return ReactiveRunner(create_react_node(llm, []), state).stream()

        async def main() -> tuple[int, int, list[str], str]:
            loop = asyncio.get_running_loop()
            tasks = asyncio.all_tasks()
            before = 0
            gc.collect()  # what earlier tests left is collected before warnings are recorded
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for n in range(50):
                    if n == 1:  # after the first: the client and its pool are made
                        before = _fds()
                    async for event in events():
                        if event.name == "llm.call.delta":
                            assert event.fields["text"] == "Once"
                            break  # the answer's other 40 deltas are still to come
                    server.holds[-1].set()  # the server may write the rest now
                    # the connection is closed, not kept: the server's read of it ends
                    assert await loop.run_in_executor(None, server.gone.acquire, True, 30)
                # the last generator left is closed by the loop in a task of its own, which
                # ends (the run it stopped with it)
                closing = asyncio.all_tasks() - tasks
                await asyncio.wait_for(asyncio.gather(*closing), 30)
                assert asyncio.all_tasks() == tasks
                gc.collect()
                after = _fds()
                server.whole = True
                last = [e async for e in agent.stream("Go on.")][-1]  # read whole this time
                await llm.close()
            return before, after, [str(w.message) for w in caught], last.fields["result"].output

        before, after, caught, answered = asyncio.run(main())
    assert after <= before and caught == []
    assert answered == "Once" + "".join(_WORDS)
    assert server.connections == 51 and server.errors == []
