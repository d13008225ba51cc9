"""A real HTTP server on 127.0.0.1 that answers every GET with one body and keeps each
request's path: tests that must fetch nothing (a remote ``$ref``), count requests, or follow
a redirect (``/go?to=URL``)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ("counting_server",)


@contextmanager
def counting_server(
    body: bytes, content_type: str | None = None, *, hits: list[str] | None = None,
    redirects: bool = False,
) -> Iterator[tuple[int, list[str]]]:
    """Serve ``body`` on a free port of 127.0.0.1; yields the port and the paths requested
    (appended to ``hits`` when given: servers may share one list). With ``redirects``, a
    path holding ``to=URL`` answers 302 to that URL."""
    seen: list[str] = [] if hits is None else hits

    class Counted(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if redirects and "to=" in self.path:
                self.send_response(302)
                self.send_header("Location", self.path.split("to=", 1)[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counted)
    # shutdown() waits for the loop to look at its flag, which it does once a poll: the
    # default 0.5 s poll cost each test half a second in teardown
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1], seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
