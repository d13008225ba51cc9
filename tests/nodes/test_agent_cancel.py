"""``agent.cancel(run_id)`` stops a run of the agent from another task (or thread), as
`ReactiveRunner.cancel` does for a runner: a streamed run could only be stopped by its reader."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from jianmu import Agent, ScriptedLLM, tool
from jianmu.runtime import RunStatus
from jianmu.runtime.events import Event
from tests.support.told_lock import ToldLock

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def waiting_agent() -> tuple[Agent, asyncio.Event, asyncio.Event]:
    started, stopped = asyncio.Event(), asyncio.Event()

    @tool
    async def wait_for_ever() -> str:
        """Wait."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopped.set()
            raise
        return "never"

    llm = ScriptedLLM([[{"name": "wait_for_ever", "arguments": {}}], "done"])
    return Agent(llm, tools=[wait_for_ever]), started, stopped


async def test_another_task_cancels_a_streamed_run_by_its_id() -> None:
    agent, started, stopped = waiting_agent()
    seen: list[Event] = []

    async def read() -> None:
        async for event in agent.stream("Wait."):
            seen.append(event)

    reader = asyncio.create_task(read())
    await started.wait()
    [run_id] = {e.run_id for e in seen}
    assert agent.cancel(run_id) is True
    await reader  # the stream ends by itself, with the run's end
    assert stopped.is_set()
    last = seen[-1]
    assert last.name == "run.finished" and last.fields["result"].status is RunStatus.CANCELLED
    assert agent.cancel(run_id) is False  # over: nothing to stop
    assert agent.cancel("no-such-run") is False


def test_cancel_from_another_thread_while_a_run_starts_never_fails_on_the_set_of_runs() -> None:
    """A thread's ``cancel()`` read the agent's runs while a run started on another thread
    could add to them: "RuntimeError: Set changed size during iteration", now and then, in a
    server that starts runs on its request threads."""
    agent = Agent(ScriptedLLM(["Hi."] * 3))
    kept = [agent._runner("Hi.", None, None, None) for _ in range(2)]  # two runs to read
    moved = threading.Event()  # the other thread added its run, or waits to
    main = threading.current_thread()

    starting: list[threading.Thread] = []

    class Runs(weakref.WeakSet):  # type: ignore[type-arg]
        def add(self, item: Any) -> None:
            super().add(item)
            if threading.current_thread() is not main:
                moved.set()

        def __iter__(self) -> Iterator[Any]:
            for i, item in enumerate(super().__iter__()):
                if i == 0 and not starting:  # a run starts on another thread as cancel reads
                    starting.append(threading.Thread(target=agent.run_sync, args=("Hi.",)))
                    starting[0].start()
                    assert moved.wait(30)
                yield item

    agent._lock = ToldLock(main, moved)  # type: ignore[assignment]
    agent._runs = Runs(agent._runs)
    assert agent.cancel("no-such-run") is False
    starting[0].join(30)
    assert not starting[0].is_alive() and len(kept) == 2
