"""`LocalSandbox`: a child process with real limits, inside bubblewrap where it is installed.

Layers, each used where this machine allows it:

- always: its own session and process group, ``setrlimit`` (CPU seconds, file size, address
  space when no memory control group binds, processes for non-root users), a private temporary
  folder as ``HOME`` and ``TMPDIR``, and a minimal environment (no host secrets);
- a control group per command (root, or a delegated cgroup): ``pids.max``, a memory limit whose
  OOM kills are counted, a CPU quota, and a way to kill every process the command started;
- as root: the command runs as an unprivileged uid (the workspace's owner, or nobody), with no
  capabilities, so it cannot read what only root may read; the workspace is granted to that
  uid with an ACL (see `jianmu.execution._acl`);
- bubblewrap: a minimal read-only root (``/usr``, ``/bin``, ``/lib*``, ``/sbin``, a few
  ``/etc`` files programs need, this Python's install), the workspace bound writable at its own
  path, private ``/tmp``, ``/proc`` and ``/dev``, new pid/ipc/uts (and, unless root, user)
  namespaces, no capabilities, and no network unless ``network=True``: a network namespace of
  its own, so neither TCP, abstract Unix sockets nor socket files under ``/run`` (never
  mounted) reach the host.

The network is off unless ``network=True``. When the command's main process exits, or at its
timeout, whatever it left running is killed: the pid namespace dies with its first process,
and the control group is emptied.
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
from jianmu.execution._acl import grant_tree, sandbox_user
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
from jianmu.execution._safe_env import safe_git_env
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
    as_user = (_NOBODY, _NOBODY) if os.geteuid() == 0 else None
    if as_user is not None and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing: as root, bwrap needs it to drop to a user"
    argv = [path, *_bwrap_flags(network, as_user), *_minimal_root(os.environ.get("PATH", "")),
            "--", *_drop_to(as_user), "true"]
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


_NOBODY = 65534
_NAMESPACES = (
    "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
    "--die-with-parent", "--new-session",
)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "passwd", "group", "hosts", "host.conf", "resolv.conf", "nsswitch.conf", "gai.conf",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl/certs",
    "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf", "localtime", "timezone",
    "mime.types", "os-release", "protocols", "services", "bash.bashrc", "inputrc",
)
"""What programs read from ``/etc``; no secrets (``shadow``, ``ssl/private``) among them."""
_NEVER_BOUND = ("/", "/etc", "/root", "/home", "/var", "/run", "/proc", "/sys", "/dev", "/tmp")


def _bwrap_flags(network: bool, as_user: tuple[int, int] | None) -> list[str]:
    """Namespace flags. As root, no user namespace (it would map to host root): bwrap mounts
    with root's rights and `setpriv` then drops to the user, capabilities and all."""
    flags = list(_NAMESPACES)
    if as_user is None:
        flags += ["--unshare-user", "--cap-drop", "ALL"]
    if not network:
        flags.append("--unshare-net")
    return flags


def _drop_to(as_user: tuple[int, int] | None) -> list[str]:
    if as_user is None:
        return []
    uid, gid = as_user
    return [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={gid}",
            "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def _python_paths(search_path: str) -> list[str]:
    """This Python's install and the ``PATH`` folders outside the system ones, to bind
    read-only at their own paths (a pyenv under ``/root``, a virtualenv in ``/tmp``)."""
    wanted = [sys.prefix, sys.base_prefix, os.path.dirname(sys.executable),
              *search_path.split(os.pathsep)]
    system = tuple(d + "/" for d in _SYSTEM_DIRS)
    found: list[str] = []
    for folder in list(wanted):
        if os.path.basename(folder.rstrip("/")) == "shims":
            # a pyenv shim runs <root>/libexec/pyenv, which reads <root>/versions
            for up in Path(folder).parents:
                if (up / "libexec" / "pyenv").exists():
                    wanted.insert(0, str(up))
                    break
    for folder in wanted:
        if not folder or not os.path.isabs(folder):
            continue
        for path in (os.path.normpath(folder), os.path.realpath(folder)):
            if (path in _NEVER_BOUND or path.startswith(system) or path in _SYSTEM_DIRS
                    or not os.path.isdir(path) or path in found):
                continue
            found.append(path)
    return found


def _minimal_root(search_path: str) -> list[str]:
    """bwrap arguments for a read-only root holding only what programs need."""
    return list(_minimal_root_cached(search_path))


@cache
def _minimal_root_cached(search_path: str) -> tuple[str, ...]:
    """Computed once per ``PATH``: dozens of stat calls that would repeat on every command."""
    args: list[str] = []
    for folder in _SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    args += ["--perms", "0755", "--dir", "/etc"]
    made: set[str] = {"/etc"}
    for name in _ETC_FILES:
        path = f"/etc/{name}"
        if os.path.exists(path):
            args += [*_parents(path, made), "--ro-bind", path, path]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for path in _python_paths(search_path):
        args += [*_parents(path, made), "--ro-bind", path, path]
    return tuple(args)


def _parents(path: str, made: set[str]) -> list[str]:
    """``--dir`` for each missing parent of ``path``, world-traversable (bwrap run by root
    makes them 0700, which the unprivileged user could not pass)."""
    args: list[str] = []
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        parent = "/" + "/".join(parts[:i])
        if parent not in made and not parent.startswith(tuple(d + "/" for d in _SYSTEM_DIRS)):
            made.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args


def _reachable(path: str, uid: int, gid: int) -> bool:
    """Whether ``uid``/``gid`` may run ``path``: every folder on the way is searchable."""
    real = os.path.realpath(path)
    current = "/"
    for part in [*real.strip("/").split("/")]:
        try:
            st = os.stat(current)
        except OSError:
            return False
        shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
        if not (st.st_mode >> shift) & 1:
            return False
        current = os.path.join(current, part)
    return os.path.isfile(real)


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

    Without bubblewrap a command runs with the host's file system and network (as an
    unprivileged user when we are root): only the limits, the private temporary folder, the
    clean environment and the clean-up apply, and the network cannot be cut. Check
    `isolation` for what is enforced on this machine.

    Args:
        workspace: Host folder the commands work in; created if missing. Defaults to cwd.
        network: ``True`` lets commands use the network; ``False`` or ``None`` (the default)
            cuts it, which needs bubblewrap.
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
        SandboxUnavailableError: the network off (the default) or ``use_bwrap=True`` without a
            working bubblewrap, or a ``pids`` limit that nothing here can enforce (root without a
            writable pids control group).
    """

    isolation_rank = 10  # execution.mode ``local``: a child process (jianmu.plugins)

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        *,
        network: bool | None = None,
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
        network = bool(network)  # unset means off: the secure default
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
                "the sandbox's network is off (the default, or network: false), which needs "
                f"bubblewrap or Docker to cut it, and neither is usable here ({problem}); "
                "install bubblewrap (apt-get install bubblewrap), use mode: docker, or turn "
                "the network on in the operator's config (execution.network: true)"
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
        self._user: tuple[int, int] | None = None

    @property
    def user(self) -> tuple[int, int] | None:
        """``(uid, gid)`` commands run as once started, or ``None`` for our own (not root)."""
        return self._user

    @property
    def python(self) -> str:
        """A Python interpreter that commands in this sandbox can run."""
        user = self._user
        if self.uses_bwrap or user is None or _reachable(sys.executable, *user):
            return sys.executable
        return shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"

    @property
    def isolation(self) -> dict[str, Any]:
        """What this sandbox really enforces here, for logs and tests."""
        return {
            "bwrap": self.uses_bwrap,
            "network": self.network,
            "user": self._user,
            "cgroup": sorted(self._controllers),
            "memory": "cgroup" if "memory" in self._controllers else "rlimit_as",
        }

    async def start(self) -> None:
        """Create the workspace and the private temporary folder; idempotent."""
        if self._tmp is not None:
            return
        self.workspace.mkdir(parents=True, exist_ok=True)
        user = sandbox_user(self.workspace)
        if user is not None and user[0] != self.workspace.stat().st_uid:
            await anyio.to_thread.run_sync(grant_tree, self.workspace, user[0])
        tmp = Path(tempfile.mkdtemp(prefix="jianmu-sandbox-"))
        if user is not None:
            os.chown(tmp, *user)
        self._tmp, self._user = tmp, user
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
            **safe_git_env(),  # last: no caller turns git's code-running settings back on
        }
        if self.uses_bwrap:
            bwrap = shutil.which("bwrap") or "bwrap"
            # Order matters: bwrap mounts in argument order, so the private /tmp comes after
            # the root (Python may live under /tmp and is bound again after it), the
            # workspace last (it may itself live under /tmp).
            made: set[str] = set()
            ws = str(self.workspace)
            argv = [
                bwrap, *_bwrap_flags(self.network, self._user),
                *_minimal_root(full_env["PATH"]),
                "--bind", str(self._tmp), "/tmp",
                *(arg for path in _python_paths(full_env["PATH"]) if path.startswith("/tmp/")
                  for arg in (*_parents(path, made), "--ro-bind", path, path)),
                *_parents(ws, made), "--bind", ws, ws,
                "--chdir", str(workdir), "--", *_drop_to(self._user), *argv,
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
        # Without bubblewrap, the child drops to the user itself (bwrap's setpriv does it inside).
        user = None if self.uses_bwrap else self._user
        return {
            "argv": argv, "env": full_env, "cwd": str(workdir), "limits": limits, "user": user,
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
    procs_files: list[str], limits: list[tuple[int, int]], user: tuple[int, int] | None = None
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
        if user is not None:  # last: joining the control group needs root
            uid, gid = user
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)  # from root to a user: every capability goes too

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
                preexec_fn=_make_preexec(
                    group.procs_files if group else [], spawn["limits"], spawn.get("user")
                ),
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
