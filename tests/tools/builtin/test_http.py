"""Tests for jianmu/tools/builtin/http.py against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from jianmu.errors import ToolInputError
from jianmu.tools.builtin import HTTPTool
from jianmu.tools.calls import ToolResult

pytestmark = pytest.mark.anyio

BIG = 3_000_000


class _Handler(BaseHTTPRequestHandler):
    release: threading.Event
    served_bytes: list[int]

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/json":
            self._send(200, json.dumps({"hello": "world"}).encode())
        elif self.path == "/slow":
            # Answers only when the test lets it, long after the client's timeout.
            self.release.wait(30)
            self._send(200, b"late")
        elif self.path == "/big":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(BIG))
            self.end_headers()
            sent = 0
            try:
                while sent < BIG:
                    self.wfile.write(b"x" * 65536)
                    sent += 65536
            except OSError:
                pass  # the client stopped reading, as it should
            self.served_bytes.append(sent)
        elif self.path == "/image":
            self._send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "image/png")
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/json")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(404, b"no such page", "text/plain")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        echo = {
            "content_type": self.headers.get("Content-Type"),
            "x_test": self.headers.get("X-Test"),
            "body": json.loads(body) if body else None,
        }
        self._send(201, json.dumps(echo).encode())


@pytest.fixture
def server() -> Iterator[str]:
    release = threading.Event()
    handler = type("Handler", (_Handler,), {"release": release, "served_bytes": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


async def test_get_json(server: str) -> None:
    out = await HTTPTool().execute({"url": f"{server}/json"})
    head, body = out.split("\n\n", 1)
    assert head.splitlines()[0] == "HTTP 200 OK"
    assert "content-type: application/json" in head
    assert json.loads(body) == {"hello": "world"}


async def test_post_json_sets_the_content_type(server: str) -> None:
    out = await HTTPTool().execute(
        {
            "method": "POST",
            "url": f"{server}/echo",
            "headers": {"X-Test": "yes"},
            "body": json.dumps({"n": 1}),
        }
    )
    head, body = out.split("\n\n", 1)
    assert head.startswith("HTTP 201 Created")
    assert json.loads(body) == {
        "content_type": "application/json", "x_test": "yes", "body": {"n": 1},
    }


async def test_404_is_a_response_not_a_failure(server: str) -> None:
    out = await HTTPTool().execute({"url": f"{server}/missing"})
    assert out.startswith("HTTP 404 Not Found")
    assert out.endswith("\n\nno such page")


async def test_redirect_is_followed(server: str) -> None:
    out = await HTTPTool().execute({"url": f"{server}/redirect"})
    assert out.startswith("HTTP 200 OK\nfinal-url: ")
    assert out.endswith('{"hello": "world"}')


async def test_slow_response_past_the_timeout_is_a_failed_result(server: str) -> None:
    with anyio.fail_after(20):
        result = await HTTPTool().execute({"url": f"{server}/slow", "timeout": 0.5})
    assert isinstance(result, ToolResult) and not result.ok
    assert result.error is not None and "timed out after 0.5s" in result.error


async def test_body_over_the_cap_is_cut_and_not_downloaded(server: str) -> None:
    tool = HTTPTool(max_body_bytes=10_000)
    out = await tool.execute({"url": f"{server}/big"})
    head, body = out.split("\n\n", 1)
    assert head.startswith("HTTP 200 OK")
    assert body.startswith("x" * 10_000)
    assert body[10_000:] == (
        f"\n…[body cut: only the first 10,000 bytes of {BIG:,} were read]"
    )


async def test_binary_body_is_not_dumped(server: str) -> None:
    out = await HTTPTool().execute({"url": f"{server}/image"})
    assert out.endswith("[binary body of 108 bytes (image/png) not shown]")


async def test_refused_connection_is_a_failed_result() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port now.
    result = await HTTPTool().execute({"url": f"http://127.0.0.1:{port}/", "timeout": 5})
    assert isinstance(result, ToolResult) and not result.ok
    assert result.error is not None and "could not connect" in result.error
    assert ToolResult.from_raw("http_request", result, call_id="c1").call_id == "c1"


async def test_dns_failure_is_a_failed_result() -> None:
    with anyio.fail_after(30):
        result = await HTTPTool().execute({"url": "http://no-such-host.invalid/", "timeout": 5})
    assert isinstance(result, ToolResult) and not result.ok
    assert result.error is not None and "no-such-host.invalid" in result.error


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.com/x", "javascript:alert(1)", "example.com/x", ""],
)
async def test_other_schemes_are_refused(url: str) -> None:
    with pytest.raises(ToolInputError, match="only http:// and https://"):
        await HTTPTool().execute({"url": url})


async def test_bad_method_and_timeout() -> None:
    with pytest.raises(ToolInputError):
        await HTTPTool().execute({"url": "http://127.0.0.1/", "method": "BREW"})
    with pytest.raises(ToolInputError):
        await HTTPTool().execute({"url": "http://127.0.0.1/", "timeout": 500})
    with pytest.raises(ToolInputError, match="no host name"):
        await HTTPTool().execute({"url": "http:///path"})


async def test_metadata_matches_the_issue() -> None:
    tool = HTTPTool()
    assert tool.category == "communicate" and tool.effect_tags == ("http",)
    assert tool.parallel_safe is True and tool.max_retries == 0
    tool.check_definition(require_parameter_descriptions=True)
