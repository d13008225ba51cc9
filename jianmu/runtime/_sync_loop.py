"""How the loop of `ReactiveRunner.run_sync` ends: shut down as ``asyncio.run`` would when its
thread ends or the interpreter exits, its default executor's threads waited for without
`threading.Thread.join`.

``asyncio.run()`` closes its loop, and with it whatever a run left for the next one: the model
provider's kept-alive connections, a node's loop-bound resources. So every ``run_sync()`` of a
thread runs on the same loop (`jianmu.runtime.runner`, which makes it), which lives until the
thread ends or the interpreter exits; it is then shut down the way ``asyncio.run`` shuts down
its own (tasks cancelled, async generators closed, so per-loop clients close their
connections), and closed. A forked child never touches the loop it inherited: it makes its own.

The loop is shut down from its thread's end, when ``threading`` has already forgotten that
thread, and ``join`` asks ``threading.current_thread()``, which then registers a
``_DummyThread`` that stays listed (``threading.enumerate``, ``active_count``) after the thread
is gone: one phantom thread per thread that ever ran ``run_sync()``. So each thread of the
loop's executor (DNS lookups) sets an event as it ends (`thread_started`), and the shutdown
waits on those. Nothing here runs while a run goes on: it stays off a plain call's path.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

__all__ = ("shut_down", "thread_started")

_own = threading.local()


class _Token:
    """A thread's own object, collected as the thread ends."""


def thread_started(ends: list[threading.Event]) -> None:
    """An executor thread's initializer: an event in ``ends`` that is set as the thread ends."""
    ended = threading.Event()
    ends.append(ended)
    _own.token = token = _Token()
    weakref.finalize(token, ended.set)  # its thread's locals go as the thread ends


def shut_down(
    loop: asyncio.AbstractEventLoop, pid: int, executor: ThreadPoolExecutor | None = None,
    ends: list[threading.Event] | None = None,
) -> None:
    """Shut ``loop`` down as ``asyncio.run`` would, then close it (in the process that made
    it); ``executor``, its default one, is waited for by the ``ends`` of its threads."""
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
        if executor is not None:  # waited for here: no thread started to join it
            executor.shutdown(wait=False)
            for ended in list(ends or ()):
                ended.wait()
        else:
            loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
