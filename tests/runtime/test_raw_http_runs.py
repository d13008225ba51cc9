"""ReAct runs against a real keep-alive HTTP model server (`tests.support.raw_http`): the history
each turn sends, one connection for every turn, `run_sync` again and again (after `send`,
`approve`, `reject`, `restore`), many runs sequential and concurrent, usage left unknown."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, ToolSet, create_react_node, tool
from jianmu.errors import RunClaimedError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.runtime.checkpoint import SQLiteCheckpointer
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

KEEPALIVE_EXPIRY_S = 5.0
"""How long httpx (the SDKs' client) keeps an idle connection by default."""


@tool(category="write", permission="user_confirm")
def book(city: str) -> str:
    """Book a trip (asks a person first).

    Args:
        city: Where to go.
    """
    return f"booked {city}"


@pytest.fixture(autouse=True)
def no_lost_task_errors(caplog: pytest.LogCaptureFixture) -> Any:
    """No run leaves a task whose exception nobody retrieved, nor a closed loop used."""
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        yield
    said = [r.getMessage() for r in caplog.records]
    assert not [s for s in said if "never retrieved" in s or "Event loop is closed" in s]


def _openai_turn(request: Recorded) -> Reply:
    """Two parallel calls (the second's arguments a JSON object) for a user's message, pieces
    of them interleaved when streamed; the answer names the results after them."""
    messages = request.body["messages"]
    last = messages[-1]
    turn = len(messages)
    if last["role"] == "user":
        calls = [("a", "calculator", {"expression": f"{turn}*2"}),
                 ("b", "book", {"city": "Oslo"})]
        if not request.body.get("stream"):
            return json_reply(completion(None, usage=USAGE, tool_calls=[
                {"id": f"{n}{turn}", "type": "function", "function": {
                    "name": name, "arguments": json.dumps(args) if n == "a" else args}}
                for n, name, args in calls]))
        pieces: list[dict[str, Any]] = [chunk({"role": "assistant", "tool_calls": [
            {"index": i, "id": f"{n}{turn}", "type": "function",
             "function": {"name": name, "arguments": ""}}]}) for i, (n, name, _) in
            enumerate(calls)]
        for i, (_, _, args) in enumerate(calls):
            text = json.dumps(args)
            pieces += [chunk({"tool_calls": [{"index": i, "function": {
                "arguments": text[k:k + 5]}}]}) for k in range(0, len(text), 5)]
        pieces += [chunk(finish="tool_calls"), chunk(choices=False, usage=USAGE)]
        return Reply(pieces=openai_sse(pieces, space=False, crlf=True), chunked=True,
                     headers=SSE)
    results = [m["content"] for m in messages if m["role"] == "tool"][-2:]
    answer = f"done: {' / '.join(results)}"
    if not request.body.get("stream"):
        return json_reply(completion(answer), gzip=True)  # and no usage
    return Reply(pieces=openai_sse([chunk({"content": answer[:7]}), chunk({"content": answer[7:]}),
                                    chunk(finish="stop")], keepalive=True),
                 chunked=True, headers=SSE)


def _anthropic_turn(request: Recorded) -> Reply:
    messages = request.body["messages"]
    content = messages[-1]["content"]
    turn = len(messages)
    if isinstance(content, str):
        blocks: list[dict[str, Any]] = [
            {"type": "thinking", "thinking": "plan", "signature": "S"},
            {"type": "tool_use", "id": f"a{turn}", "name": "calculator",
             "input": {"expression": f"{turn}*2"}},
            {"type": "tool_use", "id": f"b{turn}", "name": "book", "input": {"city": "Oslo"}}]
        stop = "tool_use"
    else:
        results = [b["content"] for b in content if b.get("type") == "tool_result"]
        blocks, stop = [{"type": "text", "text": f"done: {' / '.join(results)}"}], "end_turn"
    if not request.body.get("stream"):
        return json_reply(message(blocks, stop=stop, usage={"input_tokens": 3,
                                                            "output_tokens": 4}))
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        **message([], usage={"input_tokens": 3, "output_tokens": 1}), "stop_reason": None}}]
    for i, block in enumerate(blocks):
        if block["type"] == "tool_use":
            events.append({"type": "content_block_start", "index": i,
                           "content_block": {**block, "input": {}}})
            text = json.dumps(block["input"])
            events += [{"type": "content_block_delta", "index": i, "delta": {
                "type": "input_json_delta", "partial_json": text[k:k + 5]}}
                for k in range(0, len(text), 5)]
        elif block["type"] == "thinking":
            events += [
                {"type": "content_block_start", "index": i,
                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "thinking_delta", "thinking": block["thinking"]}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "signature_delta", "signature": block["signature"]}}]
        else:
            events += [
                {"type": "content_block_start", "index": i,
                 "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": i,
                 "delta": {"type": "text_delta", "text": block["text"]}}]
        events.append({"type": "content_block_stop", "index": i})
    events += [{"type": "message_delta", "delta": {"stop_reason": stop},
                "usage": {"output_tokens": 9}}, {"type": "message_stop"}]
    return Reply(pieces=anthropic_sse(events, ping=True), chunked=True, headers=SSE)


def _provider(server: RawServer, anthropic: bool) -> OpenAIProvider | AnthropicProvider:
    if anthropic:
        return AnthropicProvider("claude", base_url=server.url, max_retries=0)
    return OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0)


def _runner(llm: Any, prompt: str, *, stream: bool, **options: Any) -> ReactiveRunner:
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": prompt}]})
    agent = create_react_node(llm, [*ToolSet.resolve(["calculator"]), book], stream=stream)
    return ReactiveRunner(agent, state, **options)


def _openai_history(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Each message as (role, text or its calls' ids and names, its call's id)."""
    return [(m["role"], m.get("content") if not m.get("tool_calls") else
             [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
              for c in m["tool_calls"]], m.get("tool_call_id")) for m in body["messages"]]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_turns_send_the_history_once_on_one_connection(stream: bool) -> None:
    with RawServer(_openai_turn) as server:
        runner = _runner(_provider(server, False), "go", stream=stream)
        first = runner.run_sync()
        (request,) = first.pending
        runner.approve(request.id)
        assert runner.run_sync().ok
        runner.send("again")
        (request,) = runner.run_sync().pending
        runner.reject(request.id)
        assert runner.run_sync().ok
        asked = len(server.requests)
        assert runner.run_sync().ok  # a finished run, run again: the model is not asked
        assert len(server.requests) == asked == 4
        assert server.connections == 1
    oslo = {"city": "Oslo"}
    turn_one = [("user", "go", None),
                ("assistant", [("a1", "calculator", {"expression": "1*2"}), ("b1", "book", oslo)],
                 None),
                ("tool", "2", "a1"), ("tool", "booked Oslo", "b1")]
    bodies = server.bodies()
    assert _openai_history(bodies[0]) == turn_one[:1]
    assert _openai_history(bodies[1]) == turn_one
    assert _openai_history(bodies[2]) == [
        *turn_one, ("assistant", "done: 2 / booked Oslo", None), ("user", "again", None)]
    *_, calls, calc, denied = _openai_history(bodies[3])
    assert calls[1] == [("a6", "calculator", {"expression": "6*2"}), ("b6", "book", oslo)]
    assert calc == ("tool", "12", "a6")
    assert denied[0] == "tool" and denied[2] == "b6" and "denied" in denied[1]
    assert all(b.get("stream", False) is stream for b in bodies)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_turns_send_thinking_and_results_back_on_one_connection(
        stream: bool) -> None:
    with RawServer(_anthropic_turn) as server:
        runner = _runner(_provider(server, True), "go", stream=stream)
        (request,) = runner.run_sync().pending
        runner.approve(request.id)
        assert runner.run_sync().ok
        assert runner.state.get("final_answer") == "done: 2 / booked Oslo"
        runner.send("again")
        (request,) = runner.run_sync().pending
        assert server.connections == 1
    turns = server.bodies()[-1]["messages"]
    assert [m["role"] for m in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert turns[1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "S"},
        {"type": "tool_use", "id": "a1", "name": "calculator", "input": {"expression": "1*2"}},
        {"type": "tool_use", "id": "b1", "name": "book", "input": {"city": "Oslo"}}]
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a1", "content": "2"},
        {"type": "tool_result", "tool_use_id": "b1", "content": "booked Oslo"}]


def test_run_sync_after_restore_and_in_another_loop_and_thread(tmp_path: Path) -> None:
    with RawServer(_openai_turn) as server, SQLiteCheckpointer(tmp_path / "runs.db") as store:
        llm = _provider(server, False)
        runner = _runner(llm, "go", stream=True, checkpointer=store)
        (request,) = runner.run_sync().pending

        def restored() -> ReactiveRunner:
            agent = create_react_node(llm, [*ToolSet.resolve(["calculator"]), book], stream=True)
            return ReactiveRunner.restore(agent, store, runner.run_id,
                                          state_manager=StateManager(AgentState))

        again = restored()
        again.approve(request.id)
        assert again.run_sync().ok
        asked = len(server.requests)
        assert restored().run_sync().ok  # finished, as the checkpoint says: not asked again
        assert len(server.requests) == asked

        async def in_a_new_loop() -> str:
            later = restored()
            later.send("and now?")
            (waiting,) = (await later.run()).pending
            later.approve(waiting.id)
            assert (await later.run()).ok
            return str(later.state.get("final_answer"))

        assert asyncio.run(in_a_new_loop()) == "done: 12 / booked Oslo"
        answers: list[Any] = []

        def in_a_thread() -> None:
            later = restored()
            later.send("once more")
            (waiting,) = later.run_sync().pending
            later.approve(waiting.id)
            answers.append(later.run_sync().ok and later.state.get("final_answer"))

        thread = threading.Thread(target=in_a_thread)
        thread.start()
        thread.join(60)
        assert answers == ["done: 22 / booked Oslo"]
        with pytest.raises(RunClaimedError):  # the first runner: the run went on elsewhere
            runner.run_sync()


def _answers(request: Recorded) -> Reply:
    messages = request.body["messages"]
    said = f"{messages[0]['content']} -> {messages[-1]['content']}"
    if request.body.get("stream"):
        return Reply(pieces=openai_sse([chunk({"content": said}), chunk(finish="stop")]),
                     chunked=True, headers=SSE)
    return json_reply(completion(said))


def _fds() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_fifty_sequential_runs_share_one_connection_and_leak_nothing(stream: bool) -> None:
    arrived: list[float] = []

    def answers(request: Recorded) -> Reply:
        arrived.append(time.monotonic())
        return _answers(request)

    with RawServer(answers) as server:
        runner = _runner(_provider(server, False), "start", stream=stream)
        assert runner.run_sync().ok
        fds, threads = _fds(), threading.active_count()
        for n in range(50):
            runner.send(f"q{n}")
            assert runner.run_sync().ok
        assert runner.state.get("final_answer") == "start -> q49"
        assert _fds() < fds + 5 and threading.active_count() <= threads
        assert len(server.requests) == 51 and server.open_connections <= 1
        # one connection, unless a machine too busy to turn within the client's keep-alive
        # expiry (httpx's 5 s) let it lapse between two turns: a new one then, rightly
        lapsed = sum(later - earlier >= KEEPALIVE_EXPIRY_S
                     for earlier, later in itertools.pairwise(arrived))
        assert 1 <= server.connections <= 1 + lapsed


def test_idle_connections_the_server_closed_between_turns() -> None:
    with RawServer(_answers) as server:
        runner = _runner(_provider(server, False), "start", stream=True)
        assert runner.run_sync().ok
        for n in range(4):
            # the server's keep-alive timeout, while no loop runs (between two run_sync)
            assert server.close_idle(reset=n % 2 == 1) == 1
            runner.send(f"q{n}")
            assert runner.run_sync().ok
        assert runner.state.get("final_answer") == "start -> q3"
        assert len(server.requests) == 5


def test_twenty_concurrent_runs_each_get_their_own_answer() -> None:
    with RawServer(_answers) as server:
        llm = _provider(server, False)

        async def one(n: int) -> tuple[Any, list[str]]:
            runner = _runner(llm, f"p{n}", stream=True)
            names = [event.name async for event in runner.stream()]
            return runner.state.get("final_answer"), names

        async def all_at_once() -> list[tuple[Any, list[str]]]:
            try:
                return await asyncio.gather(*(one(n) for n in range(20)))
            finally:
                await llm.close()

        results = asyncio.run(all_at_once())
    assert [answer for answer, _ in results] == [f"p{n} -> p{n}" for n in range(20)]
    # no usage in these replies: unknown, and said so (not counted as 0)
    assert all(names.count("llm.usage_unknown") == 1 for _, names in results)
    assert len(server.requests) == 20


def test_a_reply_without_usage_is_said_unknown_not_zero() -> None:
    with RawServer(_answers) as server:
        runner = _runner(_provider(server, False), "start", stream=False)
        seen: list[dict[str, Any]] = []
        runner.ctx.events.subscribe("llm.usage_unknown",
                                    lambda event: seen.append(event.fields))
        result = runner.run_sync()
    assert result.ok and len(seen) == 1
    assert result.usage is not None and result.usage.output_tokens > 0



def test_threads_that_ran_run_sync_leave_no_thread_listed_once_they_end() -> None:
    # each thread's loop is shut down from its end, when `threading` has forgotten the thread;
    # joining its DNS executor with Thread.join there registered a phantom _DummyThread, so
    # threading.enumerate() listed one more "thread" for every thread that ever ran run_sync()
    with RawServer(_answers) as server:
        llm = _provider(server, False)
        listed = {thread.ident for thread in threading.enumerate()}
        answers: list[Any] = []

        def work(n: int) -> None:
            runner = _runner(llm, f"t{n}", stream=n % 2 == 1)
            assert runner.run_sync().ok
            answers.append(runner.state.get("final_answer"))

        for turn in range(2):
            workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(60)
            assert {thread.ident for thread in threading.enumerate()} == listed, turn
    assert sorted(answers) == sorted(f"t{n} -> t{n}" for n in range(4) for _ in range(2))
