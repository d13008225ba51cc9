"""A real Anthropic Messages API server on 127.0.0.1 that answers from a script, for tests.

Usage::

    from tests.support.fake_anthropic import FakeAnthropicServer, FakeMessage

    with FakeAnthropicServer([
        [{"name": "read_file", "input": {"path": "a.txt"}}],   # a tool_use turn
        "The file says hello.",                                 # a final answer
    ]) as server:
        llm = AnthropicProvider("claude-test", base_url=server.base_url)
        ...
        assert server.requests[1]["messages"][-1]["content"][0]["type"] == "tool_result"

Script entries, consumed one per ``POST /v1/messages``:

- ``str``: a final answer;
- ``list`` of ``{"name", "input", "id"?}`` dicts: one turn of (parallel) ``tool_use`` blocks;
- `FakeMessage`: text and/or tool calls with usage (cache reads and writes), stop reason,
  fragment size, a broken stream, or an ``error`` event midway;
- `FakeError`: an HTTP error status with an Anthropic error body (``overloaded_error`` for
  529, ``rate_limit_error`` for 429...);
- `FakeDrop`: close the connection without answering;
- a callable taking the request body and returning one of the above.

Replies are the recorded shapes of the Messages API: a ``message`` JSON body, or with
``"stream": true`` the SSE events ``message_start``, ``content_block_start``, ``ping``,
``content_block_delta`` (``text_delta``, ``input_json_delta``), ``content_block_stop``,
``message_delta`` and ``message_stop``. Like the real API the server refuses (400, before the
script is consulted) a request without ``max_tokens``, turns that do not alternate, a
``tool_use`` not answered by a ``tool_result`` in the next user turn, and a tool whose
``input_schema`` is not an object schema (``tools.N.custom.input_schema: ...``). Every request
body is kept in ``requests``, its headers in ``headers``; problems in ``problems``.
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

__all__ = ("FakeAnthropicServer", "FakeDrop", "FakeError", "FakeMessage", "fake_anthropic")

_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 529: "overloaded_error",
}


@dataclass(kw_only=True)
class FakeMessage:
    """One scripted message."""

    text: str | None = None
    """The assistant's text block."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """``tool_use`` blocks as ``{"name", "input" (dict or JSON text), "id" (optional)}``."""
    stop_reason: str | None = None
    """Defaults to ``tool_use`` when there are calls, else ``end_turn``."""
    usage: tuple[int, int] | None = None
    """``(input_tokens, output_tokens)``; estimated from characters when ``None``."""
    cache_read: int = 0
    """``cache_read_input_tokens``."""
    cache_creation: int = 0
    """``cache_creation_input_tokens``."""
    chunk_size: int = 4
    """Characters per streamed ``text_delta`` or ``input_json_delta``."""
    break_after: int | None = None
    """When streaming, drop the connection after this many events."""
    error_after: int | None = None
    """When streaming, send an ``overloaded_error`` event after this many events."""


@dataclass(kw_only=True)
class FakeError:
    """An HTTP error reply."""

    status: int
    """The status code, e.g. 529, 429, 400."""
    message: str = "scripted failure"
    """The ``error.message`` of the body."""
    retry_after_ms: float | None = None
    """A ``retry-after-ms`` header (the SDK then waits this long instead of its backoff)."""


@dataclass(kw_only=True)
class FakeDrop:
    """Close the connection without any answer."""


_Special = (FakeMessage, FakeError, FakeDrop)
ScriptItem = str | list[dict[str, Any]] | FakeMessage | FakeError | FakeDrop | Callable[..., Any]


def _check_request(body: dict[str, Any]) -> str | None:
    """What the real API would refuse in ``body`` (its error message), or ``None``."""
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    for i, entry in enumerate(body.get("tools") or []):
        schema = entry.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return (
                f"tools.{i}.custom.input_schema: JSON schema is invalid. It must match JSON "
                "Schema draft 2020-12 (https://json-schema.org/draft/2020-12). Learn more about "
                "tool use at https://docs.claude.com/en/docs/tool-use."
            )
    messages = body.get("messages") or []
    if not messages or messages[0].get("role") != "user":
        return "messages: the first message must use the \"user\" role"
    pending: set[str] = set()
    for i, message in enumerate(messages):
        if i and message.get("role") == messages[i - 1].get("role"):
            return f"messages.{i}: roles must alternate between \"user\" and \"assistant\""
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if message["role"] == "user":
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if pending - answered:
                return (
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(sorted(pending - answered))}"
                )
            pending = set()
        else:
            if not blocks:
                return f"messages.{i}: all messages must have non-empty content"
            pending = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    return None


class FakeAnthropicServer:
    """An Anthropic Messages API server on a free port of 127.0.0.1, run in a thread.

    Args:
        script: replies, consumed in order (see the module docstring).
        model: the model name it reports.
    """

    def __init__(self, script: Iterable[ScriptItem] = (), *, model: str = "claude-fake") -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        """Every accepted request body (not the ones refused as invalid), in arrival order."""
        self.headers: list[dict[str, str]] = []
        """The headers of those requests."""
        self.problems: list[str] = []
        """Requests the server could not answer from the script."""
        self.refused: list[str] = []
        """Error messages of requests refused as invalid."""
        self._script: deque[ScriptItem] = deque(script)
        self._lock = threading.Lock()
        self._ids = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeAnthropicServer:
        """Start serving; returns self."""
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
            name="fake-anthropic", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeAnthropicServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give a client: ``http://127.0.0.1:<port>``."""
        if self._server is None:
            raise RuntimeError("FakeAnthropicServer is not running; use it as a context manager")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add(self, *items: ScriptItem) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(items)

    def fail_next(self, n: int = 1, status: int = 529, retry_after_ms: float | None = 1) -> None:
        """Answer the next ``n`` requests with HTTP ``status`` before the script resumes."""
        with self._lock:
            for _ in range(n):
                self._script.appendleft(FakeError(
                    status=status, message="Overloaded" if status == 529 else f"scripted {status}",
                    retry_after_ms=retry_after_ms,
                ))

    @property
    def remaining(self) -> int:
        """Replies left in the script."""
        with self._lock:
            return len(self._script)

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

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}_fake{self._ids:04d}"

    def reply_of(self, item: str | list[dict[str, Any]] | FakeMessage) -> FakeMessage:
        """The `FakeMessage` a script item stands for."""
        if isinstance(item, str):
            return FakeMessage(text=item)
        if isinstance(item, list):
            return FakeMessage(tool_calls=item)
        return item

    def _blocks(self, reply: FakeMessage) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            raw = call.get("input", {})
            blocks.append({
                "type": "tool_use", "id": call.get("id") or self._new_id("toolu"),
                "name": call["name"], "input": json.loads(raw) if isinstance(raw, str) else raw,
            })
        return blocks

    def _usage(self, body: dict[str, Any], reply: FakeMessage, blocks: list[Any]) -> dict:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = len(json.dumps(body.get("messages", []))) // 4
            completion = len(json.dumps(blocks)) // 4 + 1
        return {
            "input_tokens": prompt, "output_tokens": completion,
            "cache_creation_input_tokens": reply.cache_creation,
            "cache_read_input_tokens": reply.cache_read,
        }

    def message(self, body: dict[str, Any], reply: FakeMessage) -> dict[str, Any]:
        """The JSON body of a non-streamed reply."""
        blocks = self._blocks(reply)
        stop = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
        return {
            "id": self._new_id("msg"), "type": "message", "role": "assistant",
            "model": self.model, "content": blocks, "stop_reason": stop,
            "stop_sequence": None, "usage": self._usage(body, reply, blocks),
        }

    def events(self, body: dict[str, Any], reply: FakeMessage) -> list[dict[str, Any]]:
        """The SSE events of a streamed reply."""
        whole = self.message(body, reply)
        usage = whole["usage"]
        size = max(1, reply.chunk_size)
        start = {**whole, "content": [], "stop_reason": None,
                 "usage": {**usage, "output_tokens": 1}}
        out: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        for index, block in enumerate(whole["content"]):
            if block["type"] == "text":
                out.append({"type": "content_block_start", "index": index,
                            "content_block": {"type": "text", "text": ""}})
                if index == 0:
                    out.append({"type": "ping"})
                text = block["text"]
                out += [{"type": "content_block_delta", "index": index,
                         "delta": {"type": "text_delta", "text": text[i : i + size]}}
                        for i in range(0, len(text), size)]
            else:
                out.append({"type": "content_block_start", "index": index,
                            "content_block": {**block, "input": {}}})
                raw = json.dumps(block["input"]) if block["input"] else ""
                pieces = [""] + [raw[i : i + size] for i in range(0, len(raw), size)]
                out += [{"type": "content_block_delta", "index": index,
                         "delta": {"type": "input_json_delta", "partial_json": p}}
                        for p in pieces]
            out.append({"type": "content_block_stop", "index": index})
        out.append({"type": "message_delta",
                    "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]}})
        out.append({"type": "message_stop"})
        if reply.error_after is not None:
            out = out[: reply.error_after]
            out.append({"type": "error",
                        "error": {"type": "overloaded_error", "message": "Overloaded"}})
        return out


class _Handler(BaseHTTPRequestHandler):
    fake: FakeAnthropicServer
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        kind = _ERROR_TYPES.get(status, "api_error")
        self._json(status, {"type": "error", "error": {"type": kind, "message": message}},
                   headers)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self.fake.problems.append(f"unexpected POST {self.path}")
            self._error(404, f"no route POST {self.path}")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(400, "request body is not JSON")
            return
        invalid = _check_request(body)
        if invalid is not None:
            self.fake.refused.append(invalid)
            self._error(400, invalid)
            return
        try:
            item = self.fake._next(body, dict(self.headers.items()))
            if isinstance(item, (str, list, FakeMessage)):
                reply = self.fake.reply_of(item)
                payload: Any = (self.fake.events(body, reply) if body.get("stream")
                                else self.fake.message(body, reply))
        except Exception as exc:  # a broken script: tell the test, do not kill the thread
            self.fake.problems.append(f"script error: {type(exc).__name__}: {exc}")
            self._error(400, f"FakeAnthropicServer: {self.fake.problems[-1]}")
            return
        if item is None:
            self._error(400, f"FakeAnthropicServer: {self.fake.problems[-1]}")
        elif isinstance(item, FakeDrop):
            self.close_connection = True
        elif isinstance(item, FakeError):
            extra = ({} if item.retry_after_ms is None
                     else {"retry-after-ms": f"{item.retry_after_ms:g}"})
            self._error(item.status, item.message, extra)
        elif isinstance(item, (str, list, FakeMessage)):
            if body.get("stream"):
                self._stream(payload, reply.break_after)
            else:
                self._json(200, payload)
        else:
            self.fake.problems.append(f"script error: cannot answer with {item!r}")
            self._error(400, f"FakeAnthropicServer: {self.fake.problems[-1]}")

    def _stream(self, events: list[dict[str, Any]], break_after: int | None) -> None:
        pieces = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(sum(len(p) for p in pieces)))
        self.end_headers()
        for i, piece in enumerate(pieces):
            if break_after is not None and i >= break_after:
                self.close_connection = True
                return
            self.wfile.write(piece)
            self.wfile.flush()


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    """A running `FakeAnthropicServer` with an empty script; add replies with ``.add()``."""
    with FakeAnthropicServer() as server:
        yield server
