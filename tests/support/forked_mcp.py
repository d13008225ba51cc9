"""Start ``python SCRIPT ARGS`` MCP servers (the official SDK) without paying its imports.

Importing the MCP SDK's server side costs a fresh interpreter ~1 s of CPU, more than anything
a test server then does. `start_server` forks the script from a `ForkServer` that imported
the SDK once (one per test process, started at first use): still a process of its own, with
its pid, environment, folder and exit, that a test can kill and start again. Where no fork
server can run (or its imports printed anything), it is a plain `subprocess.Popen`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from tests.support.forked import ForkServer, shared_server

__all__ = ("fork_server", "start_server")

SDK = (
    "mcp.server.mcpserver", "mcp.server.lowlevel", "mcp.server.streamable_http_manager",
    "uvicorn.lifespan.on", "uvicorn.protocols.http.auto", "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto", "anyio._backends._asyncio", "rich.logging",
)
"""What an SDK server imports before it serves over HTTP (stdio needs a part of it)."""

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
    """The SDK's server for this startup environment (``PYTHONPATH`` among it)."""
    return shared_server(SDK, env)
