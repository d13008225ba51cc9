"""A real OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script, for tests.

Usage::

    from tests.support.fake_openai import FakeOpenAIServer, FakeReply

    with FakeOpenAIServer([
        [{"name": "read_file", "arguments": {"path": "a.txt"}}],   # a tool-call turn
        "The file says hello.",                                      # a final answer
    ]) as server:
        llm = OpenAIProvider("fake-model", base_url=server.base_url, retry_backoff=0)
        ...
        assert server.tool_names(0) == ["read_file"]   # tools sent with request 0
        assert server.requests[1]["messages"][-1]["role"] == "tool"

Script entries, consumed one per ``POST /v1/chat/completions``:

- ``str``: a final answer;
- ``list`` of ``{"name", "arguments", "id"?}`` dicts: one turn of (parallel) tool calls;
- `FakeReply`: text and/or tool calls with usage, finish reason, fragment size, interleaved
  fragments, a broken stream, or a raw body;
- `FakeError`: an HTTP error status with an OpenAI-style error body;
- `FakeDrop`: close the connection without answering;
- `FakeHang`: answer nothing until the server stops (for client timeouts);
- a callable taking the request body and returning one of the above.

The reply is sent as plain JSON, or as SSE chunks when the request says ``"stream": true``
(tool-call arguments split into fragments, usage in a last chunk when
``stream_options.include_usage`` is set). ``fail_next(n, status)`` and ``drop_next(n)`` put
failures in front of the script. When the script runs out the server answers 400 and records
the problem in ``problems``. Every request body is kept in ``requests``.

As a fixture: ``from tests.support.fake_openai import fake_openai`` into a conftest or test
module, then ``def test_x(fake_openai): fake_openai.add("hi")``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import pytest

__all__ = ("FakeDrop", "FakeError", "FakeHang", "FakeOpenAIServer", "FakeReply", "fake_openai")

_ERROR_TYPES = {429: "rate_limit_exceeded", 400: "invalid_request_error", 401: "auth_error"}


@dataclass(kw_only=True)
class FakeReply:
    """One scripted completion."""

    text: str | None = None
    """The assistant's text."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """Flat calls ``{"name", "arguments" (dict or JSON text), "id" (optional)}``."""
    finish_reason: str | None = None
    """Defaults to ``tool_calls`` when there are calls, else ``stop``."""
    usage: tuple[int, int] | None = None
    """``(prompt_tokens, completion_tokens)``; estimated from characters when ``None``."""
    chunk_size: int = 4
    """Characters per streamed text or arguments fragment."""
    interleave: bool = False
    """Stream the calls' argument fragments round-robin instead of one call after another."""
    break_after: int | None = None
    """When streaming, drop the connection after this many chunks."""
    raw: dict[str, Any] | None = None
    """A complete JSON body to send as is (non-streamed requests)."""


@dataclass(kw_only=True)
class FakeError:
    """An HTTP error reply."""

    status: int
    """The status code, e.g. 429, 500, 400."""
    message: str = "scripted failure"
    """The ``error.message`` of the body."""
    retry_after: float | None = None
    """A ``Retry-After`` header, in seconds."""


@dataclass(kw_only=True)
class FakeDrop:
    """Close the connection without any answer (a reset, as the client sees it)."""


@dataclass(kw_only=True)
class FakeHang:
    """Hold the request unanswered until the server stops (the client should time out)."""


_Special = (FakeReply, FakeError, FakeDrop, FakeHang)
ScriptItem = (
    str | list[dict[str, Any]] | FakeReply | FakeError | FakeDrop | FakeHang | Callable[..., Any]
)


class FakeOpenAIServer:
    """An OpenAI-compatible chat server on a free port of 127.0.0.1, run in a thread.

    Args:
        script: replies, consumed in order (see the module docstring).
        model: the model name it reports.
    """

    def __init__(self, script: Iterable[ScriptItem] = (), *, model: str = "fake-model") -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        """Every chat-completion request body, in arrival order."""
        self.headers: list[dict[str, str]] = []
        """The headers of those requests."""
        self.problems: list[str] = []
        """Requests the server could not answer from the script."""
        self._script: deque[ScriptItem] = deque(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        """Start serving; returns self."""
        if self._server is not None:
            raise RuntimeError("FakeOpenAIServer is already running")
        self._stopping.clear()
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        # The poll interval bounds how long stop() waits for the serving loop to notice.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
            name="fake-openai", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._server is None:
            return
        self._stopping.set()  # releases requests held by FakeHang
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give a client: ``http://127.0.0.1:<port>/v1``."""
        if self._server is None:
            raise RuntimeError("FakeOpenAIServer is not running; use it as a context manager")
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    # -- scripting ---------------------------------------------------------------------------

    def add(self, *items: ScriptItem) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(items)

    def fail_next(
        self, n: int = 1, status: int = 429, message: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Answer the next ``n`` requests with HTTP ``status`` before the script resumes."""
        text = message or f"scripted {status} failure"
        with self._lock:
            for _ in range(n):
                self._script.appendleft(
                    FakeError(status=status, message=text, retry_after=retry_after)
                )

    def drop_next(self, n: int = 1) -> None:
        """Close the connection of the next ``n`` requests without answering."""
        with self._lock:
            for _ in range(n):
                self._script.appendleft(FakeDrop())

    @property
    def remaining(self) -> int:
        """Replies left in the script."""
        with self._lock:
            return len(self._script)

    def tool_names(self, index: int = -1) -> list[str]:
        """Names of the tools sent with request ``index``."""
        tools = self.requests[index].get("tools") or []
        return [t["function"]["name"] for t in tools]

    # -- answering (server thread) -----------------------------------------------------------

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> ScriptItem | None:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if not self._script:
                self.problems.append(
                    f"no scripted reply left for request #{len(self.requests) - 1}"
                )
                return None
            item = self._script.popleft()
        while callable(item) and not isinstance(item, _Special):
            item = item(body)
        return item

    def _new_id(self) -> str:
        with self._lock:
            self._ids += 1
            return f"call_{self._ids}"

    def _reply(self, item: str | list[dict[str, Any]] | FakeReply) -> FakeReply:
        if isinstance(item, str):
            return FakeReply(text=item)
        if isinstance(item, list):
            return FakeReply(tool_calls=item)
        return item

    def _calls(self, reply: FakeReply) -> list[dict[str, Any]]:
        out = []
        for call in reply.tool_calls:
            args = call.get("arguments", {})
            out.append({
                "id": call.get("id") or self._new_id(),
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            })
        return out

    def _usage(self, body: dict[str, Any], reply: FakeReply, calls: list[dict[str, Any]]) -> dict:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = len(json.dumps(body.get("messages", []))) // 4
            completion = (len(reply.text or "") + len(json.dumps(calls)) * bool(calls)) // 4 + 1
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def completion(self, body: dict[str, Any], reply: FakeReply) -> dict[str, Any]:
        """The JSON body of a non-streamed reply."""
        if reply.raw is not None:
            return reply.raw
        calls = self._calls(reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop"),
                "logprobs": None,
            }],
            "usage": self._usage(body, reply, calls),
        }

    def chunks(self, body: dict[str, Any], reply: FakeReply) -> list[dict[str, Any]]:
        """The SSE chunks of a streamed reply."""
        calls = self._calls(reply)
        size = max(1, reply.chunk_size)
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        text = reply.text or ""
        deltas += [{"content": text[i : i + size]} for i in range(0, len(text), size)]
        fragments: list[list[dict[str, Any]]] = []
        for index, call in enumerate(calls):
            args = call["function"]["arguments"]
            head = {"index": index, "id": call["id"], "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""}}
            tail = [{"index": index, "function": {"arguments": args[i : i + size]}}
                    for i in range(0, len(args), size)]
            fragments.append([head, *tail])
        if reply.interleave:
            while any(fragments):
                for frags in fragments:
                    if frags:
                        deltas.append({"tool_calls": [frags.pop(0)]})
        else:
            deltas += [{"tool_calls": [f]} for frags in fragments for f in frags]
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        base = {"id": f"chatcmpl-fake-{len(self.requests)}", "object": "chat.completion.chunk",
                "created": 0, "model": self.model}
        out = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
               for d in deltas]
        out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append({**base, "choices": [], "usage": self._usage(body, reply, calls)})
        return out


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.0"  # one request per connection: no keep-alive bookkeeping

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request")
        self._json(status, {"error": {"message": message, "type": kind, "code": None}}, headers)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._json(200, {"object": "list", "data": [
                {"id": self.fake.model, "object": "model", "created": 0, "owned_by": "fake"}]})
        else:
            self._error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self.fake.problems.append(f"unexpected POST {self.path}")
            self._error(404, f"no route POST {self.path}")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(400, "request body is not JSON")
            return
        try:
            item = self.fake._next(body, dict(self.headers.items()))
            if isinstance(item, (str, list, FakeReply)):
                reply = self.fake._reply(item)
                payload: Any = (self.fake.chunks(body, reply) if body.get("stream")
                                else self.fake.completion(body, reply))
        except Exception as exc:  # a broken script: tell the test, do not kill the thread
            self.fake.problems.append(f"script error: {type(exc).__name__}: {exc}")
            self._error(400, f"FakeOpenAIServer: {self.fake.problems[-1]}")
            return
        if item is None:
            self._error(400, f"FakeOpenAIServer: {self.fake.problems[-1]}")
        elif isinstance(item, FakeHang):
            self.fake._stopping.wait()
            self.close_connection = True
        elif isinstance(item, FakeDrop):
            self.close_connection = True  # the client sees the server disconnect
        elif isinstance(item, FakeError):
            extra = {} if item.retry_after is None else {"Retry-After": f"{item.retry_after:g}"}
            self._error(item.status, item.message, extra)
        elif isinstance(item, (str, list, FakeReply)):
            if body.get("stream"):
                self._stream(payload, reply.break_after)
            else:
                self._json(200, payload)
        else:
            self.fake.problems.append(f"script error: cannot answer with {item!r}")
            self._error(400, f"FakeOpenAIServer: {self.fake.problems[-1]}")

    def _stream(self, chunks: list[dict[str, Any]], break_after: int | None) -> None:
        pieces = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        pieces.append(b"data: [DONE]\n\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        # A declared length makes an early close a broken body, not a normal end.
        self.send_header("Content-Length", str(sum(len(p) for p in pieces)))
        self.end_headers()
        for i, piece in enumerate(pieces):
            if break_after is not None and i >= break_after:
                self.close_connection = True
                return
            self.wfile.write(piece)
            self.wfile.flush()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A running `FakeOpenAIServer` with an empty script; add replies with ``.add()``."""
    with FakeOpenAIServer() as server:
        yield server
