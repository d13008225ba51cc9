"""Start stdio MCP servers (``python SCRIPT ARGS``, the official SDK) without their imports.

An MCP client starts its stdio server as a command, and each Python server spends ~1 s of CPU
importing the SDK. `stdio_command` gives a command for the client to start instead: a tiny
launcher (``_stdio_launcher.py``, standard library, no site) that asks this test process to
fork ``python SCRIPT ARGS`` from a `ForkServer` that imported the SDK once, on the launcher's
stdin, stdout and stderr. The server is still a process of its own (its pid, environment and
folder); the launcher forwards SIGTERM/SIGINT to it and exits as it did. Tests about the
server's process itself (its pid, its group, a kill) keep ``sys.executable``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from tests.support.forked import ForkedProcess, ForkServer
from tests.support.forked_mcp import fork_server

__all__ = ("stdio_command", "stdio_kwargs")

LAUNCHER = str(Path(__file__).with_name("_stdio_launcher.py"))

_relay: list[str | None] = []
_starting = threading.Lock()


def stdio_command(*args: str) -> tuple[str, list[str]]:
    """``(command, args)`` that run ``python ARGS`` as a stdio server, forked pre-imported
    where the relay can run (else plainly ``sys.executable, ARGS``)."""
    with _starting:
        if not _relay:
            _relay.append(_start())
        path = _relay[0]
    if path is None:
        return sys.executable, list(args)
    return sys.executable, ["-I", "-S", LAUNCHER, path, *args]


def stdio_kwargs(*args: str) -> dict[str, Any]:
    """`stdio_command` as ``command=`` and ``args=`` keywords (`MCPClient`, `MCPToolProvider`)."""
    command, argv = stdio_command(*args)
    return {"command": command, "args": argv}


def _start() -> str | None:
    repo = str(Path(__file__).resolve().parents[2])  # a server importing jianmu gets ours
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [repo, os.environ.get("PYTHONPATH")])))
    server = fork_server(env)  # the HTTP servers' one (tests.mcp.helpers.child_env's startup)
    if server is None:
        return None
    folder = tempfile.mkdtemp(prefix="jianmu-stdio-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "relay")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    threading.Thread(target=_accept, args=(listener, server), name="stdio-relay",
                     daemon=True).start()
    return path


def _accept(listener: socket.socket, server: ForkServer) -> None:
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=_serve, args=(connection, server), daemon=True).start()


def _serve(connection: socket.socket, server: ForkServer) -> None:
    """Fork the launcher's server on its descriptors; tell it the pid, then the exit code."""
    with connection:
        data, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
        try:
            request = json.loads(data)
            process = server.spawn(request["argv"], env=request["env"], cwd=request["cwd"],
                                   stdin=fds[0], stdout=fds[1], stderr=fds[2])
        finally:
            for fd in fds:
                os.close(fd)
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):  # the launcher or server gone
            connection.send(json.dumps({"pid": process.pid}).encode())
            threading.Thread(target=_end_with, args=(connection, process), daemon=True).start()
            code = process.wait()
            connection.send(json.dumps({"code": code}).encode())


def _end_with(connection: socket.socket, process: ForkedProcess) -> None:
    """(a thread) SIGKILL the server once its launcher is gone: a client that killed the
    launcher's group (the SDK's last resort) would else wait for the server's stdout forever."""
    with contextlib.suppress(OSError):
        connection.recv(1)  # the launcher sends nothing: this returns when it ends
    process.kill()
