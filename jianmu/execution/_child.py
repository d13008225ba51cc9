"""One command as a child process: its own session, rlimits, a control group, capped output.

`run_child` runs in a worker thread: it starts the process (the control group joined, its own
IPC namespace and the seccomp filter taken, the rlimits set between fork and exec, then the
user dropped), feeds stdin, reads both pipes under the cap, and kills the whole group at the
deadline or when the main process exits, so nothing it started in the background outlives
it. A `ChildHandle` lets the event loop kill it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from jianmu.errors import SandboxError
from jianmu.execution._cgroup import CgroupNest, CommandCgroup
from jianmu.execution._harden import SeccompFilter, unshare_ipc
from jianmu.execution._output import CappedBuffer

__all__ = ("ChildHandle", "ChildOutcome", "ChildSpec", "run_child")

_DRAIN_SECONDS = 1.0  # after a kill, how long to read what is left in the pipes


@dataclass(frozen=True, kw_only=True)
class ChildSpec:
    """How to start one command."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    limits: list[tuple[int, int]]
    """``(resource, value)`` pairs set as both soft and hard rlimits."""
    user: tuple[int, int] | None = None
    """``(uid, gid)`` the child drops to, or ``None`` to stay who we are."""
    pids: int | None = None
    memory_bytes: int | None = None
    cpus: float | None = None
    """The control group's limits, where control groups are usable."""
    nest: CgroupNest | None = None
    """The sandbox's group the command's group is made in; ``None``: no control group."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors the child inherits (folders that bubblewrap mounts read-only)."""
    own_ipc: bool = False
    """Whether the child takes an IPC namespace of its own (root, no bubblewrap)."""
    seccomp: SeccompFilter | None = None
    """The filter the child loads itself (no bubblewrap to load it)."""


class ChildHandle:
    """Lets the event loop kill a command that a worker thread is starting or running."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kill: Callable[[float], None] | None = None
        self.cancelled = False

    def attach(self, kill: Callable[[float], None]) -> None:
        """Called by the thread once the process exists; kills it if already cancelled."""
        with self._lock:
            self._kill = kill
            cancelled = self.cancelled
        if cancelled:
            kill(0.2)

    def cancel(self) -> None:
        """Kill the command now, or as soon as it has started."""
        with self._lock:
            self.cancelled = True
            kill = self._kill
        if kill is not None:
            kill(0.2)


@dataclass(frozen=True, kw_only=True)
class ChildOutcome:
    """What a finished command left: its exit code, output and how it ended."""

    exit_code: int
    stdout: CappedBuffer
    stderr: CappedBuffer
    timed_out: bool
    duration: float
    oom_kills: int


def _make_preexec(
    procs_files: list[str], limits: list[tuple[int, int]], user: tuple[int, int] | None = None,
    *, own_ipc: bool = False, seccomp: SeccompFilter | None = None,
) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child between fork and exec: keep it to syscalls
        for name in procs_files:
            fd = os.open(name, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # "0" moves the writing process itself
            finally:
                os.close(fd)
        if own_ipc:
            unshare_ipc()
        if seccomp is not None:
            seccomp.install()
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        if user is not None:  # last: joining the control group needs root
            uid, gid = user
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)  # from root to a user: every capability goes too

    return preexec


def run_child(
    spec: ChildSpec, data: bytes | None, timeout: float, limit: int, handle: ChildHandle
) -> ChildOutcome:
    """Start the process and collect its output in this worker thread."""
    group: CommandCgroup | None = None if spec.nest is None else spec.nest.command(
        pids=spec.pids, memory_bytes=spec.memory_bytes, cpus=spec.cpus
    )
    start = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(
                spec.argv, stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=spec.cwd,
                env=spec.env, start_new_session=True, pass_fds=spec.pass_fds,
                preexec_fn=_make_preexec(
                    group.procs_files if group else [], spec.limits, spec.user,
                    own_ipc=spec.own_ipc, seccomp=spec.seccomp,
                ),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"could not start {spec.argv[0]!r}: {exc}") from exc

        def kill(wait: float = 1.0) -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if group is not None:
                group.kill_all(wait=wait)

        handle.attach(kill)
        with proc:
            out, err, timed_out = _collect(proc, data, start + timeout, limit, kill)
            exit_code = proc.wait()
        return ChildOutcome(
            exit_code=exit_code, stdout=out, stderr=err, timed_out=timed_out,
            duration=time.monotonic() - start,
            oom_kills=group.oom_kills() if group else 0,
        )
    finally:
        if group is not None:
            group.remove()


def _collect(
    proc: subprocess.Popen[bytes], data: bytes | None, deadline: float, limit: int,
    kill: Callable[[float], None],
) -> tuple[CappedBuffer, CappedBuffer, bool]:
    """Feed stdin, read both pipes under the cap, and kill at the deadline or at exit."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = CappedBuffer(limit), CappedBuffer(limit)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    pending = memoryview(data or b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE, None)
    pidfd: int | None = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    timed_out = exited = False
    drain_until: float | None = None
    try:
        while any(k.data is out or k.data is err for k in sel.get_map().values()):
            now = time.monotonic()
            if drain_until is None and (exited or now >= deadline):
                timed_out = not exited
                kill(1.0)  # at the timeout, or leftovers after the main process exited
                drain_until = now + _DRAIN_SECONDS
            if drain_until is not None and now >= drain_until:
                break  # a process outside our reach holds the pipe open
            wait = (drain_until if drain_until is not None else deadline) - now
            if pidfd is None:
                wait = min(wait, 0.02)
            for key, _mask in sel.select(max(wait, 0)):
                if key.data == "exit":
                    exited = True
                    sel.unregister(key.fileobj)
                elif key.data is None:
                    try:
                        written = os.write(key.fd, pending[:65536])
                    except BlockingIOError:
                        written = 0
                    except BrokenPipeError:
                        written = len(pending)  # the command stopped reading: drop the rest
                    pending = pending[written:]
                    if not pending:
                        sel.unregister(key.fileobj)
                        proc.stdin.close()  # type: ignore[union-attr]
                else:
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        key.data.write(chunk)
                    else:
                        sel.unregister(key.fileobj)
            if pidfd is None and not exited and proc.poll() is not None:
                exited = True
        if not exited and proc.poll() is None:
            # Pipes closed but the process lives on (it closed its stdout): wait for it.
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                timed_out = True
        kill(1.0)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
    return out, err, timed_out
