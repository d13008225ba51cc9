"""Real providers on a real keep-alive server, across turns: several ``run_sync()`` calls on
one runner (after send, approve and restore), many runs sharing one provider, concurrent runs
in one loop, replies without usage and tool-call arguments sent as JSON objects."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, StateManager, create_react_node, tool
from jianmu.llm import AnthropicProvider, OpenAIProvider, Usage
from jianmu.llm.provider import SDKProvider
from jianmu.runtime import RunStatus, SQLiteCheckpointer
from tests.support.model_server import MODES, ModelServer, Request, Turn

APIS = ["openai", "anthropic"]
_NOISE = ("Event loop is closed", "Task exception was never retrieved", "Unclosed", "unclosed")


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def provider(server: ModelServer, api: str) -> SDKProvider:
    if api == "openai":
        return OpenAIProvider("test-model", base_url=server.openai_url, max_retries=2,
                              retry_backoff=0)
    return AnthropicProvider("test-model", base_url=server.anthropic_url, max_retries=2)


deployed: list[str] = []


@tool(category="write", permission="user_confirm")
def deploy(service: str) -> str:
    """Deploy a service (asks a person first).

    Args:
        service: The service's name.
    """
    deployed.append(service)
    return f"{service} deployed"


def agent(llm: SDKProvider, stream: bool) -> Any:
    return create_react_node(llm, [deploy], stream=stream)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_turns_on_one_runner_after_approve_send_and_restore(
    server: ModelServer, api: str, stream: bool, tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    deployed.clear()
    server.add(
        Turn(calls=[{"name": "deploy", "arguments": {"service": "api"}}], usage=(20, 4)),
        Turn(text="Deployed api.", usage=(30, 5)),
        Turn(text="Hello again.", usage=(40, 6)),
        Turn(text="Still here.", usage=(50, 7)),
    )
    llm = provider(server, api)
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "deploy api"}]})
    runner = ReactiveRunner(agent(llm, stream), state, checkpointer=checkpointer)

    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED, first.error
    runner.approve(first.pending[0].id)
    second = runner.run_sync(timeout=30)
    assert second.ok, second.error
    assert deployed == ["api"] and state.get("final_answer") == "Deployed api."

    runner.send("Are you there?")
    third = runner.run_sync(timeout=30)
    assert third.ok, third.error
    assert state.get("final_answer") == "Hello again."

    restored_state = StateManager(AgentState)
    restored = ReactiveRunner.restore(agent(llm, stream), checkpointer, runner.run_id,
                                      state_manager=restored_state)
    restored.send("Still?")
    fourth = restored.run_sync(timeout=30)
    assert fourth.ok, fourth.error
    assert restored_state.get("final_answer") == "Still here."

    # every request was sent once (none re-sent by a retry), each reply's usage kept
    assert len(server.requests) == 4 and not server.problems
    assert all(r.stream is stream and r.api == api for r in server.requests)
    assert restored_state.get("usage") == Usage(input_tokens=140, output_tokens=22, requests=4,
                                                tool_calls=1)
    # one kept-alive connection carried every turn: the loop outlived each run_sync()
    assert len(server.connections) == 1
    err = capfd.readouterr().err
    assert not [noise for noise in _NOISE if noise in err], err


def _fds(server: ModelServer) -> int:
    """This process's open descriptors, less the server's own sockets (its thread closes a
    connection the client closed in its own time)."""
    served = set()
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == server.port:
            served.add(f"socket:[{fields[9]}]")
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used
            continue
        count += target not in served
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
@pytest.mark.parametrize(("api", "stream"), MODES)
def test_fifty_runs_sharing_a_provider_keep_fds_and_threads_flat(
    server: ModelServer, api: str, stream: bool, capfd: pytest.CaptureFixture[str],
) -> None:
    server.add(lambda request: Turn(text=f"re: {request.last_user_text}"))
    llm = provider(server, api)

    def one(index: int, *, fresh_loop: bool) -> None:
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": f"q{index}"}]})
        runner = ReactiveRunner(agent(llm, stream), state)
        # run_sync() on the thread's kept loop, or a loop of its own that asyncio.run closes
        result = asyncio.run(runner.run(timeout=30)) if fresh_loop else runner.run_sync(
            timeout=30)
        assert result.ok, result.error
        assert state.get("final_answer") == f"re: q{index}"

    # what earlier tests left for the collector is not this test's: a provider collected
    # has its client closed on its loop's next turn (the warm-up's), no later
    gc.collect()
    for index in range(4):  # warm up: the kept loop, its client, the worker threads
        one(index, fresh_loop=index % 2 == 1)
    gc.collect()
    fds, threads = _fds(server), threading.active_count()
    for index in range(50):
        one(index, fresh_loop=index % 2 == 1)
    # none more; one fewer when something an earlier test of this worker left goes meanwhile
    # (a client collected is closed on a later loop turn)
    assert _fds(server) <= fds
    assert threading.active_count() <= threads
    assert len(server.requests) == 54
    err = capfd.readouterr().err
    assert not [noise for noise in _NOISE if noise in err], err


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_twenty_concurrent_runs_in_one_loop_get_their_own_answers(
    server: ModelServer, api: str, stream: bool,
) -> None:
    server.add(lambda request: Turn(text=f"answer to {request.last_user_text}"))
    llm = provider(server, api)

    async def main() -> list[str]:
        states = [
            StateManager(AgentState, {"messages": [{"role": "user", "content": f"q{i}"}]})
            for i in range(20)
        ]
        runners = [ReactiveRunner(agent(llm, stream), s) for s in states]
        results = await asyncio.gather(*(r.run(timeout=30) for r in runners))
        assert all(r.ok for r in results), [r.error for r in results]
        return [s.get("final_answer") for s in states]

    assert asyncio.run(main()) == [f"answer to q{i}" for i in range(20)]
    assert len(server.requests) == 20


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_reply_without_usage_leaves_it_unknown_and_says_so(
    server: ModelServer, api: str, stream: bool,
) -> None:
    server.add(Turn(text="No usage here.", usage=None), Turn(text="Nor here.", usage=None))
    llm = provider(server, api)

    async def ask() -> Any:
        messages = [{"role": "user", "content": "hi"}]
        if stream:
            return [e async for e in llm.stream(messages)][-1].response
        return await llm.complete(messages)

    assert asyncio.run(ask()).usage is None  # unknown, not 0

    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    runner = ReactiveRunner(agent(llm, stream), state)
    unknown: list[Any] = []
    runner.ctx.events.subscribe("llm.usage_unknown", unknown.append)
    assert runner.run_sync(timeout=30).ok
    assert [e.fields["model"] for e in unknown] == ["test-model"]
    # the run counts an estimate, so a token budget still holds
    usage = state.get("usage")
    assert usage.input_tokens == unknown[0].fields["estimated_input_tokens"] > 0
    assert usage.output_tokens == unknown[0].fields["estimated_output_tokens"] > 0


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_tool_call_arguments_sent_as_a_json_object(server: ModelServer, stream: bool) -> None:
    deployed.clear()
    server.add(
        Turn(calls=[{"name": "deploy", "arguments": {"service": "web"}}], object_arguments=True),
        "Done.",
    )
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "deploy web"}]})
    runner = ReactiveRunner(agent(provider(server, "openai"), stream), state)
    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED, first.error
    assert first.pending[0].payload["arguments"] == {"service": "web"}
    runner.approve(first.pending[0].id)
    assert runner.run_sync(timeout=30).ok
    assert deployed == ["web"] and state.get("final_answer") == "Done."
    sent = server.requests[1].body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"service": "web"}'  # sent back to the server as the string it expects


def test_the_server_records_connections_and_requests(server: ModelServer) -> None:
    server.add("one", "two")
    llm = provider(server, "openai")

    async def twice() -> list[str]:
        first = await llm.complete([{"role": "user", "content": "a"}])
        second = await llm.complete([{"role": "user", "content": "b"}])
        return [first.text, second.text]

    assert asyncio.run(twice()) == ["one", "two"]
    assert [r.last_user_text for r in server.requests] == ["a", "b"]
    assert len(server.connections) == 1  # kept alive between the two
    assert isinstance(server.requests[0], Request)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_runs_on_a_loop_of_its_own(server: ModelServer) -> None:
    server.add("Parent.", "Child.", "Parent again.")
    llm = provider(server, "openai")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    runner = ReactiveRunner(agent(llm, False), state)
    assert runner.run_sync(timeout=30).ok
    pid = os.fork()
    if pid == 0:  # the child: the parent's loop and connection are never touched here
        code = 1
        try:
            runner.send("child")
            code = 0 if runner.run_sync(timeout=30).ok else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    runner.send("parent")
    assert runner.run_sync(timeout=30).ok
    assert [state.get("final_answer")] == ["Parent again."]
    assert [r.last_user_text for r in server.requests] == ["hi", "child", "parent"]
    # the parent kept its connection; the child opened its own
    assert server.requests[0].connection == server.requests[2].connection
    assert server.requests[1].connection != server.requests[0].connection


@tool
def list_files() -> str:
    """The names in the working folder."""
    return "report.txt\nbad-\udcff-name.txt"  # a name that is not UTF-8, as os.listdir gives it


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_text_utf8_cannot_carry_reaches_the_server_as_replacement_characters(
    server: ModelServer, api: str, stream: bool,
) -> None:
    # the SDK refused to encode every later request: the run failed on its next turn
    server.add(Turn(calls=[{"name": "list_files", "arguments": {}}]), "Two files.")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "files?"}]})
    runner = ReactiveRunner(create_react_node(provider(server, api), [list_files],
                                              stream=stream), state)
    result = runner.run_sync(timeout=30)
    assert result.ok, result.error
    assert state.get("final_answer") == "Two files."
    assert "bad-\ufffd-name.txt" in str(server.requests[1].body)
    tool_message = next(m for m in state.get("messages") if m.role == "tool")
    assert "\udcff" in (tool_message.content or "")  # the run's own record keeps what came
