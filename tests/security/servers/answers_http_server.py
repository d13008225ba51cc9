"""A streamable-HTTP MCP server whose answer to ``tools/call`` misbehaves, run in a thread.

Plain HTTP/1.1 and JSON-RPC by hand (not the SDK's server, which answers as it should): one
tool, ``flood``; each call is answered as ``mode`` says — ``plain`` (a short result),
``padded`` (the result after `PADDING` bytes of JSON whitespace), ``endless`` (whitespace
until the client hangs up), ``gzip`` (a short result, compressed whatever was asked),
``events`` (an event stream of log notifications, each well within the SDK's bound of an
event, until the client hangs up) or ``trickle`` (the same, an event every 10 ms). The
server keeps the ``Accept-Encoding`` each call came with. ``answering(mode, tools=[...])``
lists those tools instead.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PADDING = 4 << 20
TOOL = {"name": "flood", "description": "Answers.", "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass  # quiet

    def do_GET(self) -> None:
        self._send(405, b"", "text/plain")

    def do_DELETE(self) -> None:
        self._send(200, b"", "text/plain")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        if "id" not in message:  # a notification
            self._send(202, b"", "text/plain")
            return
        method = message["method"]
        if method == "initialize":
            result: Any = {"protocolVersion": message["params"]["protocolVersion"],
                           "capabilities": {"tools": {}},
                           "serverInfo": {"name": "answers", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": self.server.tools}
        elif method == "tools/call":
            self.server.encodings.append(self.headers.get("Accept-Encoding"))
            self._answer(message["id"])
            return
        else:
            result = None
        body = {"jsonrpc": "2.0", "id": message["id"]}
        body.update({"result": result} if result is not None else
                    {"error": {"code": -32601, "message": "unknown method"}})
        self._send(200, json.dumps(body).encode(), "application/json")

    def _answer(self, call_id: Any) -> None:
        text = json.dumps({"jsonrpc": "2.0", "id": call_id, "result": {
            "content": [{"type": "text", "text": "answered"}]}}).encode()
        mode = self.server.mode
        if mode == "gzip":
            self._send(200, gzip.compress(text), "application/json", gzip=True)
        elif mode == "padded":
            self._send(200, b" " * PADDING + text, "application/json")
        elif mode == "endless":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b" " * (64 << 10)
            framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
            try:
                while not self.server.stopped.is_set():
                    self.wfile.write(framed)
            except OSError:  # the client hung up: what a bound should make it do
                self.server.hung_up.set()
        elif mode in ("events", "trickle"):
            self._notify_on(pause=0.01 if mode == "trickle" else 0.0)
        else:
            self._send(200, text, "application/json")

    def _notify_on(self, pause: float) -> None:
        """Log notifications without end, as an event stream: never the answer."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "info", "data": "x" * (16 << 10)}})
        event = f"data: {note}\n\n".encode()
        framed = b"%x\r\n%s\r\n" % (len(event), event)
        try:
            while not self.server.stopped.is_set():
                self.wfile.write(framed)
                self.wfile.flush()
                if pause:
                    self.server.stopped.wait(pause)
        except OSError:  # the client hung up: what a bound should make it do
            self.server.hung_up.set()

    def _send(self, status: int, body: bytes, kind: str, *, gzip: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("mcp-session-id", "s1")
        if gzip:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str, tools: list[dict[str, Any]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode, self.tools = mode, tools
        self.encodings: list[str | None] = []
        self.stopped = threading.Event()
        self.hung_up = threading.Event()


@contextmanager
def answering(mode: str, tools: list[dict[str, Any]] | None = None) -> Iterator[_Server]:
    """The server, listening on a free port of 127.0.0.1 (``server.server_address``)."""
    server = _Server(mode, [TOOL] if tools is None else tools)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopped.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
