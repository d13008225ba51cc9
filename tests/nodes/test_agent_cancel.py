"""``agent.cancel(run_id)`` stops a run of the agent from another task (or thread), as
`ReactiveRunner.cancel` does for a runner: a streamed run could only be stopped by its reader."""

from __future__ import annotations

import asyncio

import pytest

from jianmu import Agent, ScriptedLLM, tool
from jianmu.runtime import RunStatus
from jianmu.runtime.events import Event

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
