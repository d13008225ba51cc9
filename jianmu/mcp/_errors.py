"""The SDK's and the transport's errors as Jianmu's (`MCPError`, `ToolTimeoutError`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import anyio

from jianmu.errors import MCPError, ToolTimeoutError
from jianmu.mcp._bridge import describe

__all__ = ("translate", "translated")

_UNREACHABLE = (
    anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError
)


def translated(
    client: Any, what: str, generation: int, exc: Exception, *, timeout: float | None = None
) -> Exception | None:
    """Jianmu's error for ``exc`` raised by ``client``'s (an `MCPClient`) request ``what``.

    Returns ``None`` for an error that is not the SDK's or the transport's (raise it as is).
    """
    from mcp.shared.exceptions import MCPError as SDKError
    from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    if isinstance(exc, SDKError):
        if exc.code == CONNECTION_CLOSED:
            client._mark_broken(generation)
            return MCPError(
                f"MCP server {client.name!r} closed the connection during {what} "
                f"({exc.message}); the next call reconnects"
            )
        if exc.code == REQUEST_TIMEOUT:
            if client._broken and generation == client.connections:
                # the transport failed under the request (HTTP): not a slow tool
                return MCPError(
                    f"MCP server {client.name!r} could not be reached during {what}; "
                    "the next call reconnects"
                )
            return ToolTimeoutError(
                f"MCP server {client.name!r} did not answer {what} within "
                f"{timeout or client.timeout:g}s; raise the server's timeout"
            )
        refusal = client._refused.explain(client.name, client._headers)
        detail = refusal or f"{exc.message} (code {exc.code})"
        return MCPError(f"MCP server {client.name!r} refused {what}: {detail}")
    if isinstance(exc, _UNREACHABLE):
        client._mark_broken(generation)
        return MCPError(
            f"MCP server {client.name!r} is not reachable during {what} ({describe(exc)}); "
            "the next call reconnects"
        )
    if isinstance(exc, RuntimeError):  # e.g. structured content that breaks its output schema
        return MCPError(f"MCP server {client.name!r} answered {what} badly: {exc}")
    return None


@contextlib.contextmanager
def translate(
    client: Any, what: str, generation: int, *, timeout: float | None = None
) -> Iterator[None]:
    """Turn errors of ``client``'s request ``what`` into Jianmu's (see `translated`)."""
    try:
        yield
    except Exception as exc:
        mapped = translated(client, what, generation, exc, timeout=timeout)
        if mapped is None:
            raise
        raise mapped from None
