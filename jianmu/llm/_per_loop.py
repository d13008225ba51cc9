"""`PerLoop`: one SDK client per event loop, closed when its loop shuts down.

An HTTP client's connection pool belongs to the loop it was used on: its sockets are that
loop's transports. A provider shared by several loops (runners on different threads, one
``asyncio.run`` after another) keeps one client per loop, so a client made on one loop is
never used on another.

A client is closed on its own loop, while that loop still runs: its entry holds an async
generator started on the loop, and ``loop.shutdown_asyncgens()`` (which ``asyncio.run``,
``asyncio.Runner`` and the runner's own loop call before closing) closes it, which closes the
client. A loop closed without that shutdown is noticed later: its client is dropped without
touching the dead loop.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, TypeVar

__all__ = ("PerLoop",)

_log = logging.getLogger(__name__)

_T = TypeVar("_T")


class _Entry(Generic[_T]):
    """A loop's client and the generator that closes it at the loop's shutdown."""

    def __init__(self, client: _T) -> None:
        self.client = client
        self.abandoned = False
        self.guard: AsyncGenerator[None, None] | None = None


class PerLoop(Generic[_T]):
    """The client of the running event loop: made by ``make`` on first use in a loop, closed
    by ``close`` when that loop shuts down, by `aclose`, or on its loop once the `PerLoop` is
    collected. ``close`` must not hold the `PerLoop`'s owner (a function, not a bound method):
    the clients it closes are kept until then."""

    def __init__(self, make: Callable[[], _T], close: Callable[[_T], Awaitable[None]]) -> None:
        self._make = make
        self._close = close
        self._entries: dict[asyncio.AbstractEventLoop, _Entry[_T]] = {}
        # Dropped (its provider collected) while a loop still runs: the finalizer holds the
        # entries, so the clients stay reachable, and closes each on its own loop. Without
        # it the clients were collected with their sockets open ("unclosed transport"): a
        # loop holds its generators only weakly. Not at exit: the loops' shutdown does that.
        weakref.finalize(self, _dropped, self._entries, close).atexit = False

    def get(self) -> _T:
        """The running loop's client.

        Raises:
            RuntimeError: no event loop is running.
        """
        loop = asyncio.get_running_loop()
        entry = self._entries.get(loop)
        if entry is not None:
            return entry.client
        self._drop_closed()
        entry = _Entry(self._make())
        guard = entry.guard = _guard(self._entries, self._close, loop, entry)
        # Its first step registers the generator with the running loop (the loop's asyncgen
        # hooks), so that the loop's shutdown closes it; it yields at once.
        try:
            guard.asend(None).send(None)
        except StopIteration:
            pass
        self._entries[loop] = entry
        return entry.client

    def _drop_closed(self) -> None:
        """Forget the clients of loops that closed without shutting their generators down."""
        for loop in list(self._entries):  # a copy: other threads may add their loops
            if loop.is_closed():
                entry = self._entries.pop(loop, None)
                if entry is not None:
                    self._abandon(entry)

    @staticmethod
    def _abandon(entry: _Entry[_T]) -> None:
        """Finish the entry's generator here, without awaiting anything on its dead loop."""
        _abandon(entry)

    async def aclose(self) -> None:
        """Close the running loop's client; the clients of other loops close with them."""
        self._drop_closed()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        entry = self._entries.pop(loop, None)
        if entry is None or entry.abandoned:
            return
        entry.abandoned = True
        try:
            await self._close(entry.client)
        finally:
            self._abandon(entry)

    def __len__(self) -> int:
        """How many loops have a client."""
        return len(self._entries)


async def _guard(
    entries: dict[asyncio.AbstractEventLoop, _Entry[_T]],
    close: Callable[[_T], Awaitable[None]],
    loop: asyncio.AbstractEventLoop,
    entry: _Entry[_T],
) -> AsyncGenerator[None, None]:
    """Closes ``entry``'s client when the generator is closed: at its loop's shutdown, or
    by `_dropped`. A function, not a method: it must not keep its `PerLoop` alive."""
    try:
        yield
    finally:
        if entries.get(loop) is entry:
            del entries[loop]
        if not entry.abandoned:
            entry.abandoned = True
            try:
                await close(entry.client)
            except Exception:  # a connection that broke while closing: nothing to keep
                _log.debug("closing a client at its loop's shutdown failed", exc_info=True)


def _abandon(entry: _Entry[Any]) -> None:
    """Finish the entry's generator here, without awaiting anything on its dead loop (a
    generator left unfinished would ask that loop to close it when collected)."""
    entry.abandoned = True
    if entry.guard is not None:
        try:
            entry.guard.aclose().send(None)
        except (StopIteration, RuntimeError):
            pass


def _dropped(
    entries: dict[asyncio.AbstractEventLoop, _Entry[_T]], close: Callable[[_T], Awaitable[None]]
) -> None:
    """A `PerLoop` was collected: close each client on its loop (a task there, from any
    thread), or let go of it untouched where the loop is closed."""
    for loop, entry in list(entries.items()):
        if entry.abandoned:
            continue
        if loop.is_closed():
            _abandon(entry)
            continue
        try:
            loop.call_soon_threadsafe(_close_on, loop, entries, entry, close)
        except RuntimeError:  # closed meanwhile
            _abandon(entry)


_closing: set[asyncio.Task[None]] = set()
"""Closes under way: a task the loop holds only weakly must not be collected half done."""


def _close_on(
    loop: asyncio.AbstractEventLoop, entries: dict[asyncio.AbstractEventLoop, _Entry[_T]],
    entry: _Entry[_T], close: Callable[[_T], Awaitable[None]],
) -> None:
    if entry.abandoned:  # the loop's shutdown came first
        return
    if entries.get(loop) is entry:
        del entries[loop]
    _abandon(entry)  # its generator finished here: the loop's shutdown finds nothing to do
    task = loop.create_task(_closed(entry.client, close))
    _closing.add(task)
    task.add_done_callback(_closing.discard)


async def _closed(client: _T, close: Callable[[_T], Awaitable[None]]) -> None:
    try:
        await close(client)
    except Exception:  # a connection that broke while closing: nothing to keep
        _log.debug("closing a dropped client failed", exc_info=True)
