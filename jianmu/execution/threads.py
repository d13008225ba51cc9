"""`run_in_worker`: a blocking call in a worker thread, with the caller's context variables."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import anyio
import anyio.to_thread

__all__ = ("run_in_worker",)


async def run_in_worker(
    call: Callable[[], Any],
    *,
    limiter: anyio.CapacityLimiter | None = None,
    executor: Executor | None = None,
) -> Any:
    """Run a blocking ``call`` in a worker thread, carrying the caller's context variables.

    A cancelled caller stops waiting; the thread finishes on its own (threads cannot be
    killed), which is why sandboxed tools run code in a child process instead.
    """
    if executor is None:
        return await anyio.to_thread.run_sync(call, limiter=limiter, abandon_on_cancel=True)
    # run_in_executor is several times cheaper than anyio's worker hand-off for short calls,
    # but does not copy context variables (the workspace root lives in one): copy them here
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(executor, context.run, call)
