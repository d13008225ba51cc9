"""The loop of `ReactiveRunner.run_sync`: one per thread, kept across its calls, shut down as
``asyncio.run`` would when the thread ends or the interpreter exits.

``asyncio.run()`` closes its loop, and with it whatever a run left for the next one: the model
provider's kept-alive connections, a node's loop-bound resources. So every ``run_sync()`` of a
thread runs on the same loop, which lives until the thread ends or the interpreter exits; it is
then shut down the way ``asyncio.run`` shuts down its own (tasks cancelled, async generators
closed, so per-loop clients close their connections), and closed. A forked child never touches
the loop it inherited: it makes its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

__all__ = ("LoopExecutor", "inherited", "shut_down", "thread_loop")

_local = threading.local()
# Loops inherited through fork(): never closed (closing one would unregister the parent's
# descriptors from the epoll instance the child shares with it), never collected (the loop's
# __del__ would close it).
inherited: list[asyncio.AbstractEventLoop] = []


class LoopExecutor(ThreadPoolExecutor):
    """A loop's default executor (DNS lookups) whose threads are waited for as they end without
    `threading.Thread.join`: the loop is shut down from its thread's end, when ``threading`` has
    already forgotten that thread, and ``join`` asks ``threading.current_thread()``, which then
    registers a ``_DummyThread`` that stays listed (``threading.enumerate``, ``active_count``)
    after the thread is gone: one phantom thread per thread that ever ran ``run_sync()``."""

    def __init__(self) -> None:
        ends: list[threading.Event] = []  # one per thread started, set as it ends
        own = threading.local()

        def started() -> None:  # a closure, not a method: the threads hold no executor
            ended = threading.Event()
            ends.append(ended)
            own.token = token = _Token()
            weakref.finalize(token, ended.set)  # its thread's locals go as the thread ends

        super().__init__(thread_name_prefix="jianmu-loop", initializer=started)
        self._ends = ends

    def close(self) -> None:
        """Shut down and wait until every thread of the executor has ended."""
        self.shutdown(wait=False)
        for ended in list(self._ends):
            ended.wait()


class _Token:
    """A thread's own object, collected as the thread ends."""


class _Holder:
    """The thread's loop; when the thread's locals go, a finalizer shuts the loop down."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        # the loop's default executor (DNS lookups) is one held here, joined at the end from
        # the ending thread: the loop's shutdown_default_executor() starts a thread to join
        # it, which Python 3.12+ refuses once the interpreter exits. No thread starts early.
        executor = LoopExecutor()
        self.loop.set_default_executor(executor)
        weakref.finalize(self, shut_down, self.loop, self.pid, executor)


def thread_loop() -> asyncio.AbstractEventLoop:
    """This thread's loop for synchronous callers, made on first use (again after a fork)."""
    holder: _Holder | None = getattr(_local, "holder", None)
    if holder is not None and holder.pid == os.getpid() and not holder.loop.is_closed():
        return holder.loop
    if holder is not None and holder.pid != os.getpid():
        inherited.append(holder.loop)
    holder = _local.holder = _Holder()
    return holder.loop


def shut_down(
    loop: asyncio.AbstractEventLoop, pid: int, executor: LoopExecutor | None = None
) -> None:
    """Shut ``loop`` down as ``asyncio.run`` would, then close it (in the process that made it)."""
    if pid != os.getpid() or loop.is_closed() or loop.is_running():
        return
    if asyncio._get_running_loop() is not None:  # another loop runs here: it cannot be driven
        loop.close()
        return
    try:
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        if executor is not None:
            executor.close()  # waited for here: no thread started to join it
        else:
            loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
