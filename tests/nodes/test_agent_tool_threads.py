"""One agent tool (an `Agent`'s ``as_tool()``) serves the runs of every thread: a server that
runs its lead agent with ``run_sync`` on its request threads."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

import jianmu.nodes.agents as agents
from jianmu import Agent, ScriptedLLM, tool
from jianmu.llm.messages import Message
from jianmu.nodes import agent_tool, create_react_node
from tests.support.told_lock import ToldLock


def _lead() -> tuple[Agent, Any]:
    sub = Agent(ScriptedLLM([lambda m: f"sub: {m[-1].content}"] * 4), name="sub")

    def lead_model(messages: list[Message]) -> Any:
        if messages[-1].role == "user":
            return [{"name": "sub", "arguments": {"input": messages[-1].content}}]
        return f"lead: {messages[-1].content}"

    tool = sub.as_tool()
    return Agent(ScriptedLLM([lead_model] * 4), tools=[tool]), tool


def test_a_run_on_another_thread_starting_its_sub_agent_fails_no_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call of the tool read the calls every run holds while a run on another thread added
    its own: that call failed, its model told "RuntimeError: Set changed size during
    iteration" (5 of 3,000 runs on 8 threads)."""
    lead, tool = _lead()
    main = threading.current_thread()
    moved = threading.Event()  # the other thread added its calls, or waits to
    others: list[threading.Thread] = []

    class Held(weakref.WeakSet):  # type: ignore[type-arg]
        def add(self, item: Any) -> None:
            super().add(item)
            if threading.current_thread() is not main:
                moved.set()

        def __iter__(self) -> Iterator[Any]:
            for i, item in enumerate(super().__iter__()):
                if i == 0 and threading.current_thread() is main and not others:
                    # a run on another thread calls the tool as this call reads its calls
                    others.append(threading.Thread(target=lead.run_sync, args=("2",)))
                    others[0].start()
                    assert moved.wait(30)
                yield item

    kept = [agents._Calls() for _ in range(2)]  # the calls of two runs still held
    monkeypatch.setattr(agents, "_HELD", ToldLock(main, moved), raising=False)
    tool._held = Held(kept)
    result = lead.run_sync("1")
    others[0].join(30)
    assert not others[0].is_alive()
    assert result.output == "lead: sub: 1", result.output


def test_a_shared_tree_running_on_another_thread_is_said_busy_running_not_waiting() -> None:
    """One tree given to ``agent_tool`` serves one call at a time; a run on another thread
    that called it while a call ran was told the call "waits for a person", and the two
    could both take the tree, its check and its taking apart."""
    entered, go_on = threading.Event(), threading.Event()

    @tool
    def work(x: int) -> str:
        """Work."""
        entered.set()
        assert go_on.wait(30)
        return f"worked {x}"

    def sub_model(messages: list[Message]) -> Any:
        if messages[-1].role == "user":
            return [{"name": "work", "arguments": {"x": int(messages[-1].content or "0")}}]
        return f"sub: {messages[-1].content}"

    def lead_model(messages: list[Message]) -> Any:
        if messages[-1].role == "user":
            return [{"name": "sub", "arguments": {"input": messages[-1].content}}]
        return f"lead: {messages[-1].content}"

    shared = create_react_node(ScriptedLLM([sub_model] * 4), [work], name="sub")
    lead = Agent(ScriptedLLM([lead_model] * 4),
                 tools=[agent_tool(shared, name="sub", description="One tree.")])
    first: list[Any] = []
    running = threading.Thread(target=lambda: first.append(lead.run_sync("1")))
    running.start()
    assert entered.wait(30)  # the first run's call holds the tree
    second = lead.run_sync("2")
    go_on.set()
    running.join(30)
    assert first[0].output == "lead: sub: worked 1"
    assert "busy with a call of another run (running, or waiting for a person)" in (
        second.output or ""), second.output
