"""`http_request`: one HTTP(S) request with httpx, a timeout and a cap on the body read."""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import anyio
from pydantic import Field

from jianmu.errors import ToolInputError
from jianmu.execution.runner import redirect_refusal
from jianmu.tools.base import FunctionTool
from jianmu.tools.calls import ToolResult

__all__ = ("HTTPTool", "http_request", "http_request_tool")

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_METHODS: tuple[str, ...] = typing.get_args(Method)
_MAX_TIMEOUT = 120.0
_TEXT_TYPES = ("text/", "json", "xml", "javascript", "x-www-form-urlencoded", "yaml", "csv")
_NAME = "http_request"


def _is_text(content_type: str) -> bool:
    return not content_type or any(t in content_type.lower() for t in _TEXT_TYPES)


def _failed(message: str) -> ToolResult:
    return ToolResult(tool=_NAME, ok=False, error=message)


@dataclass(frozen=True)
class _HTTPRequest:
    """The `http_request` function, with its one setting."""

    max_body_bytes: int = 1_000_000
    """Bytes of response body read at most; the rest is not downloaded."""

    async def __call__(
        self,
        url: str,
        method: Method = "GET",
        headers: dict[str, str] | None = None,
        body: str | None = None,
        timeout: Annotated[float, Field(gt=0, le=_MAX_TIMEOUT)] = 30,
    ) -> str | ToolResult:
        """Send an HTTP or HTTPS request and return the response status, headers and body.

        Use it to call web APIs or fetch a page by URL (use duckduckgo_search to find URLs).
        Returns 'HTTP <status> <reason>', the main response headers and the body as text
        (bodies over 1 MB are cut, with a note); a connection failure, DNS failure or timeout
        is an error result.

        Args:
            url: The full http:// or https:// URL.
            method: The HTTP method.
            headers: Request headers, e.g. {'Authorization': 'Bearer ...'}.
            body: Request body as text (often JSON); JSON text is sent as application/json
                unless a Content-Type header is given.
            timeout: Seconds to wait for the whole response.

        Raises:
            ToolInputError: an unsupported scheme or method, a malformed URL or bad timeout.
        """
        verb = (method or "GET").upper()
        if verb not in _METHODS:
            raise ToolInputError(f"method {verb!r} is not supported; use one of {_METHODS}")
        parts = urlsplit(url or "")
        if parts.scheme.lower() not in ("http", "https"):
            raise ToolInputError(
                f"url {url!r} has scheme {parts.scheme or '(none)'!r}; only http:// and "
                "https:// URLs are allowed"
            )
        if not parts.hostname:
            raise ToolInputError(f"url {url!r} has no host name")
        if not (isinstance(timeout, (int, float)) and 0 < timeout <= _MAX_TIMEOUT):
            raise ToolInputError(
                f"timeout must be in (0, {_MAX_TIMEOUT:g}] seconds, got {timeout!r}"
            )
        headers = dict(headers or {})
        if body is not None and not any(k.lower() == "content-type" for k in headers):
            try:
                json.loads(body)
            except ValueError:
                headers["Content-Type"] = "text/plain; charset=utf-8"
            else:
                headers["Content-Type"] = "application/json"
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - httpx is a core dependency
            raise ToolInputError(f"httpx is not installed: {exc}") from None
        return await self._send(httpx, verb, url, headers, body, float(timeout))

    async def _send(
        self, httpx: Any, method: str, url: str, headers: dict[str, str], body: str | None,
        timeout: float,
    ) -> str | ToolResult:
        """Send the request; network failures come back as a failed `ToolResult`."""
        chunks: list[bytes] = []
        size = 0
        cut = False
        sent = 0

        async def each_request(request: Any) -> None:
            # a redirect is followed only where the guard would let the call itself go
            nonlocal sent
            sent += 1
            if sent > 1:
                why = redirect_refusal("url", str(request.url))
                if why is not None:
                    raise ToolInputError(
                        f"{url} redirected to {request.url}, which the guard refuses: {why}"
                    )

        try:
            async with httpx.AsyncClient(
                timeout=httpx.Timeout(timeout), follow_redirects=True, max_redirects=5,
                event_hooks={"request": [each_request]},
            ) as client:
                # The httpx timeout bounds each phase; this bounds the whole exchange.
                with anyio.fail_after(timeout):
                    async with client.stream(
                        method, url, headers=headers,
                        content=body.encode("utf-8") if body is not None else None,
                    ) as response:
                        async for chunk in response.aiter_bytes():
                            room = self.max_body_bytes - size
                            if len(chunk) > room:
                                chunks.append(chunk[:room])
                                size += room
                                cut = True
                                break  # stop downloading: the rest is never read
                            chunks.append(chunk)
                            size += len(chunk)
        except TimeoutError:
            return _failed(f"{method} {url} timed out after {timeout:g}s; raise timeout or retry")
        except httpx.TimeoutException:
            return _failed(f"{method} {url} timed out after {timeout:g}s; raise timeout or retry")
        except httpx.ConnectError as exc:
            return _failed(f"could not connect to {url}: {exc or 'connection refused'} "
                           "(check the host name and port, or whether the server is up)")
        except ToolInputError as exc:  # a redirect the guard refuses (`each_request`)
            return _failed(str(exc))
        except httpx.TooManyRedirects:
            return _failed(f"{url} redirected more than 5 times")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return _failed(f"{method} {url} failed: {type(exc).__name__}: {exc}")
        return self._render(response, b"".join(chunks), cut)

    def _render(self, response: Any, data: bytes, cut: bool) -> str:
        lines = [f"HTTP {response.status_code} {response.reason_phrase}".rstrip()]
        if str(response.url) != str(response.request.url) or response.history:
            lines.append(f"final-url: {response.url}")
        for key in ("content-type", "content-length", "location", "retry-after"):
            if key in response.headers:
                lines.append(f"{key}: {response.headers[key]}")
        content_type = response.headers.get("content-type", "")
        if not data:
            text = ""
        elif _is_text(content_type):
            text = data.decode(response.encoding or "utf-8", errors="replace")
        else:
            text = f"[binary body of {len(data):,} bytes ({content_type}) not shown]"
        if cut:
            total = response.headers.get("content-length")
            more = f" of {int(total):,}" if total and total.isdigit() else ""
            text += (
                f"\n…[body cut: only the first {self.max_body_bytes:,} bytes{more} were read]"
            )
        return "\n".join(lines) + "\n\n" + text


def http_request_tool(*, max_body_bytes: int = 1_000_000) -> FunctionTool:
    """A fresh `http_request` tool that reads at most ``max_body_bytes`` of each body."""
    return FunctionTool(
        _HTTPRequest(max_body_bytes),
        name=_NAME,
        output_schema={"type": "string", "description": "Status line, headers and body."},
        category="communicate",
        effect_tags=("http",),
        parallel_safe=True,
        timeout_seconds=_MAX_TIMEOUT + 10,
        max_result_length=50_000,
    )


http_request = http_request_tool()
"""The `http_request` tool with the default body cap."""
HTTPTool = http_request_tool
"""The name the tool had as a class: ``HTTPTool(max_body_bytes=...)`` makes a fresh one."""
