"""Run a ``jianmu`` command to its end as ``subprocess.run`` would, without paying its imports.

A fresh ``python -m jianmu.cli`` spends ~0.3 s of CPU importing (~1 s with DBOS) before it does
anything, and the suite runs hundreds. `run_jianmu` asks a fork server (`cli_forkserver`, one
per test process and startup environment, started at first use) for a process forked after
those imports: still a process of its own, with its own pid, folder, environment,
descriptors and exit status, running ``jianmu.cli`` as ``__main__``.

A command whose environment Python reads differently at startup (``PYTHON*``, locale, ``TMPDIR``
variables other than the server's) gets a server of its own; where no server can run, or the
imports printed anything (a warning the command would print each time), it runs as a plain
subprocess.
"""

from __future__ import annotations

import atexit
import json
import locale
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ("DURABLE", "run_jianmu")

DURABLE = ("jianmu.durable",)
"""What durable commands (``--app``, ``worker``) import besides the CLI: DBOS among it."""

_SERVER = Path(__file__).with_name("cli_forkserver.py")
_STARTUP = ("PYTHON", "LC_", "LANG", "TMPDIR")
"""Prefixes of the variables Python reads when it starts: a server serves one set of them."""


@dataclass
class _Server:
    process: subprocess.Popen[bytes]
    socket_path: str
    usable: bool


_servers: dict[tuple[object, ...], _Server] = {}
_starting = threading.Lock()  # tests run commands from several threads at once


def run_jianmu(args: Sequence[str], *, cwd: str | os.PathLike[str], env: dict[str, str],
               input: str | None = None, timeout: float = 90,
               preload: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """``python -m jianmu.cli ARGS`` in ``cwd`` with ``env``, to its end; text out and err.

    ``preload`` names more modules for the server to import (``dbos`` for durable commands).
    """
    server = _server(env, tuple(preload))
    if server is None:
        return subprocess.run(
            [sys.executable, "-m", "jianmu.cli", *args], cwd=cwd, env=env,
            input=input if input is not None else "", capture_output=True, text=True,
            timeout=timeout)
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:
        stdin.write((input or "").encode(locale.getpreferredencoding(False)))
        stdin.seek(0)
        status = _fork(server, [stdin.fileno(), out.fileno(), err.fileno()],
                       {"args": list(args), "cwd": str(Path(cwd).resolve()), "env": env},
                       args, timeout, out, err)
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "jianmu.cli", *args], status, _text(out), _text(err))


def _fork(server: _Server, fds: list[int], request: dict[str, object], args: Sequence[str],
          timeout: float, out: object, err: object) -> int:
    """Have the server run ``request``; its return code as ``subprocess`` gives it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(server.socket_path)
        body = json.dumps(request).encode()
        socket.send_fds(conn, [b"R"], fds)
        conn.sendall(struct.pack("!I", len(body)) + body)
        pid = struct.unpack("!q", _exactly(conn, 8))[0]
        conn.settimeout(timeout)
        try:
            status = struct.unpack("!q", _exactly(conn, 8))[0]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            conn.settimeout(30)
            _exactly(conn, 8)
            raise subprocess.TimeoutExpired(
                [sys.executable, "-m", "jianmu.cli", *args], timeout,
                _text(out), _text(err)) from None
    return os.waitstatus_to_exitcode(status)


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise RuntimeError("the jianmu fork server closed the connection")
        data += chunk
    return data


def _text(file: object) -> str:
    """A file's bytes as ``subprocess.run(text=True)`` decodes them."""
    file.seek(0)  # type: ignore[attr-defined]
    data: bytes = file.read()  # type: ignore[attr-defined]
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _server(env: dict[str, str], preload: tuple[str, ...]) -> _Server | None:
    """The server for this startup environment and these modules; started at first use."""
    if not hasattr(socket, "send_fds") or not hasattr(os, "fork"):
        return None
    startup = tuple(sorted((k, v) for k, v in env.items() if k.startswith(_STARTUP)))
    key = (startup, preload)
    with _starting:
        server = _servers.get(key)
        if server is None:
            server = _servers[key] = _start(env, preload)
    if not server.usable or server.process.poll() is not None:
        return None
    return server


def _start(env: dict[str, str], preload: tuple[str, ...]) -> _Server:
    folder = tempfile.mkdtemp(prefix="jianmu-forks-")
    path = os.path.join(folder, "s")
    startup = {k: v for k, v in env.items() if k.startswith(_STARTUP)}
    server_env = {k: v for k, v in os.environ.items() if not k.startswith(_STARTUP)}
    server_env.update(startup)
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            [sys.executable, str(_SERVER), path, *preload], cwd=folder, env=server_env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        atexit.register(_stop, process)
        assert process.stdout is not None
        ready = process.stdout.readline() == b"ready\n"
        err.seek(0)
        quiet = not err.read()
    return _Server(process, path, usable=ready and quiet)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Close the server's stdin: it exits (its commands' processes go on to their end)."""
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
