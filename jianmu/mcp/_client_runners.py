"""One `ToolRunner` per client of an MCP server over HTTP: clients never share a sandbox.

A sandbox runs one command at a time and keeps what its commands leave (files in its ``/tmp``)
for its next ones: fine within one client's work, wrong between clients. So each
streamable-HTTP session (its ``Mcp-Session-Id``) gets a runner of its own, built from the
server's execution constraints at its first call: one client's commands never see another's
(processes, their environment, ``/tmp``, IPC objects), nor wait for them. A request from no
HTTP client (stdio: one client) uses the server's runner; an HTTP request without a session,
or one beyond `MAX_CLIENTS` clients that all have calls running, gets a runner for that call
alone. A client's runner is closed once it has had no call for `IDLE_S` (looked at on each
call) and when the server stops.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from jianmu.execution.runner import ToolRunner

__all__ = ("IDLE_S", "MAX_CLIENTS", "ClientRunners")

IDLE_S = 600.0
"""Seconds without a call after which a client's runner (its sandbox) is closed."""
MAX_CLIENTS = 32
"""Clients that keep a runner at once; the one idle longest makes room for a new one."""


@dataclass
class _Client:
    runner: ToolRunner
    busy: int = 0
    last: float = 0.0


class ClientRunners:
    """The runner each request of an MCP server runs its tool call on.

    Args:
        shared: The server's runner: for stdio, and for every client when ``make`` is None.
        make: Builds a client's runner; ``None`` shares ``shared`` (a runner the caller
            passed in, whose sandbox the caller chose).
    """

    def __init__(self, shared: ToolRunner, make: Callable[[], ToolRunner] | None) -> None:
        self._shared, self._make = shared, make
        self._clients: dict[str, _Client] = {}

    @contextlib.asynccontextmanager
    async def runner_for(self, request: Any) -> AsyncIterator[ToolRunner]:
        """The runner of the client that sent ``request`` (the transport's HTTP request, or
        ``None``), held for one call."""
        if request is None or self._make is None:
            yield self._shared
            return
        await self._close_idle()
        key = request.headers.get("mcp-session-id")
        client = self._clients.get(key) if key else None
        if client is None and key:
            client = await self._admit(key)
        if client is None:  # no session to keep it for, or no room: this call's own
            once = self._make()
            try:
                yield once
            finally:
                await _close([once])
            return
        client.busy += 1
        try:
            yield client.runner
        finally:
            client.busy -= 1
            client.last = time.monotonic()

    async def _admit(self, key: str) -> _Client | None:
        """A new client's entry; the longest idle client's runner closes if there is no room,
        and ``None`` comes back if every client has a call running."""
        if len(self._clients) >= MAX_CLIENTS:
            idle = [(c.last, k) for k, c in self._clients.items() if not c.busy]
            if not idle:
                return None
            await _close([self._clients.pop(min(idle)[1]).runner])
            if key in self._clients:  # a call of the same client came in meanwhile
                return self._clients[key]
        assert self._make is not None
        client = self._clients[key] = _Client(self._make(), last=time.monotonic())
        return client

    async def _close_idle(self) -> None:
        """Close the runners of clients without a call for `IDLE_S`."""
        now = time.monotonic()
        idle = [k for k, c in self._clients.items() if not c.busy and now - c.last > IDLE_S]
        await _close([self._clients.pop(k).runner for k in idle])

    async def close(self) -> None:
        """Close every client's runner and the shared one."""
        runners = [c.runner for c in self._clients.values()]
        self._clients.clear()
        await _close([*runners, self._shared])


async def _close(runners: list[ToolRunner]) -> None:
    """Close ``runners`` (their sandboxes), even if the caller is being cancelled."""
    with anyio.CancelScope(shield=True):
        for runner in runners:
            await runner.close()
