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


def test_connections_accepted_on_it_send_without_nagles_delay() -> None:
    """asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto says TCP; a connection
    accepted on the listener had proto 0, and each reply's body waited for the client's
    delayed ACK (some 40 ms a request on a kept-alive connection)."""
    import asyncio

    listener = bind_listener("127.0.0.1", 0)
    nodelay: list[int] = []

    async def main() -> None:
        seen = asyncio.Event()

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            nodelay.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()
            seen.set()

        server = await asyncio.start_server(accepted, sock=listener)
        async with server:
            port = listener.getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            await seen.wait()
            writer.close()

    asyncio.run(asyncio.wait_for(main(), 30))
    assert nodelay and nodelay[0] != 0
