"""`LocalSandbox`: a child process with real limits, inside bubblewrap where it is installed.

Layers, each used where this machine allows it:

- always: its own session and process group, ``setrlimit`` (CPU seconds, file size, address
  space when no memory control group binds, processes for non-root users), a private temporary
  folder as ``HOME`` and ``TMPDIR``, and a minimal environment (no host secrets);
- a control group per command (root, or a delegated cgroup): ``pids.max``, a memory limit whose
  OOM kills are counted, a CPU quota, and a way to kill every process the command started;
- bubblewrap: a read-only view of ``/``, the workspace bound writable at its own path, private
  ``/tmp``, ``/proc`` and ``/dev``, new user/pid/ipc/uts namespaces, no capabilities, and no
  network when ``network=False``: no network namespace access, and the usual homes of host
  Unix sockets (``/run``, ``/var/run``, ``/var/tmp``, ``/dev/shm``) hidden behind empty
  private folders, since a socket file stays connectable through a read-only mount.

When the command's main process exits, or at its timeout, whatever it left running is killed.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from jianmu.constraints import DEFAULT_TIMEOUT_S
from jianmu.errors import SandboxError, SandboxUnavailableError
from jianmu.execution._cgroup import (
    CommandCgroup,
    cgroup_support,
    create_cgroup,
    sweep_stale_cgroups,
)
from jianmu.execution._output import (
    DEFAULT_OUTPUT_LIMIT,
    CappedBuffer,
    normalise_argv,
    relative_cwd,
)
from jianmu.execution.sandbox import ExecResult

__all__ = ("LocalSandbox", "bwrap_available")

_DRAIN_SECONDS = 1.0  # after a kill, how long to read what is left in the pipes
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")


@cache
def _bwrap_works(network: bool) -> str | None:
    """Run a trivial command under the flags we use; return the error, or None if it works."""
    path = shutil.which("bwrap")
    if path is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    argv = [path, *_BWRAP_BASE, *([] if network else ["--unshare-net"]), "--", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to run: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot create namespaces here: {done.stderr.decode(errors='replace')}"
    return None


def bwrap_available(*, network: bool = True) -> bool:
    """Whether bubblewrap is installed and can create its namespaces on this machine."""
    return _bwrap_works(network) is None


_BWRAP_BASE = (
    "--ro-bind", "/", "/",
    "--dev", "/dev",
    "--proc", "/proc",
    "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
    "--die-with-parent", "--new-session", "--cap-drop", "ALL",
)


_SOCKET_ROOTS = ("/run", "/var/run", "/var/tmp", "/dev/shm")
"""Where host Unix sockets usually live (besides ``/tmp``, always private): hidden behind an
empty tmpfs when the network is off. ``/var/run`` is skipped when it is a link (to ``/run``)."""


def _private_roots(network: bool) -> list[str]:
    """The folders replaced by empty private ones inside bubblewrap (``/tmp`` first)."""
    roots = ["/tmp"]
    if not network:
        roots += [
            root for root in _SOCKET_ROOTS
            if root == "/dev/shm" or (os.path.isdir(root) and not os.path.islink(root))
        ]
    return roots


def _hidden_by_private_roots(search_path: str, roots: Sequence[str] = ("/tmp",)) -> list[str]:
    """Folders the sandbox needs that the private ``roots`` would hide: this Python's install
    and the ``PATH`` entries that live under one of them (a virtualenv in a checkout in
    ``/tmp`` or ``/var/tmp``, say), to be bound back read-only."""
    wanted = [sys.prefix, sys.base_prefix, *search_path.split(os.pathsep)]
    prefixes = tuple(root.rstrip("/") + "/" for root in roots)
    found: list[str] = []
    for folder in wanted:
        real = os.path.realpath(folder) if folder else ""
        for path in (folder, real):
            if path.startswith(prefixes) and os.path.isdir(path) and path not in found:
                found.append(path)
    return found


class _Handle:
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
class _Outcome:
    exit_code: int
    stdout: CappedBuffer
    stderr: CappedBuffer
    timed_out: bool
    duration: float
    oom_kills: int


class LocalSandbox:
    """Runs commands as local child processes under resource limits (and bubblewrap).

    Without bubblewrap a command runs as you, with your file permissions and network: only the
    limits, the private temporary folder, the clean environment and the clean-up apply. Check
    `isolation` for what is enforced on this machine.

    Args:
        workspace: Host folder the commands work in; created if missing. Defaults to cwd.
        network: ``False`` cuts the network (needs bubblewrap).
        use_bwrap: ``None`` uses bubblewrap when it works here; ``True`` requires it.
        memory_mb: Memory limit of one command, in MiB.
        cpus: CPU share of one command (needs a cpu control group).
        pids: Processes one command may have at once.
        cpu_seconds: CPU-time limit; default: the timeout times the number of cores, plus one.
        file_size_mb: Largest file a command may write, in MiB.
        timeout: Default timeout of `exec`, in seconds.
        output_limit: Bytes kept of each of stdout and stderr.
        env: Variables added to every command's environment.

    Raises:
        SandboxUnavailableError: ``network=False`` or ``use_bwrap=True`` without a working
            bubblewrap, or a ``pids`` limit that nothing here can enforce (root without a
            writable pids control group).
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        *,
        network: bool = True,
        use_bwrap: bool | None = None,
        memory_mb: int | None = None,
        cpus: float | None = None,
        pids: int | None = None,
        cpu_seconds: int | None = None,
        file_size_mb: int = 1024,
        timeout: float = DEFAULT_TIMEOUT_S,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        for label, value in (("memory_mb", memory_mb), ("cpus", cpus), ("pids", pids),
                             ("cpu_seconds", cpu_seconds), ("file_size_mb", file_size_mb),
                             ("timeout", timeout), ("output_limit", output_limit)):
            if value is not None and value <= 0:
                raise ValueError(f"{label} must be positive, got {value!r}")
        self.workspace = Path(workspace if workspace is not None else Path.cwd()).absolute()
        self.network = network
        self.memory_mb, self.cpus, self.pids = memory_mb, cpus, pids
        self.cpu_seconds, self.file_size_mb = cpu_seconds, file_size_mb
        self.timeout, self.output_limit = timeout, output_limit
        self.env = dict(env or {})
        problem = _bwrap_works(network) if use_bwrap is not False else "use_bwrap=False"
        if use_bwrap and problem:
            raise SandboxUnavailableError(f"use_bwrap=True but {problem}")
        if not network and problem:
            raise SandboxUnavailableError(
                "network: false needs bubblewrap or Docker to cut the network, and "
                f"neither is usable here ({problem}); install bubblewrap "
                "(apt-get install bubblewrap) or use mode: docker"
            )
        self.uses_bwrap = problem is None
        support = cgroup_support()
        self._controllers = support.controllers if support else frozenset()
        if pids is not None and os.geteuid() == 0 and "pids" not in self._controllers:
            raise SandboxUnavailableError(
                f"pids={pids!r} cannot be enforced: RLIMIT_NPROC does not bind root and no "
                "pids control group is writable here; run as a non-root user or use mode: docker"
            )
        self._tmp: Path | None = None
        self._running: set[_Handle] = set()

    @property
    def isolation(self) -> dict[str, Any]:
        """What this sandbox really enforces here, for logs and tests."""
        return {
            "bwrap": self.uses_bwrap,
            "network": self.network,
            "cgroup": sorted(self._controllers),
            "memory": "cgroup" if "memory" in self._controllers else "rlimit_as",
        }

    async def start(self) -> None:
        """Create the workspace and the private temporary folder; idempotent."""
        if self._tmp is not None:
            return
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._tmp = Path(tempfile.mkdtemp(prefix="jianmu-sandbox-"))
        await anyio.to_thread.run_sync(sweep_stale_cgroups)

    async def close(self) -> None:
        """Kill running commands and remove the private temporary folder; idempotent."""
        for handle in list(self._running):
            handle.cancel()
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(tmp, ignore_errors=True))

    async def __aenter__(self) -> LocalSandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        stdin: str | bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run ``command`` and wait for it; see `Sandbox.exec`.

        Raises:
            ValueError: an empty command, or ``cwd`` outside the workspace or missing.
            SandboxError: the process could not be started.
        """
        argv = normalise_argv(command)
        rel = relative_cwd(cwd)
        timeout = self.timeout if timeout is None else timeout
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        await self.start()
        assert self._tmp is not None
        workdir = self.workspace / rel
        if not workdir.is_dir():
            raise ValueError(
                f"cwd {cwd!r} is not a folder in the workspace {str(self.workspace)!r}"
            )
        data = stdin.encode() if isinstance(stdin, str) else stdin
        spawn = self._spawn_args(argv, workdir, env, timeout)
        handle = _Handle()
        self._running.add(handle)
        try:
            outcome = await anyio.to_thread.run_sync(
                _run, spawn, data, timeout, self.output_limit, handle, abandon_on_cancel=True
            )
        except BaseException:
            # Cancelled from outside (a runner's timeout): kill now, or as soon as the process
            # exists if the thread is still starting it; the thread cleans up after itself.
            handle.cancel()
            raise
        finally:
            self._running.discard(handle)
        return self._result(outcome, timeout)

    def _spawn_args(
        self, argv: list[str], workdir: Path, env: Mapping[str, str] | None, timeout: float
    ) -> dict[str, Any]:
        assert self._tmp is not None
        home = "/tmp" if self.uses_bwrap else str(self._tmp)
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": home,
            "TMPDIR": home,
            **self.env,
            **(env or {}),
        }
        if self.uses_bwrap:
            bwrap = shutil.which("bwrap") or "bwrap"
            roots = _private_roots(self.network)
            # Order matters: bwrap mounts in argument order, so the private roots come first,
            # then what must show through them (Python, PATH entries), the workspace last (it
            # may itself live under one of the roots).
            argv = [
                bwrap, *_BWRAP_BASE, *([] if self.network else ["--unshare-net"]),
                "--bind", str(self._tmp), "/tmp",
                *(arg for root in roots[1:] for arg in ("--tmpfs", root)),
                *(arg for path in _hidden_by_private_roots(full_env["PATH"], roots)
                  for arg in ("--ro-bind", path, path)),
                "--bind", str(self.workspace), str(self.workspace),
                "--chdir", str(workdir), "--", *argv,
            ]
        cpu_seconds = self.cpu_seconds or math.ceil(timeout * (os.cpu_count() or 1)) + 1
        memory = self.memory_mb * 1024 * 1024 if self.memory_mb else None
        limits = [
            (resource.RLIMIT_CPU, cpu_seconds),
            (resource.RLIMIT_FSIZE, self.file_size_mb * 1024 * 1024),
        ]
        if memory is not None and "memory" not in self._controllers:
            limits.append((resource.RLIMIT_AS, memory))
        if self.pids is not None and os.geteuid() != 0:
            # RLIMIT_NPROC counts every task of the user, so allow for the ones already running.
            limits.append((resource.RLIMIT_NPROC, _user_tasks() + self.pids))
        return {
            "argv": argv, "env": full_env, "cwd": str(workdir), "limits": limits,
            "cgroup": {"pids": self.pids, "memory_bytes": memory, "cpus": self.cpus},
        }

    def _result(self, outcome: _Outcome, timeout: float) -> ExecResult:
        stderr = outcome.stderr.text()
        oom = outcome.oom_kills > 0
        if (not oom and self.memory_mb and "memory" not in self._controllers
                and outcome.exit_code != 0 and any(m in stderr for m in _MEMORY_MARKERS)):
            oom = True  # the address-space rlimit made an allocation fail
        notes = []
        if outcome.timed_out:
            notes.append(f"killed at its timeout of {timeout:g} s")
        if oom:
            notes.append(f"killed for going past its memory limit of {self.memory_mb} MiB")
        if notes:
            stderr += ("\n" if stderr and not stderr.endswith("\n") else "") + "".join(
                f"[jianmu sandbox: {n}]\n" for n in notes
            )
        return ExecResult(
            exit_code=outcome.exit_code,
            stdout=outcome.stdout.text(),
            stderr=stderr,
            timed_out=outcome.timed_out,
            duration=outcome.duration,
            oom_killed=oom,
            truncated=bool(outcome.stdout.dropped or outcome.stderr.dropped),
        )


def _user_tasks() -> int:
    """Count the tasks (threads included) of this real user, as RLIMIT_NPROC does."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


def _make_preexec(
    procs_files: list[str], limits: list[tuple[int, int]]
) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child between fork and exec: keep it to syscalls
        for name in procs_files:
            fd = os.open(name, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # "0" moves the writing process itself
            finally:
                os.close(fd)
        for which, value in limits:
            resource.setrlimit(which, (value, value))

    return preexec


def _run(
    spawn: dict[str, Any], data: bytes | None, timeout: float, limit: int, handle: _Handle
) -> _Outcome:
    """Start the process and collect its output in this worker thread."""
    group: CommandCgroup | None = create_cgroup(**spawn["cgroup"])
    start = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(
                spawn["argv"], stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=spawn["cwd"],
                env=spawn["env"], start_new_session=True,
                preexec_fn=_make_preexec(group.procs_files if group else [], spawn["limits"]),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"could not start {spawn['argv'][0]!r}: {exc}") from exc

        def kill(wait: float = 1.0) -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if group is not None:
                group.kill_all(wait=wait)

        handle.attach(kill)
        with proc:
            out, err, timed_out = _collect(proc, data, start + timeout, limit, kill)
            exit_code = proc.wait()
        return _Outcome(
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
