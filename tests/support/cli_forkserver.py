"""A process that imports Jianmu once, then forks one process per ``jianmu`` command.

Started by `tests.support.forked_cli` as ``python cli_forkserver.py SOCKET [MODULE ...]``. It
imports the CLI (and each MODULE), prints ``ready``, and waits for requests on the Unix socket
SOCKET. A request brings the command's stdin, stdout and stderr (as file descriptors), its
arguments, working folder and environment. For each, a
middle process forks the command's process and reports its pid, then its wait status.

The command's process is what ``python -m jianmu.cli ARGS`` would be, started in that folder
with that environment: its own pid, descriptors 0-2, ``sys.argv``, ``sys.path[0]`` (the
folder, as ``-m`` gives) and signal dispositions; it runs ``jianmu.cli`` as ``__main__`` and
leaves through the interpreter's own exit (threads joined, ``atexit`` run, streams flushed).
Only the imports are shared: every module was imported before the fork, in the same
interpreter, with the same startup environment (the client starts one server for each
distinct set of the variables Python reads at startup).

The server stops when its stdin (a pipe from the test process) closes.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import runpy
import select
import socket
import struct
import sys
import tempfile
from typing import Any


def _preload(modules: list[str]) -> None:
    """Import the CLI, each of its command modules, and ``modules``."""
    import jianmu._cli
    import jianmu.cli

    for found in pkgutil.iter_modules(jianmu._cli.__path__):
        importlib.import_module(f"jianmu._cli.{found.name}")
    for name in modules:
        importlib.import_module(name)


def _receive(conn: socket.socket) -> tuple[list[int], dict[str, Any]]:
    """One request: its three descriptors and its JSON."""
    _, fds, _, _ = socket.recv_fds(conn, 1, 3)
    size = struct.unpack("!I", _exactly(conn, 4))[0]
    return fds, json.loads(_exactly(conn, size))


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the client went away")
        data += chunk
    return data


def _serve(path: str) -> tuple[list[int], dict[str, Any]]:
    """Serve until forked into a command's process; there, return its request."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([server, sys.stdin], [], [], 1.0)
        _reap()
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            os._exit(0)  # the test process is gone
        if server not in readable:
            continue
        conn, _ = server.accept()
        if os.fork() != 0:
            conn.close()
            continue
        # the middle process: fork the command's, tell its pid, then how it ended
        server.close()
        try:
            fds, request = _receive(conn)
        except (OSError, EOFError, ValueError):
            os._exit(1)
        pid = os.fork()
        if pid == 0:
            conn.close()
            return fds, request
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(struct.pack("!q", pid))
            _, status = os.waitpid(pid, 0)
            conn.sendall(struct.pack("!q", status))
        finally:
            os._exit(0)


def _reap() -> None:
    """Wait for the middle processes that ended (their CPU time then counts as this one's)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] != 0:
            pass
    except ChildProcessError:
        pass


def _become(fds: list[int], request: dict[str, Any]) -> None:
    """Make this process the command's: descriptors, folder, environment, argv."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # read from TMPDIR again, as a new process would
    sys.path[0] = os.getcwd()
    sys.argv = ["jianmu", *request["args"]]
    # as under ``-m``, the module runs as ``__main__`` only (runpy warns if it was imported)
    sys.modules.pop("jianmu.cli", None)
    del sys.modules["jianmu"].cli


def main() -> None:
    path, modules = sys.argv[1], sys.argv[2:]
    sys.path[0] = os.getcwd()  # not this file's folder: what ``-m`` puts first
    _preload(modules)
    fds, request = _serve(path)
    _become(fds, request)
    runpy.run_module("jianmu.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
