"""Start ``python SCRIPT ARGS`` MCP servers (the official SDK) without paying its imports.

Importing the MCP SDK's server side costs a fresh interpreter ~1 s of CPU, more than anything
a test server then does. `start_server` forks the script from a `ForkServer` that imported
the SDK once (one per test process, started at first use): still a process of its own, with
its pid, environment, folder and exit, that a test can kill and start again. Where no fork
server can run (or its imports printed anything), it is a plain `subprocess.Popen`.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from tests.support.forked import ForkServer

__all__ = ("fork_server", "start_server")

SDK = (
    "mcp.server.mcpserver", "mcp.server.lowlevel", "mcp.server.streamable_http_manager",
    "uvicorn.lifespan.on", "uvicorn.protocols.http.auto", "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto", "anyio._backends._asyncio", "rich.logging",
)
"""What an SDK server imports before it serves over HTTP (stdio needs a part of it)."""

_STARTUP = ("PYTHON", "LC_", "LANG")
"""Prefixes of the variables Python reads when it starts: a server serves one set of them."""

_servers: dict[tuple[tuple[str, str], ...], ForkServer | None] = {}
_starting = threading.Lock()


def start_server(args: Sequence[str], *, env: Mapping[str, str],
                 cwd: str | os.PathLike[str]) -> Any:
    """``python ARGS`` in ``cwd`` with ``env``, its output thrown away; a `subprocess.Popen`
    or a `tests.support.forked.ForkedProcess` (the same ``poll``, ``wait``, ``kill``)."""
    server = fork_server(env)
    if server is None:
        return subprocess.Popen([sys.executable, *args], env=dict(env), cwd=cwd,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        return server.spawn(list(args), env=env, cwd=os.path.abspath(cwd), stdout=devnull,
                            stderr=devnull)
    finally:
        os.close(devnull)  # the child holds its own copy


def fork_server(env: Mapping[str, str]) -> ForkServer | None:
    """The server for this startup environment (``PYTHONPATH`` among it); started at first use."""
    key = tuple(sorted((k, v) for k, v in env.items() if k.startswith(_STARTUP)))
    with _starting:
        if key not in _servers:
            _servers[key] = _start(dict(key))
        server = _servers[key]
    return server if server is not None and server.alive else None


def _start(startup: dict[str, str]) -> ForkServer | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STARTUP)}
    env.update(startup)
    try:
        server = ForkServer(SDK, env=env)
    except (OSError, RuntimeError):
        return None
    atexit.register(server.close)
    return server if server.quiet else None
