"""A real HTTP/1.1 model server on 127.0.0.1, written on raw asyncio streams in a thread of its
own, for testing the providers against what real servers do on the wire.

It keeps connections alive across requests, counts them, records every request (its
connection, its place on it, its JSON body) and answers each with the `Reply` its handler
gives: a status, headers, a body sent whole (``Content-Length``, gzip if asked) or in chunks
(chunked transfer encoding, each piece one chunk), and what to do after: keep the connection,
close it, drop it before answering (a kept-alive connection the server had closed), or break
off midway. `openai_sse` and `anthropic_sse` write event streams the ways servers do (``data:``
without a space, CRLF line ends, ``: keep-alive`` comments, ``event:`` lines).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ("SSE", "USAGE", "RawServer", "Recorded", "Reply", "anthropic_sse", "chunk", "completion",
           "json_reply", "message", "openai_sse")

SSE = {"content-type": "text/event-stream"}
"""The headers of an event stream."""
USAGE = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
"""An OpenAI-style usage object."""


@dataclass
class Recorded:
    """One request as the server read it."""

    connection: int
    nth_on_connection: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    """What the server sends back for one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    pieces: Sequence[bytes] = ()
    chunked: bool = False  # each piece one chunk of chunked transfer encoding
    gzip: bool = False  # the whole body gzip-compressed (not with chunked)
    close: bool = False  # close the connection after the answer
    drop: bool = False  # close at once, without a byte of answer
    break_after: int | None = None  # send this many pieces, then drop the connection
    reset: bool = False  # drop it with a reset (RST), not a close (FIN)
    no_length: bool = False  # neither a length nor chunks: the body ends with the connection
    hold: threading.Event | None = None  # after the first piece, wait for it to be set


class RawServer:
    """The server; ``handler(request)`` gives the `Reply` of each request."""

    def __init__(self, handler: Callable[[Recorded], Reply]) -> None:
        self.handler = handler
        self.requests: list[Recorded] = []
        self.connections = 0
        self.open_connections = 0
        self.errors: list[BaseException] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._idle: set[asyncio.StreamWriter] = set()  # waiting for their next request
        self._serving: set[asyncio.Task[Any]] = set()
        self.port = 0

    def __enter__(self) -> RawServer:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(30)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            await asyncio.sleep(0)
            # answers held until their test let them go end now (not destroyed pending)
            serving = [task for task in self._serving if not task.done()]
            if serving:
                await asyncio.wait(serving, timeout=30)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    def close_idle(self, *, reset: bool = False) -> int:
        """Close the kept-alive connections that wait for a request (as a server's idle
        timeout does), with a reset (RST) rather than a close (FIN) if asked; how many."""

        async def close() -> int:
            idle = list(self._idle)
            for writer in idle:
                if reset:
                    _reset(writer)
                else:
                    writer.close()
            for writer in idle:
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()
            return len(idle)

        return asyncio.run_coroutine_threadsafe(close(), self._loop).result(30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self, path: str = "") -> list[Any]:
        return [r.body for r in self.requests if r.path.endswith(path)]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)
        self._writers.add(writer)
        number, nth = self.connections, 0
        try:
            while True:
                self._idle.add(writer)
                line = await reader.readline()
                self._idle.discard(writer)
                if not line.strip():
                    break
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    key, value = h.decode("latin-1").split(":", 1)
                    headers[key.strip().lower()] = value.strip()
                raw = await reader.readexactly(int(headers.get("content-length", "0")))
                record = Recorded(number, nth, method, path, headers,
                                  json.loads(raw) if raw else None)
                nth += 1
                self.requests.append(record)
                reply = self.handler(record)
                if reply.drop:
                    break
                await self._answer(writer, reply)
                if reply.close or reply.break_after is not None or reply.no_length:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:  # a handler's bug: seen by the test, not lost
            self.errors.append(exc)
        finally:
            self._writers.discard(writer)
            self._idle.discard(writer)
            self.open_connections -= 1
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        headers = {"content-type": "application/json", **reply.headers}
        pieces = list(reply.pieces)
        if reply.gzip:
            pieces = [gzip.compress(b"".join(pieces))]
            headers["content-encoding"] = "gzip"
        if reply.chunked:
            headers["transfer-encoding"] = "chunked"
        elif reply.no_length:
            headers["connection"] = "close"
        elif reply.break_after is None:
            headers["content-length"] = str(sum(map(len, pieces)))
        else:  # a length that promises more than will come
            headers["content-length"] = str(sum(map(len, pieces)) + 1000)
        if reply.close:
            headers["connection"] = "close"
        head = f"HTTP/1.1 {reply.status} X\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        writer.write(head.encode("latin-1"))
        for n, piece in enumerate(pieces):
            if reply.break_after is not None and n >= reply.break_after:
                if reply.reset:
                    await writer.drain()
                    _reset(writer)
                return
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if reply.chunked else piece)
            await writer.drain()
            if n == 0 and reply.hold is not None:
                await asyncio.get_running_loop().run_in_executor(None, reply.hold.wait, 60)
        if reply.chunked and reply.break_after is None:
            writer.write(b"0\r\n\r\n")
        await writer.drain()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s connection with a reset (RST): no linger."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


def json_reply(data: Any, **options: Any) -> Reply:
    """A whole JSON answer."""
    return Reply(pieces=[json.dumps(data).encode()], **options)


def completion(content: str | None = "", *, tool_calls: Iterable[dict[str, Any]] = (),
               usage: dict[str, Any] | None = None, finish: str | None = None,
               **extra: Any) -> dict[str, Any]:
    """An OpenAI chat completion."""
    calls = list(tool_calls)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    body: dict[str, Any] = {
        "id": "cmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish or ("tool_calls" if calls else "stop")}],
        **extra,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None,
          usage: dict[str, Any] | None = None, choices: bool = True,
          **extra: Any) -> dict[str, Any]:
    """One OpenAI stream chunk (``choices=False``: an empty ``choices`` list)."""
    body: dict[str, Any] = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1,
                            "model": "m", **extra}
    body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if (
        choices) else []
    if usage is not None:
        body["usage"] = usage
    return body


def openai_sse(events: Iterable[dict[str, Any] | bytes], *, space: bool = True,
               crlf: bool = False, keepalive: bool = False, done: bool = True) -> list[bytes]:
    """The pieces of an OpenAI event stream: each chunk a ``data:`` event; a raw ``bytes`` is
    sent as it is (a piece of an event split anywhere)."""
    end = b"\r\n" if crlf else b"\n"
    prefix = b"data: " if space else b"data:"
    pieces: list[bytes] = []
    for event in events:
        if keepalive:
            pieces.append(b": keep-alive" + end + end)
        if isinstance(event, bytes):
            pieces.append(event)
        else:
            pieces.append(prefix + json.dumps(event, ensure_ascii=False).encode() + end + end)
    if done:
        pieces.append(prefix + b"[DONE]" + end + end)
    return pieces


def message(content: list[dict[str, Any]], *, stop: str = "end_turn",
            usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """An Anthropic message."""
    body: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant",
                            "model": "claude", "content": content, "stop_reason": stop,
                            "stop_sequence": None}
    if usage is not None:
        body["usage"] = usage
    return body


def anthropic_sse(events: Iterable[dict[str, Any] | bytes], *, crlf: bool = False,
                  ping: bool = False) -> list[bytes]:
    """The pieces of an Anthropic event stream: ``event:`` and ``data:`` lines."""
    end = b"\r\n" if crlf else b"\n"
    pieces: list[bytes] = []
    for event in events:
        if ping:
            pieces.append(b"event: ping" + end + b'data: {"type": "ping"}' + end + end)
        if isinstance(event, bytes):
            pieces.append(event)
            continue
        pieces.append(b"event: " + event["type"].encode() + end + b"data: "
                      + json.dumps(event, ensure_ascii=False).encode() + end + end)
    return pieces
