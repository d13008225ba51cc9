"""Opening an `MCPClient`'s transport: stdio, or streamable HTTP with its headers and auth.

Header values (a bearer token among them) live in `SecretHeaders`, whose repr and str show
only the header names, so a client's repr, an error or a log line never carries them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from jianmu.mcp._bridge import errlog

__all__ = ("SecretHeaders", "open_transport")

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 9110 token
_REFUSED = {401: "401 Unauthorized", 403: "403 Forbidden"}


class SecretHeaders:
    """HTTP headers sent on every request to a server; values never shown.

    Raises:
        ValueError: a header name that is not an HTTP token, a value that is not a string
            or holds a line break, or an empty bearer token.
    """

    __slots__ = ("_values",)

    def __init__(
        self, headers: Mapping[str, str] | None = None, *, bearer_token: str | None = None
    ) -> None:
        values: dict[str, str] = {}
        for name, value in (headers or {}).items():
            if not isinstance(name, str) or not _HEADER_NAME.match(name):
                raise ValueError(f"MCP header name {name!r} is not a valid HTTP header name")
            if not isinstance(value, str) or "\r" in value or "\n" in value:
                # the value is not echoed: it may be a secret
                raise ValueError(f"MCP header {name!r} needs a one-line string value")
            values[name] = value
        if bearer_token is not None:
            if not isinstance(bearer_token, str) or not bearer_token.strip() or any(
                c in bearer_token for c in "\r\n"
            ):
                raise ValueError("MCP bearer token must be a non-empty one-line string")
            values = {k: v for k, v in values.items() if k.lower() != "authorization"}
            values["Authorization"] = f"Bearer {bearer_token.strip()}"
        self._values = values

    @property
    def names(self) -> tuple[str, ...]:
        """The header names (safe to show)."""
        return tuple(self._values)

    def reveal(self) -> dict[str, str]:
        """The headers with their values, for the HTTP client only."""
        return dict(self._values)

    def __bool__(self) -> bool:
        return bool(self._values)

    def __repr__(self) -> str:
        return f"<SecretHeaders {', '.join(self._values) or 'none'}>"

    __str__ = __repr__


class RefusedAuth:
    """The last 401/403 a server answered (the SDK turns it into a generic error)."""

    __slots__ = ("status",)

    def __init__(self) -> None:
        self.status: int | None = None

    async def record(self, response: Any) -> None:
        """httpx response hook: remember a refusal."""
        if response.status_code in _REFUSED:
            self.status = response.status_code

    def explain(self, server: str, headers: SecretHeaders) -> str | None:
        """Why the server refused us, naming the headers sent (never their values)."""
        if self.status is None:
            return None
        sent = f"headers sent: {', '.join(headers.names)}" if headers else "no headers sent"
        return (
            f"the server answered HTTP {_REFUSED[self.status]} ({sent}); check "
            f"mcp.servers.{server}.auth / headers and the variables they read"
        )


@contextlib.asynccontextmanager
async def open_transport(client: Any, refused: RefusedAuth) -> AsyncIterator[Any]:
    """The SDK transport of ``client`` (an `MCPClient`): stdio, or HTTP with its headers."""
    if client.command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=client.command, args=client.args, env=client.env or None, cwd=client.cwd
        )
        async with stdio_client(params, errlog=errlog()) as streams:
            yield streams
        return
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers: SecretHeaders = client._headers
    http = create_mcp_http_client(headers=headers.reveal() or None)
    http.event_hooks = {"request": [], "response": [refused.record]}
    async with http, streamable_http_client(client.url, http_client=http) as streams:
        yield streams
