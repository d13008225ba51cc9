"""A fork server for long-lived worker processes: the heavy imports once, a fork per worker.

A worker process spends most of its start-up CPU importing (DBOS, SQLAlchemy, psycopg,
Jianmu: ~1.2 s of ~1.5 s). `ForkServer` starts one process that imports them once; each
`ForkServer.spawn` forks it into a new session whose child then runs the script as
``python SCRIPT ARGS`` would, or the module as ``python -m MODULE ARGS`` would
(``__name__ == "__main__"``, the given environment, argv and cwd,
stdout to a pipe this process reads, stderr to a log). The worker is still a process of its
own: SIGKILL, SIGSTOP, SIGTERM and its exit code behave as for `subprocess.Popen`, whose
subset the tests use `ForkedProcess` offers.

Only modules that read no per-worker setting at import may be preloaded; the script and the
modules it imports first (the test app, which reads its environment) are imported in the child.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

_MESSAGE = 1 << 20


class ForkedProcess:
    """The `subprocess.Popen` calls the tests make, for a process the fork server started."""

    def __init__(self, server: ForkServer, pid: int, stdout: IO[str]) -> None:
        self._server = server
        self.pid = pid
        self.stdout: IO[str] | None = stdout
        self.returncode: int | None = None
        self.args = ["<forked>"]

    def poll(self) -> int | None:
        """The exit code (-N for signal N), or None while it runs."""
        self.returncode = self._server.exit_code(self.pid, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; `subprocess.TimeoutExpired` after ``timeout`` seconds."""
        code = self._server.exit_code(self.pid, timeout=timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.returncode = code
        return code

    def send_signal(self, sig: int) -> None:
        """Signal the process (not its group), unless it has been reaped."""
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the process."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM the process."""
        self.send_signal(signal.SIGTERM)


class ForkServer:
    """One pre-imported process that forks workers on request; see the module docstring."""

    def __init__(self, preload: tuple[str, ...], env: dict[str, str], cwd: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.worker_forks", str(theirs.fileno()),
             *preload],
            env=env, cwd=cwd, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, start_new_session=True,
        )
        theirs.close()
        self._sock = ours
        self._lock = threading.Lock()  # one spawn at a time: its reply is the next pid
        self._exits: dict[int, int] = {}
        self._pids: list[int] = []
        self._changed = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="fork-server", daemon=True)
        self._reader.start()

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str,
              stderr: IO[str]) -> ForkedProcess:
        """Fork a process running ``argv`` (``[SCRIPT, *ARGS]`` or ``["-m", MODULE, *ARGS]``)
        with ``env`` and ``cwd``; its stdout is the handle's, its stderr goes to ``stderr``."""
        read, write = os.pipe()
        try:
            request = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode()
            with self._lock, self._changed:
                count = len(self._pids)
                socket.send_fds(self._sock, [request], [write, stderr.fileno()])
                if not self._changed.wait_for(lambda: len(self._pids) > count or self._closed,
                                              timeout=60):
                    raise RuntimeError("the fork server did not answer")
                if self._closed:
                    raise RuntimeError("the fork server is gone")
                pid = self._pids[count]
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)  # the child holds its own copy: EOF when it exits
        return ForkedProcess(self, pid, open(read, encoding="utf-8"))

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        """``pid``'s exit code once it has exited (waiting up to ``timeout``), else None."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._closed, timeout=timeout)
            return self._exits.get(pid)

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(_MESSAGE)
            except OSError:
                data = b""
            with self._changed:
                if not data:
                    self._closed = True
                    self._changed.notify_all()
                    return
                message = json.loads(data)
                if "pid" in message:
                    self._pids.append(int(message["pid"]))
                else:
                    self._exits[int(message["exit"])] = int(message["code"])
                self._changed.notify_all()

    def close(self) -> None:
        """Stop the server; it SIGKILLs the workers still running."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # a close alone would not end the reader's recv
        self._sock.close()
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


# -- the server process ---------------------------------------------------------------------------

def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(OSError):
            sock.send(json.dumps({"exit": pid, "code": code}).encode())


def _serve(sock: socket.socket) -> dict[str, Any] | None:
    """Fork on each request; returns the request in the child, None in the server at EOF."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select through the fd
    signal.set_wakeup_fd(wake_write)
    children: set[int] = set()
    try:
        while True:
            ready, _, _ = select.select([sock, wake_read], [], [])
            if wake_read in ready:
                os.read(wake_read, 4096)
                _reap(sock, children)
            if sock not in ready:
                continue
            data, fds, _, _ = socket.recv_fds(sock, _MESSAGE, 2)
            if not data:
                break
            request = json.loads(data)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_read)
                os.close(wake_write)
                sock.close()
                os.setsid()
                request["fds"] = fds
                return dict(request)
            for fd in fds:
                os.close(fd)
            children.add(pid)
            sock.send(json.dumps({"pid": pid}).encode())
    finally:
        if os.getpid() == server_pid:  # the server ending: its workers end with it
            for pid in children:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            for pid in children:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
    return None


def _become(request: dict[str, Any]) -> str | None:
    """In the child: the streams, environment, cwd and argv of ``python SCRIPT`` (or
    ``python -m MODULE``: then the module's name)."""
    out, err = request["fds"]
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = list(request["argv"])
    if argv[0] == "-m":  # as for ``python -m MODULE``: the cwd first on the path
        sys.argv = ["-m", *argv[2:]]
        sys.path[0] = os.getcwd()
        return argv[1]
    sys.argv = argv
    sys.path[0] = str(Path(sys.argv[0]).resolve().parent)  # as for ``python SCRIPT``
    return None


server_pid = os.getpid()

if __name__ == "__main__":
    import importlib
    import runpy

    for name in sys.argv[2:]:
        try:
            importlib.import_module(name)
        except ImportError:  # not installed here: a worker that needs it fails as it would cold
            pass
    if threading.active_count() != 1:  # a fork keeps only the calling thread
        raise SystemExit(f"a preloaded module started a thread: {threading.enumerate()}")
    job = _serve(socket.socket(fileno=int(sys.argv[1])))
    if job is None:
        raise SystemExit(0)
    module = _become(job)
    del job
    if module is None:
        runpy.run_path(sys.argv[0], run_name="__main__")
    else:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
