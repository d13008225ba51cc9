"""One agent tool (an `Agent`'s ``as_tool()``) serves the runs of every thread: a server that
runs its lead agent with ``run_sync`` on its request threads."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

import jianmu.nodes.agents as agents
from jianmu import Agent, ScriptedLLM
from jianmu.llm.messages import Message


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

    class Lock:
        """The tools' lock, saying when the other thread waits for it."""

        def __init__(self) -> None:
            self.lock = threading.Lock()

        def __enter__(self) -> None:
            if not self.lock.acquire(blocking=False):
                if threading.current_thread() is not main:
                    moved.set()
                self.lock.acquire()

        def __exit__(self, *exc: object) -> None:
            self.lock.release()

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
    monkeypatch.setattr(agents, "_HELD", Lock(), raising=False)
    tool._held = Held(kept)
    result = lead.run_sync("1")
    others[0].join(30)
    assert not others[0].is_alive()
    assert result.output == "lead: sub: 1", result.output
