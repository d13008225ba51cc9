"""`within`: per-call deadlines for in-process tools, several calls to one loop timer."""

from __future__ import annotations

import asyncio

import pytest

from jianmu.execution.runner import GRAIN_S, within

pytestmark = pytest.mark.anyio


class Late(Exception):
    """What the test's timed_out() raises."""


async def test_a_call_past_its_deadline_is_cancelled_into_the_timeout_error() -> None:
    with pytest.raises(Late):
        await within(asyncio.Event().wait(), 0.05, Late)


async def test_calls_sharing_a_timer_time_out_alone() -> None:
    async def quick() -> str:
        return "done"

    async def slow() -> str:
        await asyncio.Event().wait()
        return "never"

    async def run(fn: object) -> object:
        try:
            return await within(fn(), 0.05, Late)  # type: ignore[operator]
        except Late:
            return "late"

    results = await asyncio.gather(run(quick), run(slow), run(quick), run(slow))
    assert results == ["done", "late", "done", "late"]


async def test_a_finished_call_is_never_cancelled_by_its_old_deadline() -> None:
    async def quick() -> int:
        return 1

    assert await within(quick(), 0.02, Late) == 1
    await asyncio.sleep(0.02 + 3 * GRAIN_S)  # the shared timer fires meanwhile: not at us
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_batch_started_together_sets_one_or_two_timers_not_one_per_call() -> None:
    loop = asyncio.get_running_loop()
    before = len(loop._scheduled)  # type: ignore[attr-defined]
    gate = asyncio.Event()
    calls = [asyncio.ensure_future(within(gate.wait(), 30, Late)) for _ in range(100)]
    await asyncio.sleep(0)
    added = len(loop._scheduled) - before  # type: ignore[attr-defined]
    gate.set()
    assert await asyncio.gather(*calls) == [True] * 100
    assert added <= 2  # a grain's boundary may fall inside the batch


async def test_a_cancel_from_outside_during_the_call_stays_a_cancel() -> None:
    call = asyncio.ensure_future(within(asyncio.Event().wait(), 30, Late))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


@pytest.mark.parametrize("timeout", [float("inf"), 1e308, 1e20])
async def test_a_timeout_too_far_to_set_is_no_deadline(timeout: float) -> None:
    """``llm.timeout: .inf`` (or 1e308) passed the config and then failed every model call:
    "OverflowError: cannot convert float infinity to integer" when the timer was set."""
    async def answer() -> str:
        await asyncio.sleep(0)
        return "ok"

    assert await within(answer(), timeout, lambda: TimeoutError("never")) == "ok"


def test_an_infinite_model_timeout_from_the_config_lets_the_model_answer() -> None:
    from jianmu import Agent, ScriptedLLM
    from jianmu.config import parse_config

    config = parse_config("llm:\n  timeout: .inf\n", "f.yaml")
    result = Agent(ScriptedLLM(["done"]), config=config).run_sync("x")
    assert result.output == "done", result.error
