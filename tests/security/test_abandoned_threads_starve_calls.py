"""A model asking a hung sync tool many times cannot starve the agent's later calls.

Before the fix, eight calls of a sync tool that timed out (a fetch whose server never answers)
were abandoned but kept all eight of the `ToolRunner`'s worker places for as long as their
threads ran: a later instant tool with a timeout never started yet was reported as having run
past it and been abandoned, and one without a timeout hung the run. Now an abandoned call gives
its place back, a call that never started says so, and a process that keeps `MAX_ABANDONED`
abandoned threads refuses the hung tool's new calls instead of making more threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, tool
from jianmu.execution import threads
from jianmu.llm.scripted import ScriptedLLM
from jianmu.nodes import create_react_node

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def _abandoned() -> int:
    return threads._threads("jianmu-tool")._abandoned


@pytest.fixture
def server() -> Iterator[threading.Event]:
    """A server that never answers until the test ends (then the hung threads end too)."""
    answer = threading.Event()
    yield answer
    answer.set()


def _tools(answer: threading.Event, fetched: list[str]) -> list[Any]:
    @tool(timeout=0.05)  # it never answers within it: each call is abandoned
    def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: The address.
        """
        fetched.append(url)
        answer.wait(60)
        return "late"

    @tool(timeout=30)
    def clock() -> str:
        """The time."""
        return "12:00"

    @tool
    def echo(text: str) -> str:
        """Echo the text.

        Args:
            text: The text.
        """
        return text

    return [fetch, clock, echo]


def _fetches(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"f{i}", "name": "fetch", "arguments": {"url": f"http://10.255.255.1/{i}"}}
            for i in range(start, start + n)]


def _answers(state: StateManager) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in state.get("messages") if m.role == "tool"}


async def _threads_end(before: int) -> bool:
    with anyio.move_on_after(60):
        while _abandoned() > before:
            await anyio.sleep(0.01)
        return True
    return False


async def _run(llm: ScriptedLLM, server: threading.Event, fetched: list[str]) -> dict[str, str]:
    """An agent run of ``llm``'s script with the tools to its end: each call's answer."""
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(create_react_node(llm, _tools(server, fetched)), state)
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    return _answers(state)


async def test_eight_hung_calls_leave_the_agents_later_calls_their_threads(
    server: threading.Event,
) -> None:
    fetched: list[str] = []
    before = _abandoned()
    llm = ScriptedLLM([
        _fetches(8),  # all eight worker places, each abandoned at its timeout
        [{"id": "t", "name": "clock", "arguments": {}}],
        [{"id": "e", "name": "echo", "arguments": {"text": "hi"}}],
        "done",
    ])
    answers = await _run(llm, server, fetched)
    assert answers["t"] == "12:00"  # it ran, and is not said to have been abandoned
    assert answers["e"] == "hi"  # no timeout of its own, and no hang either
    assert all("abandoned" in answers[f"f{i}"] for i in range(8))
    assert len(fetched) == 8
    server.set()
    assert await _threads_end(before)


async def test_past_the_cap_the_hung_tool_is_refused_and_the_others_still_run(
    server: threading.Event, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threads, "MAX_ABANDONED", 3)
    fetched: list[str] = []
    before = _abandoned()
    llm = ScriptedLLM([
        _fetches(4),  # running together: each abandoned, one past the cap
        _fetches(1, start=4),  # at the cap: refused before it starts, no fifth thread
        [{"id": "t", "name": "clock", "arguments": {}}],
        "done",
    ])
    answers = await _run(llm, server, fetched)
    assert "'fetch' was not run: 4 earlier call(s) of it still run" in answers["f4"]
    assert answers["t"] == "12:00"
    assert len(fetched) == 4  # the refused call never reached the tool
    assert _abandoned() == before + 4
    server.set()
    assert await _threads_end(before)
