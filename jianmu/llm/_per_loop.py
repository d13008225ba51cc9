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
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

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
    by ``close`` when that loop shuts down, or by `aclose`."""

    def __init__(self, make: Callable[[], _T], close: Callable[[_T], Awaitable[None]]) -> None:
        self._make = make
        self._close = close
        self._entries: dict[asyncio.AbstractEventLoop, _Entry[_T]] = {}

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
        guard = entry.guard = self._guard(loop, entry)
        # Its first step registers the generator with the running loop (the loop's asyncgen
        # hooks), so that the loop's shutdown closes it; it yields at once.
        try:
            guard.asend(None).send(None)
        except StopIteration:
            pass
        self._entries[loop] = entry
        return entry.client

    async def _guard(
        self, loop: asyncio.AbstractEventLoop, entry: _Entry[_T]
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            if self._entries.get(loop) is entry:
                del self._entries[loop]
            if not entry.abandoned:
                entry.abandoned = True
                try:
                    await self._close(entry.client)
                except Exception:  # a connection that broke while closing: nothing to keep
                    _log.debug("closing a client at its loop's shutdown failed", exc_info=True)

    def _drop_closed(self) -> None:
        """Forget the clients of loops that closed without shutting their generators down."""
        for loop in list(self._entries):  # a copy: other threads may add their loops
            if loop.is_closed():
                entry = self._entries.pop(loop, None)
                if entry is not None:
                    self._abandon(entry)

    @staticmethod
    def _abandon(entry: _Entry[_T]) -> None:
        """Finish the entry's generator here, without awaiting anything on its dead loop (a
        generator left unfinished would ask that loop to close it when collected)."""
        entry.abandoned = True
        if entry.guard is not None:
            try:
                entry.guard.aclose().send(None)
            except (StopIteration, RuntimeError):
                pass

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
