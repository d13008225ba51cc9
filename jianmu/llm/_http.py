"""What a provider's SDK client needs of HTTP: to know whether the server answered a request
that then failed, and to send again, once and at once, a request that got no answer at all.

A kept-alive connection may be closed by the server between two turns (an idle timeout, a
restart) in the moment the client reuses it: the request goes out and the close comes back,
with not a byte of answer. Nothing was answered, so nothing was billed: the request is sent
again on a new connection, whatever the provider's retries (`unanswered`, `resent_once`); a
new connection that the server drops so is a failing server, left to the retries. A request
whose answer had begun (its success status came) and then broke off, or whose body could not
be decoded, was answered and billed: it is never sent again, neither by our retries nor by the
SDK's (`broke_off`). An error status is a refusal, which bills nothing, whatever became of its
body: the body is read with the status, inside the HTTP client's own send, so that a body cut
short, stalled or undecodable fails as the request's transport does, streamed or not, and is
the status's error (`refused_unread`), retried as any refusal of that status. An event stream's
body reaches the SDK's decoder as valid UTF-8, a byte that is not decoded as U+FFFD as the
event-stream standard says, and, when it ended cleanly on an event with no blank line after
it, with that event kept when its data is whole JSON (`last_event_kept`); a body that goes on
after its reply's end is read for a moment, to keep its connection, and not waited on
(`drained`).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import importlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple, TypeVar

from jianmu.errors import ContextTooLongError, LLMTransientError
from jianmu.llm.in_flight import request_answered, request_sent, request_starts

__all__ = ("Refusal", "broke_off", "drained", "http_client", "last_event_kept", "read_ahead",
           "read_failed", "refused_unread", "resent_once", "silent", "timed_out", "told",
           "too_long", "unanswered")

_T = TypeVar("_T")
_ANSWERED = "jianmu.answered"  # a success status came: answered, and billed
_HEARD = "jianmu.heard"  # a status line came (its status and headers): not unanswered
_FRESH = "jianmu.fresh_connection"
# What the HTTP client raises when a connection closes or resets under a request it sent.
_BROKEN = frozenset({"RemoteProtocolError", "ReadError", "WriteError"})
_HTTPX = frozenset({"httpx", "httpx2"})
_BOM = "\ufeff".encode()
_DRAIN = 0.1  # seconds to wait for the rest of a body whose reply is whole (the OpenAI SDK's)


async def _sending(request: Any) -> None:
    """Trace the request through the connection pool (httpcore's ``trace`` extension), to
    note whether it opened a new connection rather than reusing a kept-alive one, and tell
    the call in flight when the request went out whole (`jianmu.llm.in_flight`)."""
    extensions = request.extensions
    theirs = extensions.get("trace")
    request_starts()

    async def trace(name: str, info: dict[str, Any]) -> None:
        if name.startswith(("connection.connect_tcp.", "connection.connect_unix_socket.")):
            extensions[_FRESH] = True
        elif name.endswith(".send_request_body.complete"):
            request_sent()
        if theirs is not None:
            await theirs(name, info)

    extensions["trace"] = trace


async def _heard(response: Any) -> None:
    """Mark the request of a response whose status line came: heard, and answered (billed)
    when its status is a success; an error status's body is read here, with the status."""
    extensions = response.request.extensions
    extensions[_HEARD] = (response.status_code, response.headers)
    request_answered(response.is_success, response.status_code)
    if response.is_success:
        extensions[_ANSWERED] = True
        # the SDKs' own retries obey this header when reading the answer then fails
        response.headers["x-should-retry"] = "false"
    elif response.is_error:
        # Read inside the client's send, not later by the SDK: a streamed request's error body
        # that broke off or stalled escaped the SDK as the client's bare error (it reads it
        # outside its own mapping), so a refusal that billed nothing was neither retried nor
        # passed over; here it fails as the request's transport does (`refused_unread`).
        await response.aread()


def http_client(sdk: Any, given: Any = None) -> Any:
    """The SDK's own default HTTP client (its limits, timeouts, proxies, keep-alive), with
    the hooks that mark what the server answered; or the client the user ``given``, the
    same hooks added to its own (once), so that it is resent and never resent as ours is."""
    if given is None:
        options: dict[str, Any] = {"event_hooks": {"request": [_sending],
                                                   "response": [_heard]}}
        context = _ssl_context(sdk.DefaultAsyncHttpxClient)
        if context is not None:
            options["verify"] = context
        return sdk.DefaultAsyncHttpxClient(**options)
    hooks = getattr(given, "event_hooks", None)
    if isinstance(hooks, dict):
        for name, hook in (("request", _sending), ("response", _heard)):
            if hook not in hooks.setdefault(name, []):
                hooks[name].append(hook)
        given.event_hooks = hooks
    return given


def _ssl_context(client: type) -> Any:
    """The SSL context the HTTP library of ``client`` builds by default (its CAs, the
    ``SSL_CERT_FILE``/``SSL_CERT_DIR`` it honours), built once per library and setting: each
    default client would load the CA bundle again (some 30 ms of CPU for every provider and
    every event loop a provider serves). None when the library builds none we can reuse."""
    library = next((cls.__module__.split(".", 1)[0] for cls in client.__mro__
                    if cls.__module__.split(".", 1)[0] in _HTTPX), None)
    if library is None:
        return None
    return _context_for(library, os.environ.get("SSL_CERT_FILE"),
                        os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=8)
def _context_for(library: str, cert_file: str | None, cert_dir: str | None) -> Any:
    """The default SSL context of ``library`` under these trust settings (the key of the cache:
    the library reads them from the environment as it builds the context)."""
    create = getattr(importlib.import_module(library), "create_ssl_context", None)
    return None if create is None else create()


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _transport(error: BaseException) -> bool:
    """Whether ``error`` is the HTTP client's failure to carry a request or its answer (a
    reset, a timeout, a body it could not decode; not an error status, which the SDKs raise
    as their own errors)."""
    return any(cls.__name__ == "RequestError" and cls.__module__.split(".", 1)[0] in _HTTPX
               for cls in type(error).__mro__)


def _noted(exc: BaseException, key: str) -> bool:
    """Whether the request that ``exc`` broke has ``key`` noted on it."""
    for error in _chain(exc):
        extensions = getattr(getattr(error, "request", None), "extensions", None)
        if isinstance(extensions, dict) and extensions.get(key):
            return True
    return False


def broke_off(exc: BaseException) -> bool:
    """Whether ``exc`` is the HTTP client's failure (a reset, a close, a timeout, a body it
    could not decode) under an answer the server had begun with a success status: answered
    and billed, so never to be asked again (an error status billed nothing)."""
    return any(_transport(error) for error in _chain(exc)) and _noted(exc, _ANSWERED)


def told(error: BaseException) -> str:
    """``Kind: message`` of the HTTP client's ``error``, the message the first in its chain
    that has one when its own is empty: a reset is ``ReadError: [Errno 104] Connection reset
    by peer``, not ``ReadError: `` with nothing said."""
    said = next((str(cause) for cause in _chain(error) if str(cause)), "")
    return f"{type(error).__name__}: {said}" if said else type(error).__name__


def timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` is the HTTP client's timeout (to connect, to send, to read a byte)."""
    return any(
        cls.__name__ == "TimeoutException" and cls.__module__.split(".", 1)[0] in _HTTPX
        for error in _chain(exc) for cls in type(error).__mro__)


def silent(where: str, timeout: float, *, begun: bool) -> str:
    """What a timeout of the HTTP client says: the provider's ``timeout`` is the longest wait
    for a byte (connect, send, each read), not a limit on the whole call."""
    when = "after its answer had begun (not asked again)" if begun else "before any answer"
    return (f"no byte came from {where} for {timeout:g}s, {when}: the provider's timeout is "
            "the longest wait for a byte; the whole call's limit is the agent node's "
            "(llm.timeout)")


def read_failed(exc: BaseException, where: str, timeout: float) -> LLMTransientError | None:
    """The error of the HTTP client's failure ``exc`` (a timeout, a reset) to read the body of
    an answer that had begun, when we read it rather than the SDK (which maps only its own
    reads); ``None`` when ``exc`` is none of the client's."""
    if not any(_transport(error) for error in _chain(exc)):
        return None
    if timed_out(exc):
        return LLMTransientError(silent(where, timeout, begun=True))
    return LLMTransientError(
        f"the answer from {where} broke off midway (not asked again): {told(exc)}")


def unanswered(exc: BaseException) -> bool:
    """Whether ``exc`` is a kept-alive connection that closed or reset under a request sent
    on it before any byte of answer: not a timeout (the server may be at work), a refused
    connection or a new connection the server dropped (a server failing, not a stale one)."""
    return any(type(error).__name__ in _BROKEN and _transport(error)
               for error in _chain(exc)) and not (
        _noted(exc, _HEARD) or _noted(exc, _FRESH))


# How servers say a request is longer than the model's context: OpenAI's
# context_length_exceeded ("maximum context length"), vLLM's and OpenRouter's too, Anthropic's
# "prompt is too long", llama.cpp's "exceeds the available context size"
_TOO_LONG = re.compile(r"context[_ ]length|maximum context|context (?:size|window)|"
                       r"prompt is too long|too many (?:input )?tokens", re.IGNORECASE)


def too_long(status: int, said: str, text: str) -> ContextTooLongError | None:
    """The error of an error ``status`` whose message ``said`` the request was longer than the
    model's context (or a 413: too large), its text ``text`` and what to do; else None."""
    if status != 413 and not (status == 400 and _TOO_LONG.search(said)):
        return None
    error = ContextTooLongError(
        f"{text}; the conversation is longer than the model's context: send less "
        "(history=[trim_history(max_tokens=...)]) and run again")
    error.status_code = status
    return error


class Refusal(NamedTuple):
    """An error status whose body could not be read (`refused_unread`)."""

    status: int
    headers: Any  # the response's headers (a ``Retry-After``...)
    said: str  # what became of its body, in place of the server's message


def refused_unread(exc: BaseException, timeout: float) -> Refusal | None:
    """The error status of ``exc``, the HTTP client's failure to read (cut short, stalled,
    undecodable) the body of an answer whose error status came: a refusal, which billed
    nothing; ``None`` when ``exc`` is no such failure."""
    if not any(_transport(error) for error in _chain(exc)):
        return None
    for error in _chain(exc):
        extensions = getattr(getattr(error, "request", None), "extensions", None)
        heard = extensions.get(_HEARD) if isinstance(extensions, dict) else None
        if heard is not None and heard[0] >= 400:
            if timed_out(exc):
                said = f"no byte of its body came for {timeout:g}s"
            else:
                cause = next((e for e in _chain(exc) if _transport(e)), exc)
                how = ("could not be decoded" if type(cause).__name__ == "DecodingError"
                       else "broke off")
                said = f"its body {how}: {told(cause)}"
            return Refusal(heard[0], heard[1], said)
    return None


async def resent_once(attempt: Callable[[], Awaitable[_T]]) -> _T:
    """``await attempt()``, and once more at once when it failed `unanswered` (a kept-alive
    connection the server had closed)."""
    try:
        return await attempt()
    except Exception as exc:
        if not unanswered(exc):
            raise
    return await attempt()


def last_event_kept(stream: Any) -> None:
    """Have ``stream`` (the SDK's event stream, not read yet) give the last event of a body
    that ended cleanly without the blank line that ends an event, when its data is whole JSON;
    and read its body as UTF-8 with each byte that is not one decoded as U+FFFD.

    The SDKs' decoders drop such an event, as the event-stream standard says of one cut off;
    but servers and proxies that end their stream so (no ``[DONE]``, no trailing blank line)
    sent it whole, and it is the one with the finish reason or ``message_stop``: the reply,
    answered and billed, was lost as incomplete. Data that is not whole JSON stays dropped (a
    stream cut off mid-event), and a body that broke off gets no end at all. The decoders
    decode each line strictly: half a character (older llama.cpp builds streamed a character
    split between two tokens) failed the reply with a bare ``UnicodeDecodeError``, where the
    standard decodes it as a replacement character and reads on."""
    response = getattr(stream, "response", None)
    read = getattr(stream, "_iter_events", None)
    if response is None or read is None:  # an SDK that reads its events otherwise
        return
    body = response.aiter_bytes
    ended = False

    async def with_end(*args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
        nonlocal ended
        # incremental: a character split between two chunks is whole again, not replaced
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        async for chunk in body(*args, **kwargs):
            yield utf8.decode(chunk).encode()
        ended = True  # cleanly: what the decoders still hold is the server's last event
        # a blank line (after a CR too: the first LF may end a CRLF), after the half character
        # the body may have ended on
        yield utf8.decode(b"", final=True).encode() + b"\n\n"

    async def events() -> AsyncIterator[Any]:
        async for sse in read():
            if ended and not _whole_json(sse.data):
                continue
            yield sse

    response.aiter_bytes = with_end
    stream._iter_events = events


async def drained(stream: Any) -> None:
    """Read, unread, what is left of the body of ``stream`` (the SDK's event stream, its reply
    whole) for a moment: its end, usually on the wire already, so that its connection goes
    back to the pool. A body that goes on past its reply's end (a server or proxy that keeps
    the stream open, or sends pings after it) is left, and closed with its connection: the
    turn does not wait on it for the read timeout, nor fail when it breaks."""
    response = getattr(stream, "response", None)
    body = getattr(response, "stream", None)
    if body is None or getattr(response, "is_closed", True):
        return
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_DRAIN):
            async for _ in body:
                pass


def _whole_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def read_ahead(response: Any, *, events: bool = False) -> Any:
    """``response``'s body stream, able to read its start ahead (``await first()``, ``await
    lead()``) and give it again: put back as ``response.stream``, the SDK reads it whole.

    With ``events`` (an event stream, sent uncompressed), a byte order mark before its first
    event is dropped, as the event-stream standard says: the SDKs' decoders keep it, and the
    first line's field name with it (``\ufeffdata``), so the first event was lost unseen."""
    package = type(response).__module__.split(".", 1)[0]  # httpx2, or httpx for older SDKs
    library = sys.modules[package]
    encoding = response.headers.get("content-encoding", "").strip().lower()
    return _read_ahead_type(library.AsyncByteStream)(
        response.stream, events and encoding in ("", "identity"), _decoding(library, encoding))


def _decoding(library: Any, encoding: str) -> Callable[[bytes], bytes]:
    """What decodes the start of a body sent with ``encoding`` (gzip, deflate...): the
    HTTP ``library``'s own decoders, through a response of those bytes, as it decodes the
    body itself (a start cut short decodes as far as it goes)."""
    if encoding in ("", "identity"):
        return bytes
    headers = {"content-encoding": encoding}
    return lambda raw: bytes(library.Response(200, headers=headers, content=raw).read())


@functools.cache
def _read_ahead_type(base: type) -> type:
    """The read-ahead stream, of the HTTP client's own stream type (which it checks)."""

    class ReadAhead(base):  # type: ignore[misc, valid-type]
        def __init__(self, stream: Any, bom: bool = False,
                     decode: Callable[[bytes], bytes] = bytes) -> None:
            self._stream = stream
            self._rest = stream.__aiter__()
            self._first: bytes | None = None  # not read yet; its start once `lead` read on
            self._bom = bom  # drop a byte order mark that starts the first chunk
            self._decode = decode  # the body's content encoding undone

        @property
        def seen(self) -> bytes:
            """What was read ahead, decoded as far as it goes (``b""`` before)."""
            try:
                return self._decode(self._first or b"")
            except Exception:  # not the encoding it says: nothing to show
                return b""

        async def first(self) -> bytes:
            if self._first is None:
                first = bytes(await anext(self._rest, b""))
                self._first = first.removeprefix(_BOM) if self._bom else first
            return bytes(self._first)

        async def lead(self) -> bytes:
            """The body's first byte that is not white space, decoded (``b""`` when it has
            none), reading ahead as far as it takes: a compressed body's first raw byte says
            nothing of its text, and a proxy may send white space to keep the connection
            alive while the model works."""
            start = await self.first()
            while True:
                try:
                    text = self._decode(start).lstrip()
                except Exception:  # not of its encoding, or one that decodes only whole
                    return b""  # (zstd): the SDK reads it, as it comes, and says what it is
                if text:
                    return text[:1]
                more = await anext(self._rest, None)
                if more is None:
                    return b""
                start = self._first = start + bytes(more)

        async def whole(self) -> bytes:
            """The whole body, decoded."""
            start = await self.first()
            return self._decode(start + b"".join([bytes(chunk) async for chunk in self._rest]))

        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield await self.first()
            async for chunk in self._rest:
                yield chunk

        async def aclose(self) -> None:
            await self._stream.aclose()

    return ReadAhead
