"""Glue between the caller's event loop and the SDK's: the extra, futures, error text."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import subprocess
import sys
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

from jianmu.errors import MissingExtraError

__all__ = (
    "connect_failure",
    "describe",
    "errlog",
    "first_leaf",
    "hand_over",
    "require_mcp",
    "running_loop",
    "wait_future",
)

_T = TypeVar("_T")


def require_mcp() -> None:
    """Import the SDK or raise `MissingExtraError` naming the ``mcp`` extra."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("mcp", "mcp") from exc


def first_leaf(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (the SDK's task groups wrap errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """``Type: message`` of the error inside ``exc`` (groups unwrapped)."""
    inner = first_leaf(exc)
    text = str(inner)
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__


def errlog() -> Any:
    """Where the server's stderr goes: ours when it is a real file, else nowhere."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL  # the SDK hands it to the process spawn as is
    return sys.stderr


async def wait_future(future: Future[_T]) -> _T:
    """Await a `concurrent.futures.Future` from any anyio loop; cancelling cancels it."""
    if not future.done():
        done = anyio.Event()
        token = anyio.lowlevel.current_token()
        loop_thread = threading.get_ident()

        def wake(_: Future[_T]) -> None:
            if threading.get_ident() == loop_thread:
                done.set()
                return
            with contextlib.suppress(RuntimeError):  # the caller's loop has ended
                anyio.from_thread.run_sync(done.set, token=token)

        future.add_done_callback(wake)
        try:
            await done.wait()
        except BaseException:
            future.cancel()
            raise
    return future.result()


def hand_over(coro: Coroutine[Any, Any, _T], loop: asyncio.AbstractEventLoop) -> Future[_T]:
    """Run ``coro`` on ``loop`` (another thread's), in a copy of the caller's context.

    The copy does not name the caller's async library: a trio caller's would make anyio
    pick its trio backend on the session's asyncio loop (sniffio reads a context variable).
    """
    context = contextvars.copy_context()
    try:
        import sniffio
    except ImportError:  # anyio then assumes asyncio anyway
        pass
    else:
        context.run(sniffio.current_async_library_cvar.set, None)
    return context.run(asyncio.run_coroutine_threadsafe, coro, loop)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The caller's asyncio loop; None on another anyio backend (trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def connect_failure(client: Any, exc: BaseException) -> str:
    """Why `MCPClient` ``client`` could not connect, and what to check."""
    leaf = first_leaf(exc)
    refusal = client._refused.explain(client.name, client._headers)
    if refusal is not None:
        return f"could not connect to MCP server {client.name!r} (url {client.url!r}): {refusal}"
    if isinstance(leaf, TimeoutError):
        detail = (
            f"no answer to the handshake within {client.connect_timeout:g}s "
            "(connect_timeout)"
        )
    else:
        detail = describe(leaf)
    where = (
        f"command {' '.join([client.command, *client.args])!r}"
        if client.command is not None
        else f"url {client.url!r}"
    )
    fix = (
        "check that the command starts an MCP stdio server"
        if client.command is not None
        else "check that the server is running and the URL ends with its MCP path (often /mcp)"
    )
    return f"could not connect to MCP server {client.name!r} ({where}): {detail}; {fix}"
