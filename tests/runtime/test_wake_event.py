"""`WakeEvent`: the runner's wake-up, an `asyncio.Event` for one sleeper at a time."""

from __future__ import annotations

import asyncio

import pytest

from jianmu.runtime.async_node import WakeEvent, expire

pytestmark = pytest.mark.anyio


async def test_a_set_event_is_waited_at_once_and_a_clear_one_until_set() -> None:
    event = WakeEvent(asyncio.get_running_loop())
    assert not event.is_set()
    waiter = event.wait()
    assert not waiter.done()
    assert event.wait() is waiter  # one sleeper's future, shared
    asyncio.get_running_loop().call_soon(event.set)
    assert await waiter is True
    assert event.is_set()
    again = event.wait()
    assert again.done() and again.result() is True  # set: no sleep at all
    event.clear()
    assert not event.is_set() and not event.wait().done()


async def test_a_cancelled_or_expired_wait_leaves_the_next_one_working() -> None:
    loop = asyncio.get_running_loop()
    event = WakeEvent(loop)
    first = event.wait()
    first.cancel()  # the sleeper was cancelled (a run cancelled while it slept)
    second = event.wait()
    assert second is not first and not second.done()
    expire(second)  # its timer ran out before anything set it
    assert await second is False
    expire(second)  # a timer that fires after the wait ended changes nothing
    third = event.wait()
    loop.call_soon(event.set)
    assert await third is True


async def test_set_wakes_a_sleeper_through_asyncio_wait() -> None:
    """`_settle` sleeps on it beside the node tasks, with ``asyncio.wait``."""
    event = WakeEvent(asyncio.get_running_loop())
    never = asyncio.get_running_loop().create_future()
    woken = event.wait()
    asyncio.get_running_loop().call_soon(event.set)
    done, _ = await asyncio.wait([never, woken], return_when=asyncio.FIRST_COMPLETED)
    assert done == {woken}
    never.cancel()
    with pytest.raises(asyncio.CancelledError):
        await never
