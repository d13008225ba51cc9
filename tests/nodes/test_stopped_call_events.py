"""Every ``tool.call.started`` has one end event, also for a call the run's stop halts.

Found by the scenario fuzz (`tests/runtime/test_scenario_fuzz.py`): a call stopped for sure (an
async tool, a sub-agent) by a cancel, the run's timeout or a stream left ended with no event, so
a reader of the stream, the CLI's progress or the studio's timeline saw it running for ever.
It now ends with ``tool.call.stopped``.
"""

from __future__ import annotations

import asyncio

import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, ToolExecutor, tool
from jianmu.runtime.events import Event
from jianmu.studio.timeline import _Story

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_a_call_the_runs_cancel_halts_ends_with_a_stopped_event() -> None:
    entered, forever = asyncio.Event(), asyncio.Event()

    @tool
    async def wait_for_tide(port: str) -> str:
        """Wait for the tide.

        Args:
            port: where.
        """
        entered.set()
        await forever.wait()
        return "high tide"

    state = StateManager(AgentState, {"actions": [
        {"id": "t1", "name": "wait_for_tide", "arguments": {"port": "Brest"}}]})
    runner = ReactiveRunner(ToolExecutor(tools=[wait_for_tide]), state)
    seen: list[Event] = []
    runner.ctx.events.subscribe("tool.call.*", seen.append)

    async def stop_once_entered() -> None:
        await entered.wait()
        runner.cancel()

    stopper = asyncio.create_task(stop_once_entered())
    assert (await runner.run(timeout=30)).status is RunStatus.CANCELLED
    await stopper
    assert [(e.name, e.fields.get("call_id")) for e in seen] == [
        ("tool.call.started", "t1"), ("tool.call.stopped", "t1")]
    said = _Story({}, []).entry({"name": seen[-1].name, "fields": seen[-1].fields})
    assert said is not None and said["title"] == "stopped: wait_for_tide"  # the studio says so
