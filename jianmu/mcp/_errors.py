"""The SDK's and the transport's errors as Jianmu's (`MCPError`, `ToolTimeoutError`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import anyio

from jianmu.errors import MCPError, ToolTimeoutError
from jianmu.mcp._bridge import describe

__all__ = ("translate",)


@contextlib.contextmanager
def translate(
    client: Any, what: str, generation: int, *, timeout: float | None = None
) -> Iterator[None]:
    """Turn errors of ``client``'s (an `MCPClient`) request ``what`` into Jianmu's."""
    from mcp.shared.exceptions import MCPError as SDKError
    from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    try:
        yield
    except SDKError as exc:
        if exc.code == CONNECTION_CLOSED:
            client._mark_broken(generation)
            raise MCPError(
                f"MCP server {client.name!r} closed the connection during {what} "
                f"({exc.message}); the next call reconnects"
            ) from None
        if exc.code == REQUEST_TIMEOUT:
            if client._broken and generation == client.connections:
                # the transport failed under the request (HTTP): not a slow tool
                raise MCPError(
                    f"MCP server {client.name!r} could not be reached during {what}; "
                    "the next call reconnects"
                ) from None
            raise ToolTimeoutError(
                f"MCP server {client.name!r} did not answer {what} within "
                f"{timeout or client.timeout:g}s; raise the server's timeout"
            ) from None
        refusal = client._refused.explain(client.name, client._headers)
        detail = refusal or f"{exc.message} (code {exc.code})"
        raise MCPError(f"MCP server {client.name!r} refused {what}: {detail}") from None
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
            OSError) as exc:
        client._mark_broken(generation)
        raise MCPError(
            f"MCP server {client.name!r} is not reachable during {what} ({describe(exc)}); "
            "the next call reconnects"
        ) from None
    except RuntimeError as exc:  # e.g. structured content that breaks its output schema
        raise MCPError(f"MCP server {client.name!r} answered {what} badly: {exc}") from None
