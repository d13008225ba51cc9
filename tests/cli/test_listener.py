"""The socket `jianmu studio` and `jianmu mcp serve --transport http` serve on listens before
they print their URL: a client that connects at once (a script that waited for the URL line)
waits in the backlog for the server, instead of being refused before it starts."""

from __future__ import annotations

import socket

from jianmu._net import bind_listener
from tests.support.studio import free_port


def test_a_client_connecting_as_the_url_is_printed_is_not_refused() -> None:
    port = free_port()
    listener = bind_listener("127.0.0.1", port)
    try:
        # no server accepts yet: the connection waits in the backlog (it was refused)
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
    finally:
        listener.close()
