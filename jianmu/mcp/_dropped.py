"""What an `MCPClient` leaves on its event loop, and what ends it when the client is dropped.

A client's session lives in tasks on an event loop (`jianmu.mcp.client`). They hold the
client weakly, so a client that its user dropped without ``close()`` is collected: then
`abandoned`, a `weakref.finalize` callback holding the client's `Leftovers` (never the client),
warns with a `ResourceWarning` and ends what the session held:

- the session's loop is asked to end it: the SDK's own stop of a stdio server (its stdin
  closed, then SIGTERM, then SIGKILL, reaped by the loop) or the end of an HTTP session; then
  the client's task group ends;
- a stdio server still running is watched from a thread, which stops it itself (SIGTERM to its
  process group, SIGKILL when it ignores that) when the loop cannot: the loop is not running
  (``run_sync``'s loop between two runs, a loop closed with its tasks left on it), or it did
  not stop the server within its shutdown time.

A finalizer runs wherever the last reference went (any thread, inside a loop's callback): it
calls no async code and waits for nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
import warnings
from typing import Any

import anyio

__all__ = ("SHUTDOWN_SECONDS", "Leftovers", "abandoned")

SHUTDOWN_SECONDS = 10.0  # the SDK bounds a stdio shutdown at about 6 s (grace, TERM, KILL)
_TERM_SECONDS = 2.0  # from SIGTERM to SIGKILL, as the SDK waits
_POLL_SECONDS = 0.05
_CAN_WATCH = hasattr(os, "waitid") and hasattr(os, "WNOWAIT")  # POSIX; not Windows


class Leftovers:
    """What a client's session holds on its event loop, reachable without the client."""

    __slots__ = ("done", "loop", "opened", "process", "quit", "stop")

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop the session lives on."""
        self.quit: anyio.Event | None = None
        """Set: the client's task group on ``loop`` ends (after the session)."""
        self.stop: anyio.Event | None = None
        """Set: the live session ends."""
        self.done: anyio.Event | None = None
        """Set by the live session once it ended (a stdio server's process is gone)."""
        self.process: Any = None
        """The live session's stdio server (anyio's `Process`), if any."""
        self.opened = False
        """Whether a session was ever opened: a client that never connected warns nothing."""

    def forget(self) -> None:
        """The loop ended (and took the session with it): nothing is left on it."""
        self.loop = self.quit = self.stop = self.done = self.process = None

    async def stop_session(self) -> None:
        """End the live session, if any, and wait (bounded, even when cancelled) until it has."""
        stop, done = self.stop, self.done
        self.stop = self.done = None
        if stop is not None and done is not None:
            stop.set()
            with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_SECONDS):
                await done.wait()


def abandoned(left: Leftovers, name: str) -> None:
    """`weakref.finalize` callback of the client ``name``, dropped unclosed: warn, and end what
    it left (``left``)."""
    loop, quit_, process = left.loop, left.quit, left.process
    if loop is not None and quit_ is not None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: its tasks are over
            loop.call_soon_threadsafe(quit_.set)
    if process is not None and process.returncode is None and _CAN_WATCH:
        threading.Thread(
            target=_stop_server, args=(process.pid, loop), daemon=True,
            name=f"jianmu-mcp-stop-{process.pid}",
        ).start()
    if left.opened:  # last: a warning filtered into an error must not stop the rest
        warnings.warn(
            f"unclosed MCP client {name!r}: its session (a stdio server's process) is being "
            "stopped; close the client with `await client.close()`, or use it as "
            "`async with MCPClient(...) as client:` (a provider: `await provider.close()`)",
            ResourceWarning, stacklevel=2,
        )


def _stop_server(pid: int, loop: asyncio.AbstractEventLoop | None) -> None:
    """(a thread) Stop the server ``pid`` that its loop does not: SIGTERM, then SIGKILL."""
    deadline = time.monotonic() + SHUTDOWN_SECONDS
    while loop is not None and loop.is_running() and time.monotonic() < deadline:
        if _state(pid) != "running":
            return  # the loop stopped it; it reaps it too
        time.sleep(_POLL_SECONDS)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if _state(pid) != "running":
            break
        _signal_group(pid, sig)
        _wait_exit(pid, _TERM_SECONDS)
    if _state(pid) == "exited" and (loop is None or loop.is_closed()):
        # a closed loop's child watcher may never reap it (a pidfd watcher reads on the loop);
        # a thread watcher does at once, so it is given a moment first
        _wait_exit(pid, _TERM_SECONDS, reaped=True)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _state(pid: int) -> str:
    """``running``; ``exited`` (not reaped yet: its pid is still ours); or ``gone`` (reaped:
    the pid may be another process's by now, so it is never signalled then)."""
    try:
        found = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return "gone"
    return "running" if found is None else "exited"


def _wait_exit(pid: int, seconds: float, *, reaped: bool = False) -> None:
    """Wait up to ``seconds`` until ``pid`` exited (or, ``reaped``, until it is gone)."""
    done = ("gone",) if reaped else ("exited", "gone")
    deadline = time.monotonic() + seconds
    while _state(pid) not in done and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)


def _signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group the server leads (the SDK starts it in a session of
    its own, so what it started goes too), or to the server alone when it leads none."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
