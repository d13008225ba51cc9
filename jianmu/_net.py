"""A listening socket bound before a server says where it serves."""

from __future__ import annotations

import socket

__all__ = ("bind_listener",)


def bind_listener(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening, for uvicorn's ``sockets=``.

    Bound here rather than by uvicorn, whose bind failure logs and exits the process: a caller
    gets an ``OSError`` naming the address, before it prints the server's URL.

    Raises:
        OSError: the address is in use, not this machine's, or the host is unknown.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # TCP named: asyncio sets TCP_NODELAY only on sockets whose proto is TCP, which accepted
    # ones take from this one; with 0, Nagle held a reply's body back for the client's delayed
    # ACK, some 40 ms per request on a kept-alive connection
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        # as uvicorn does: a restarted server rebinds at once past TIME_WAIT
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # listening before the caller prints its URL: a client that connects at once waits in
        # the backlog until the server accepts, instead of being refused (uvicorn listens again)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        shown = f"[{host}]" if ":" in host else host
        raise OSError(exc.errno, f"cannot listen on {shown}:{port}: "
                                 f"{exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock
