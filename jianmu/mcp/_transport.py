"""How an `MCPClient` reaches its server: the SDK's stdio or HTTP transport, and what the
session reads from it.

Header values (a bearer token among them) live in `SecretHeaders`, whose repr and str show
only the header names; `RefusedAuth` remembers a server's 401/403, which the SDK turns into a
generic error. `WatchedStream` tells the client when the server's messages end;
`WholeLines` hands a stdio server's stdout to the SDK a line's end at a time, and
`AnswerBounds` holds an HTTP server's answers to the same bound.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import anyio.abc

from jianmu.errors import MCPLineTooLongError

__all__ = (
    "MAX_ANSWER_BYTES", "AnswerBounds", "RefusedAuth", "SecretHeaders", "WatchedStream",
    "WholeLines", "end_group", "errlog", "open_transport", "server_process",
)

MAX_ANSWER_BYTES = 64 << 20
"""The most bytes of one message read from a server: a stdio server's line, an HTTP server's
answer (a result of 20 MiB of media fits many times over)."""


def errlog() -> Any:
    """Where the server's stderr goes: ours when it is a real file, else nowhere."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL  # the SDK hands it to the process spawn as is
    return sys.stderr



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
async def open_transport(
    *, command: str | None, args: list[str], env: dict[str, str], cwd: str | None,
    url: str | None, headers: SecretHeaders, refused: RefusedAuth,
    forgotten: Callable[[], None] = lambda: None,
    spawned: Callable[[Any], None] = lambda process: None,
) -> AsyncIterator[Any]:
    """The SDK transport of a server: stdio (``command``), or HTTP (``url``) with its
    ``headers``; ``forgotten()`` runs when the HTTP server answers 404 to a request naming our
    session, ``spawned(process)`` once a stdio server's process started (anyio's `Process`).

    It takes the client's settings, not the client: it lasts as long as the session, which
    must not keep a client its user dropped alive (`jianmu.mcp._dropped`).
    """
    if command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=command, args=args, env=env or None, cwd=cwd)
        opened = stdio_client(params, errlog=errlog())
        process = None
        try:
            async with opened as streams:
                process = server_process(opened)
                if process is not None:
                    read_whole_lines(process)  # before the SDK's reader task first runs
                    spawned(process)
                yield streams
        finally:
            if process is not None:
                end_group(process.pid)
        return
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    # identity: a compressed answer of a few kilobytes may decode to gigabytes before any bound
    # sees it (`AnswerBounds` refuses one sent all the same)
    sent = {k: v for k, v in headers.reveal().items() if k.lower() != "accept-encoding"}
    http = create_mcp_http_client(headers={**sent, "Accept-Encoding": "identity"})

    async def lost(response: Any) -> None:
        # MCP's streamable HTTP: a server that no longer knows a session answers 404 to it
        if response.status_code == 404 and "mcp-session-id" in response.request.headers:
            forgotten()

    answers = AnswerBounds()
    http.event_hooks = {"request": [answers.request],
                        "response": [refused.record, lost, answers.response]}
    assert url is not None  # neither command nor url: MCPClient refuses it
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams


class AnswerBounds:
    """httpx event hooks of one streamable-HTTP connection: each answer is read to
    `MAX_ANSWER_BYTES` at most and only as sent, and the event stream answering a request is
    not read on once the client gave the request up.

    The SDK reads an answer that is not an event stream whole into memory, and an event
    stream (the answer to a request, with the notifications before it) for as long as it goes
    on, bounding only each event (a MiB): a server answering without end filled the memory at
    the network's speed, and went on being read after the call had timed out, until the
    client closed. Past the bound, or compressed although we asked for ``identity``, reading
    fails (`httpx2.StreamError`, `httpx2.SSEError` for an event stream), which the SDK turns
    into the request's error; the connection is closed. A request given up (a call that timed
    out or was cancelled: the SDK sends ``notifications/cancelled`` for it) stops its event
    stream so at its next bytes. The server's own stream of notifications (a GET) has no
    bound: it answers no request.
    """

    __slots__ = ("_given_up", "_streaming")

    def __init__(self) -> None:
        self._streaming: dict[str, int] = {}
        """Request ids (as JSON) whose answer is being read as an event stream: how many."""
        self._given_up: set[str] = set()
        """Those of them that the client gave up."""

    async def request(self, request: Any) -> None:
        """httpx request hook: note the requests the client gives up while they stream."""
        if request.method != "POST" or not self._streaming:
            return
        body = _body(request)
        if len(body) > 4096 or b"notifications/cancelled" not in body:
            return  # cheap: a cancel is a few dozen bytes
        import json

        try:
            message = json.loads(body)
        except ValueError:
            return
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            key = json.dumps(params.get("requestId") if isinstance(params, dict) else None)
            if key in self._streaming:
                self._given_up.add(key)

    async def response(self, response: Any) -> None:
        """httpx response hook: bound the body (see the class)."""
        encodings = {
            e.strip().lower()
            for e in response.headers.get_list("content-encoding", split_commas=True)
        } - {"", "identity"}
        streamed = response.headers.get("content-type", "").lower().startswith(
            "text/event-stream")
        if not streamed:
            response.stream = _bounded_class()(response.stream, encodings)
        elif response.request.method == "POST":  # a request's answer, and its notifications
            key = _request_id(response.request)
            self._streaming[key] = self._streaming.get(key, 0) + 1
            response.stream = _bounded_class()(
                response.stream, encodings, given_up=lambda: key in self._given_up,
                done=lambda: self._done(key), events=True,
            )

    def _done(self, key: str) -> None:
        left = self._streaming.pop(key, 1) - 1
        if left:
            self._streaming[key] = left
        else:
            self._given_up.discard(key)


def _request_id(request: Any) -> str:
    """The JSON-RPC id (as JSON) of the message a POST ``request`` sent; ``null`` if none."""
    import json

    try:
        message = json.loads(_body(request) or b"null")
    except ValueError:
        message = None
    return json.dumps(message.get("id") if isinstance(message, dict) else None)


def _body(request: Any) -> bytes:
    """What ``request`` sends, when it is held in memory (the SDK's JSON is); else nothing."""
    try:
        content = request.content
    except Exception:  # a streamed body, not read: not one of the SDK's messages
        return b""
    return content if isinstance(content, bytes) else b""


@functools.cache
def _bounded_class() -> type:
    import httpx2  # the SDK's HTTP client: only once an HTTP server is connected

    class BoundedBody(httpx2.AsyncByteStream):
        def __init__(
            self, stream: Any, encodings: set[str], *,
            given_up: Callable[[], bool] = lambda: False, done: Callable[[], None] = lambda: None,
            events: bool = False,
        ) -> None:
            self._stream, self._encodings = stream, encodings
            self._given_up, self._done = given_up, done
            # an event stream's reader (httpx2.EventSource) gives up on an SSEError; on
            # another error the SDK would ask the server to send the stream again
            self._error: type[Exception] = httpx2.SSEError if events else httpx2.StreamError
            self._ended = False

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                if self._encodings:
                    raise self._error(
                        f"the server's answer is compressed "
                        f"({', '.join(sorted(self._encodings))}) though the client asked for "
                        "none (Accept-Encoding: identity); not read"
                    )
                size = 0
                async for chunk in self._stream:
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise self._error(
                            f"the server's answer is longer than {MAX_ANSWER_BYTES:,} bytes; "
                            "not read on"
                        )
                    if self._given_up():
                        raise self._error("the request was given up; its answer is not read on")
                    yield chunk
            finally:
                self._end()

        def _end(self) -> None:
            if not self._ended:
                self._ended = True
                self._done()

        async def aclose(self) -> None:
            self._end()
            await self._stream.aclose()

    return BoundedBody


def server_process(opened: Any) -> Any:
    """The process that the SDK's ``stdio_client`` context ``opened`` started: a local of its
    generator, which nothing public shows; ``None`` where an SDK version keeps it otherwise
    (a dropped client's server is then stopped by its event loop only)."""
    frame = getattr(getattr(opened, "gen", None), "ag_frame", None)
    process = frame.f_locals.get("process") if frame is not None else None
    return process if isinstance(getattr(process, "pid", None), int) else None


def end_group(leader: int) -> None:
    """Kill what is left of the process group a stdio server led, once its session is over.

    The SDK kills the group only when the server outlives its grace period; a server that
    exits at once, or crashed, left the processes it started (a language server, a browser)
    running, owned by no run. The SDK starts the server in a session of its own, so its pid
    names the group; a group id stays taken while any member lives, so it is not another's.
    """
    if not hasattr(os, "killpg") or leader <= 0:
        return
    with contextlib.suppress(OSError):
        if leader != os.getpgrp():  # never our own group (a server not started in its own)
            os.killpg(leader, signal.SIGKILL)


class WholeLines(anyio.abc.ByteReceiveStream):
    """A stdio server's stdout, read on until a chunk holds a line's end (or the output ends).

    The SDK's reader joins each chunk it reads (64 KiB at most) to the unfinished line and
    splits the whole again, so a line of n bytes cost n²/64 KiB: a 20 MB result took minutes
    of the event loop. Handed a line's end at once, it joins and splits each line once. A
    chunk may then be longer than ``max_bytes``: its reader only decodes it. A line longer
    than `limit` (a server writing without end) kills the server and raises
    `MCPLineTooLongError`:
    the session ends (the next call starts the server again) rather than filling the memory.
    Only the kill ends it: the SDK's reader drains the stdout to its end before it lets the
    session know.
    """

    limit = MAX_ANSWER_BYTES
    """The longest line read, in bytes."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream, process: Any) -> None:
        self._stream, self._process = stream, process

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """The next bytes, up to and past the next line's end; what is left at the end."""
        parts = [await self._stream.receive(max_bytes)]
        size = len(parts[0])
        while b"\n" not in parts[-1]:
            if size > self.limit:
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()
                raise MCPLineTooLongError(
                    f"wrote a line of more than {self.limit:,} bytes to stdout; its session "
                    "is closed, and the next call starts the server again"
                )
            try:
                parts.append(await self._stream.receive(max_bytes))
            except anyio.EndOfStream:  # the last line had no end: hand it as it is
                break
            size += len(parts[-1])
        return b"".join(parts)

    async def aclose(self) -> None:
        """Close the stream."""
        await self._stream.aclose()


def read_whole_lines(process: Any) -> None:
    """Give the SDK's reader `WholeLines` of ``process``'s stdout (anyio's `Process` keeps it
    in ``_stdout``; another keeps its own, read as the SDK reads it)."""
    stdout = getattr(process, "_stdout", None)
    if isinstance(stdout, anyio.abc.ByteReceiveStream) and not isinstance(stdout, WholeLines):
        process._stdout = WholeLines(stdout, process)


class WatchedStream:
    """The SDK's read stream of a session, calling ``ended()`` when the server's messages end
    and passing each message through ``seen`` (the SDK's `ReadStream` protocol: what its
    session reads)."""

    __slots__ = ("_ended", "_seen", "_stream")

    def __init__(
        self, stream: Any, ended: Callable[[], None], seen: Callable[[Any], Any] = lambda m: m
    ) -> None:
        self._stream, self._ended, self._seen = stream, ended, seen

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message, where the stream keeps it."""
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Any:
        """The next message; `ended()` runs when there is none."""
        try:
            message = await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended()
            raise
        return self._seen(message)

    async def aclose(self) -> None:
        """Close the stream."""
        await self._stream.aclose()

    def __aiter__(self) -> WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> WatchedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

