"""Start Python processes forked from a server that has imported their modules once.

A fresh interpreter that runs a ``jianmu`` command, a durable worker or a test script spends
most of its CPU importing (~0.3 s for the CLI, ~1.2 s with DBOS), and the suite starts
hundreds. `ForkServer` starts one process that imports the given modules, then forks one child
per `ForkServer.spawn`. Each child is still a process of its own: its own pid (and, if asked,
session), descriptors 0-2, folder, environment, ``sys.argv`` and ``sys.path[0]`` as
``python SCRIPT ARGS`` or ``python -m MODULE ARGS`` sets them; it runs the script or module as
``__main__`` and leaves through the interpreter's own exit (threads joined, ``atexit`` run,
streams flushed). Signals, exit codes and ``-N`` for a signal are those of `subprocess.Popen`,
whose calls the tests make `ForkedProcess` offers.

What the child shares with the server is what a fresh interpreter holds after the same imports,
so only modules that read no per-process setting at import may be preloaded (a test app that
reads its environment is imported by each child), and the server refuses to serve if its
imports started a thread (a fork keeps only the calling one). Variables Python reads when it
starts (``PYTHON*``, locale) are the server's: give each set its own server.

Run as ``forked.py FD MODULE[:NAME,...]...`` it is the server, speaking JSON over the socket FD.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ("ForkServer", "ForkedProcess", "shared_server")

_MESSAGE = 1 << 20


class ForkedProcess:
    """The `subprocess.Popen` calls the tests make, for a process a `ForkServer` started."""

    def __init__(self, server: ForkServer, pid: int, argv: list[str],
                 stdout: IO[str] | None) -> None:
        self._server = server
        self.pid = pid
        self.args = argv
        self.stdout = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code (-N for signal N), or None while it runs."""
        self.returncode = self._server._exit_code(self.pid, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; `subprocess.TimeoutExpired` after ``timeout`` seconds."""
        code = self._server._exit_code(self.pid, timeout=timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.returncode = code
        return code

    def send_signal(self, sig: int) -> None:
        """Signal the process (not its group), unless it has ended."""
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the process."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM the process."""
        self.send_signal(signal.SIGTERM)


class ForkServer:
    """A process that has imported ``preload`` (each ``module`` or ``module:name,name``, the
    names loaded too), started with ``env`` in ``cwd``; see the module docstring."""

    def __init__(self, preload: Sequence[str], *, env: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with tempfile.TemporaryFile() as said:
            self._proc = subprocess.Popen(
                [sys.executable, __file__, str(theirs.fileno()), *preload],
                env=dict(env if env is not None else os.environ), cwd=cwd,
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=said)
            theirs.close()
            ready = ours.recv(_MESSAGE)
            said.seek(0)
            printed = said.read().decode(errors="replace")
        if ready != b'{"ready": true}':
            ours.close()
            self._proc.wait()
            raise RuntimeError(f"the fork server did not start: {printed or ready!r}")
        self.quiet = not printed
        """Whether the imports printed nothing (a warning each cold start would print)."""
        self._sock = ours
        self._lock = threading.Lock()  # one spawn at a time: its reply is the next pid
        self._exits: dict[int, int] = {}
        self._pids: list[int] = []
        self._changed = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="fork-server", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        """Whether the server still answers."""
        return not self._closed and self._proc.poll() is None

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str],
              cwd: str | os.PathLike[str], stdin: int | None = None,
              stdout: int | None = None, stderr: int | None = None,
              new_session: bool = False) -> ForkedProcess:
        """Fork a process running ``argv`` (``[SCRIPT, *ARGS]`` or ``["-m", MODULE, *ARGS]``)
        with ``env`` in ``cwd``. Its stdin is ``stdin`` (a descriptor; else /dev/null), its
        stdout ``stdout`` (else a pipe: the handle's ``stdout``), its stderr ``stderr`` (else
        where its stdout goes); ``new_session`` as `subprocess.Popen`'s ``start_new_session``."""
        fds: list[int] = []
        read = None
        try:
            fds.append(stdin if stdin is not None else os.open(os.devnull, os.O_RDONLY))
            if stdout is None:
                read, write = os.pipe()
                fds.append(write)
            else:
                fds.append(stdout)
            fds.append(stderr if stderr is not None else fds[1])
            request = json.dumps({"argv": list(argv), "env": dict(env), "cwd": str(cwd),
                                  "new_session": new_session}).encode()
            with self._lock, self._changed:
                count = len(self._pids)
                socket.send_fds(self._sock, [request], fds)
                if not self._changed.wait_for(lambda: len(self._pids) > count or self._closed,
                                              timeout=60):
                    raise RuntimeError("the fork server did not answer")
                if len(self._pids) <= count:
                    raise RuntimeError("the fork server is gone")
                pid = self._pids[count]
        except BaseException:
            if read is not None:
                os.close(read)
            raise
        finally:  # the child holds its own copies: a pipe ends when it exits
            if stdin is None and fds:
                os.close(fds[0])
            if read is not None:
                os.close(fds[1])
        return ForkedProcess(self, pid, list(argv),
                             open(read, encoding="utf-8") if read is not None else None)

    def run(self, argv: Sequence[str], *, env: Mapping[str, str],
            cwd: str | os.PathLike[str], input: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` to its end, as ``subprocess.run(capture_output=True, text=True)``
        would (``input`` its stdin, else an empty one); killed after ``timeout`` seconds."""
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, \
                tempfile.TemporaryFile() as err:
            given.write((input or "").encode())
            given.seek(0)
            process = self.spawn(argv, env=env, cwd=cwd, stdin=given.fileno(),
                                 stdout=out.fileno(), stderr=err.fileno())
            try:
                code = process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise subprocess.TimeoutExpired(
                    argv, timeout or 0, _text(out), _text(err)) from None
            return subprocess.CompletedProcess(list(argv), code, _text(out), _text(err))

    def _exit_code(self, pid: int, timeout: float | None) -> int | None:
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
        """Stop the server; it SIGKILLs the processes still running."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # a close alone would not end the reader's recv
        self._sock.close()
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_STARTUP = ("PYTHON", "LC_", "LANG")
"""Prefixes of the variables Python reads when it starts: a server serves one set of them."""

_shared: dict[tuple[object, ...], ForkServer | None] = {}
_starting = threading.Lock()  # tests start processes from several threads at once


def shared_server(preload: Sequence[str], env: Mapping[str, str]) -> ForkServer | None:
    """This test process's server of ``preload`` for the startup variables of ``env`` (each
    set its own), started at first use and stopped at exit; None where none can run or its
    imports printed anything (a warning each cold start would print): start the process
    plainly then."""
    startup = {k: v for k, v in env.items() if k.startswith(_STARTUP)}
    key = (tuple(sorted(startup.items())), tuple(preload))
    with _starting:
        if key not in _shared:
            _shared[key] = _start_shared(startup, tuple(preload))
        server = _shared[key]
    return server if server is not None and server.alive else None


def _start_shared(startup: dict[str, str], preload: tuple[str, ...]) -> ForkServer | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STARTUP)}
    env.update(startup)
    try:
        server = ForkServer(preload, env=env)
    except (OSError, RuntimeError):
        return None
    atexit.register(server.close)
    return server if server.quiet else None


def _text(file: IO[bytes]) -> str:
    """A file's bytes as ``subprocess.run(text=True)`` decodes them."""
    file.seek(0)
    return file.read().decode().replace("\r\n", "\n").replace("\r", "\n")


# -- the server process ---------------------------------------------------------------------------

def _reap(sock: socket.socket, children: dict[int, bool]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.pop(pid, None)
        with contextlib.suppress(OSError):
            sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}
                                 ).encode())


def _serve(sock: socket.socket) -> dict[str, Any] | None:
    """Fork on each request; returns the request in the child, None in the server at EOF."""
    server = os.getpid()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select through the fd
    signal.set_wakeup_fd(wake_write)
    children: dict[int, bool] = {}  # pid: whether in a session of its own
    try:
        sock.send(b'{"ready": true}')
        while True:
            ready, _, _ = select.select([sock, wake_read], [], [])
            if wake_read in ready:
                os.read(wake_read, 4096)
                _reap(sock, children)
            if sock not in ready:
                continue
            data, fds, _, _ = socket.recv_fds(sock, _MESSAGE, 3)
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
                request["fds"] = fds
                return dict(request)
            for fd in fds:
                os.close(fd)
            children[pid] = bool(request["new_session"])
            sock.send(json.dumps({"pid": pid}).encode())
    finally:
        if os.getpid() == server:  # the server ending: its processes end with it
            for pid, own_session in children.items():
                with contextlib.suppress(OSError):
                    (os.killpg if own_session else os.kill)(pid, signal.SIGKILL)
            for pid in children:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
    return None


def _become(request: dict[str, Any]) -> str | None:
    """In the child: the session, streams, folder, environment and argv of ``python SCRIPT``;
    for ``python -m MODULE``, the module's name."""
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
    for fd in set(request["fds"]):
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # read from TMPDIR again, as a new process would
    argv = list(request["argv"])
    if argv[0] == "-m":  # the folder first on the path; the module run only as __main__
        sys.argv = ["-m", *argv[2:]]
        sys.path[0] = os.getcwd()
        module, _, name = argv[1].rpartition(".")
        if sys.modules.pop(argv[1], None) is not None and module in sys.modules:
            delattr(sys.modules[module], name)  # else runpy warns that it was imported
        return str(argv[1])
    sys.argv = argv
    sys.path[0] = str(Path(argv[0]).resolve().parent)
    return None


def _preload(specs: list[str]) -> None:
    import gc
    import importlib

    for spec in specs:  # `module` or `module:name,name` (Jianmu's names load when used)
        module, _, names = spec.partition(":")
        try:
            loaded = importlib.import_module(module)
        except ImportError:  # not installed here: a process that needs it fails as it would
            continue
        for name in filter(None, names.split(",")):
            getattr(loaded, name)
    if threading.active_count() != 1:
        raise SystemExit(f"the imports started threads: {threading.enumerate()}")
    # what the imports made lives as long as each child: out of the collector's sight, a
    # child's collections neither walk it nor write to its pages (copying them from the
    # server's), which was half of a short child's CPU
    gc.freeze()


if __name__ == "__main__":
    import runpy

    sys.path[0] = str(Path(__file__).resolve().parents[2])  # the repository, not support/
    _preload(sys.argv[2:])
    job = _serve(socket.socket(fileno=int(sys.argv[1])))
    if job is None:
        raise SystemExit(0)
    main_module = _become(job)
    del job
    if main_module is None:
        runpy.run_path(sys.argv[0], run_name="__main__")
    else:
        runpy.run_module(main_module, run_name="__main__", alter_sys=True)
