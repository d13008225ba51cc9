"""`LocalSandbox`: a child process with real limits, inside bubblewrap where it is installed.

Layers, each used where this machine allows it:

- always: its own session and process group, ``setrlimit`` (CPU seconds, file size, address
  space when no memory control group binds, processes for non-root users), a private temporary
  folder as ``HOME`` and ``TMPDIR`` (as root a tmpfs of ``tmpfs_mb``: on the host's disk it
  would have no bound, see `jianmu.execution._scratch`), a minimal environment (no host
  secrets), no new privileges, and a seccomp filter that refuses the kernel keyring
  (``add_key``, ``keyctl``, ``request_key``: shared by every process of a uid) and new
  namespaces (``unshare``, ``setns``, a ``clone`` that makes one: see
  `jianmu.execution._process`);
- a control group per command (root, or a delegated cgroup): ``pids.max``, a memory limit whose
  OOM kills are counted, a CPU quota, and a way to kill every process the command started; all
  of them in one group of the sandbox with the memory limit too, so that what outlives a
  command (a file in a tmpfs, shared memory, page cache) stays within it;
- an IPC namespace per command (bubblewrap, or root without it); a warm sandbox with
  bubblewrap has one for the sandbox, emptied after each command;
- as root: the command runs as an unprivileged uid (the workspace's owner, or nobody), with no
  capabilities, so it cannot read what only root may read; the workspace is granted to that
  uid with an ACL (see `jianmu.execution._process`);
- bubblewrap: a minimal read-only root (``/usr``, ``/bin``, ``/lib*``, ``/sbin``, a few
  ``/etc`` files programs need, this Python's install), the workspace bound writable at its
  own path (but its ``read_only_paths``, ``.git`` among them, read-only: see
  `jianmu.execution._protect`), private ``/tmp``, ``/proc`` and ``/dev`` (its ``/dev/shm`` a
  tmpfs the commands may write: multiprocessing's semaphores), new pid/ipc/uts
  (and, unless root, user) namespaces, no capabilities, and no network unless
  ``network=True``: a network namespace of its own, so neither TCP, abstract Unix sockets nor
  socket files under ``/run`` (never mounted) reach the host. Folders asked for with
  ``ro_mounts`` are bound read-only from a descriptor opened without following symlinks
  (``--ro-bind-fd``), which is why read-only mounts need bubblewrap 0.8 or later: without it
  `read_only_mounts` is false.

The network is off unless ``network=True``. When the command's main process exits, or at its
timeout, whatever it left running is killed: the pid namespace dies with its first process,
and the control group is emptied. A sandbox runs one command at a time, so no command sees
another one running (its processes, their environment and memory).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import resource
import shutil
import sys
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from jianmu.constraints import (
    DEFAULT_READ_ONLY_PATHS,
    DEFAULT_TIMEOUT_S,
    SANDBOX_DEFAULTS,
    read_only_path,
)
from jianmu.errors import SandboxError, SandboxUnavailableError
from jianmu.execution._bwrap import (
    Protected,
    bwrap_argv,
    bwrap_available,
    bwrap_binds_fds,
    bwrap_problem,
)
from jianmu.execution._process import (
    CgroupNest,
    ChildHandle,
    ChildOutcome,
    ChildSpec,
    SeccompFilter,
    cgroup_support,
    command_filter,
    grant_tree,
    run_child,
    sandbox_user,
    seccomp_fd,
    sweep_stale_cgroups,
    user_tasks,
)
from jianmu.execution._protect import (
    ProtectedPaths,
    ReadOnlyWatch,
    existing_read_only_paths,
    open_read_only_paths,
    path_folders_in,
    with_link_targets,
    workspace_problem,
)
from jianmu.execution._scratch import make_scratch, remove_scratch, sweep_stale_scratch
from jianmu.execution._warm import LocalWarm, Reply
from jianmu.execution.sandbox import (
    DEFAULT_OUTPUT_LIMIT,
    BaseSandbox,
    CappedBuffer,
    ExecCall,
    ExecResult,
    LoopLock,
    engine_paths_in,
    exec_result,
    open_mount_source,
    safe_git_env,
)
from jianmu.execution.threads import to_thread

__all__ = ("LocalSandbox", "bwrap_available")

_log = logging.getLogger(__name__)
LOCAL_TMPFS_MB = 512
"""The default size of a local sandbox's private ``/tmp``, in MiB, where it is a tmpfs."""
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")


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


class LocalSandbox(BaseSandbox):
    """Runs commands as local child processes under resource limits (and bubblewrap).

    Without bubblewrap a command runs with the host's file system and network (as an
    unprivileged user when we are root): only the limits, the private temporary folder, the
    clean environment and the clean-up apply, and the network cannot be cut. Without control
    groups too, the clean-up reaches only the command's process group: a process that left it
    (``setsid``) outlives the call. Check `isolation` for what is enforced on this machine.

    Args:
        workspace: Host folder the commands work in; created if missing. Defaults to cwd.
        network: ``True`` lets commands use the network; ``False`` or ``None`` (the default)
            cuts it, which needs bubblewrap.
        use_bwrap: ``None`` uses bubblewrap when it works here; ``True`` requires it.
        memory_mb: Memory limit, in MiB, of each command and of what the sandbox's commands
            hold together (with control groups: files in a tmpfs, shared memory, page cache;
            without a memory control group, each process's address space); ``None`` is
            `LOCAL_MEMORY_MB` (1024) where a memory control group enforces it, else none.
        cpus: CPU share of one command (needs a cpu control group).
        pids: Processes one command may have at once; ``None`` is `LOCAL_PIDS` (256), where
            it can be enforced (not as root without a pids control group).
        cpu_seconds: CPU-time limit; default: the timeout times the number of cores, plus one.
        file_size_mb: Largest file a command may write, in MiB.
        tmpfs_mb: Size of the commands' private ``/tmp`` (their ``HOME``), in MiB: a tmpfs
            where we may mount one (root), counted in ``memory_mb`` too; elsewhere a folder on
            the host's disk that only ``file_size_mb`` bounds, file by file (`isolation`
            ``"tmp"`` says which).
        timeout: Default timeout of `exec`, in seconds.
        output_limit: Bytes kept of each of stdout and stderr.
        env: Variables added to every command's environment.
        read_only_paths: Paths relative to the workspace that commands may read but not
            change, where they exist when a command starts (a warm supervisor started before
            one appeared is restarted); what a command creates at one that did not exist is
            moved into ``.jianmu/quarantine`` after it (see `jianmu.execution._protect`);
            ``None`` is `DEFAULT_READ_ONLY_PATHS` (``.git``, the config files, ``skills``,
            ``.venv``: what runs on the host later), ``()`` none. The host's ``PATH`` folders
            in the workspace are held so whatever it says. A mount with bubblewrap; without it
            only as root (the commands' user is granted them read-only).
        warm: ``True`` (the default) keeps one supervisor per sandbox that starts each
            command, where it can be isolated: control groups to kill every process of a
            command, and, with bubblewrap, root (so that the commands' user cannot reach
            it). Elsewhere every command starts cold, as `warm_problem` says.

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
        tmpfs_mb: int = LOCAL_TMPFS_MB,
        timeout: float = DEFAULT_TIMEOUT_S,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        env: Mapping[str, str] | None = None,
        read_only_paths: Iterable[str] | None = None,
        warm: bool = True,
    ) -> None:
        self.check_positive(
            memory_mb=memory_mb, cpus=cpus, pids=pids, cpu_seconds=cpu_seconds,
            file_size_mb=file_size_mb, tmpfs_mb=tmpfs_mb, timeout=timeout,
            output_limit=output_limit,
        )
        super().__init__(workspace)
        network = bool(network)  # unset means off: the secure default
        self.network = network
        self.memory_mb, self.cpus, self.pids = memory_mb, cpus, pids
        self.cpu_seconds, self.file_size_mb = cpu_seconds, file_size_mb
        self.tmpfs_mb = tmpfs_mb
        self.timeout, self.output_limit = timeout, output_limit
        self.env = dict(env or {})
        self.read_only_paths: tuple[str, ...] = tuple(
            DEFAULT_READ_ONLY_PATHS if read_only_paths is None
            else dict.fromkeys(read_only_path(p) for p in read_only_paths)
        )
        problem = bwrap_problem(network) if use_bwrap is not False else "use_bwrap=False"
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
        # read-only mounts need a mount namespace: without one the host folder would be
        # reachable (and maybe writable) at its own path, so they are refused
        self.read_only_mounts = self.uses_bwrap and bwrap_binds_fds()
        support = cgroup_support()
        self._support = support
        self._controllers = support.controllers if support else frozenset()
        self.warm_problem: str | None = self._warm_problem(warm)
        """Why commands start cold here, or ``None`` when a warm supervisor runs them."""
        self._warm: LocalWarm | None = None
        self._nest: CgroupNest | None = None
        # the seccomp filter (keyring, namespaces): bubblewrap or the warm supervisor loads
        # the program, a cold child without bubblewrap this prepared copy
        self._seccomp = command_filter()
        self._filter = None if self._seccomp is None or self.uses_bwrap \
            else SeccompFilter(self._seccomp)
        # one command at a time: a running command is never seen by another (its processes,
        # their environment, its IPC objects), in the same pid namespace and uid as it
        self._turn = LoopLock()
        self._starting = LoopLock()
        # unset limits are the defaults, not none: a fork bomb or a memory hog stops there
        defaults = SANDBOX_DEFAULTS["local"]
        if os.geteuid() == 0 and "pids" not in self._controllers:
            if pids is not None:
                raise SandboxUnavailableError(
                    f"pids={pids!r} cannot be enforced: RLIMIT_NPROC does not bind root and "
                    "no pids control group is writable here; run as a non-root user or use "
                    "mode: docker"
                )
        elif pids is None:
            self.pids = defaults.pids
        if memory_mb is None and "memory" in self._controllers:
            # a default only where a control group enforces it: an address-space limit
            # that low stops a JVM from starting (it reserves its heap up front)
            self.memory_mb = defaults.memory_mb
        self._tmp: Path | None = None
        self._tmp_bounded = False  # whether the private /tmp is a tmpfs of tmpfs_mb
        self._running: set[ChildHandle] = set()
        self._ending: Future[None] | None = None  # the last cancelled command's end
        self._user: tuple[int, int] | None = None
        # what a command creates at a protected path is moved out of the way after it
        self._watch = ProtectedPaths(self.workspace, self._watched_paths)
        self._granted: frozenset[str] | None = None  # the paths granted read-only (root)

    def _warm_problem(self, warm: bool) -> str | None:
        if not warm:
            return "warm=False"
        if not self._controllers:
            return ("no writable control groups: a warm supervisor could not kill every "
                    "process of a command")
        if self.uses_bwrap and os.geteuid() != 0:
            return ("bubblewrap as a user: the supervisor would share the commands' uid "
                    "inside the namespace")
        return None

    @property
    def warm(self) -> bool:
        """Whether a warm supervisor runs the commands (see `warm_problem`)."""
        return self.warm_problem is None

    @property
    def supervisor_starts(self) -> int:
        """How many warm supervisors this sandbox started so far (restarts count)."""
        return self._warm.starts if self._warm is not None else 0

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
            "memory": None if self.memory_mb is None
            else "cgroup" if "memory" in self._controllers else "rlimit_as",
            "pids": None if self.pids is None
            else "cgroup" if "pids" in self._controllers else "rlimit_nproc",
            "warm": self.warm,
            "keyring": "blocked" if self._seccomp is not None else "shared",
            # read-only inside bubblewrap's mount namespace, or as another uid granted them
            # read-only (root); else nothing holds them
            "read_only_paths": list(self.read_only_paths)
            if self.uses_bwrap or os.geteuid() == 0 else [],
            # the private /tmp: a tmpfs of tmpfs_mb, or a host folder (None: not made yet)
            "tmp": None if self._tmp is None else "tmpfs" if self._tmp_bounded
            else "host folder",
            # what kills a command's leftovers: without either of the first two, a process
            # that left the command's process group (setsid) outlives the call
            "leftovers": "control group" if self._controllers
            else "pid namespace" if self.uses_bwrap else "process group",
        }

    async def start(self) -> None:
        """Create the workspace, the private temporary folder and the sandbox's control group;
        idempotent.

        Raises:
            SandboxError: the control groups were usable when probed but the sandbox's could
                not be made (nothing runs without the limits it promises).
            SandboxUnavailableError: the workspace is (or holds) a home, system or temporary
                folder.
        """
        if self._tmp is not None:
            return
        async with self._starting:
            if self._tmp is None:
                await self._start()

    async def _start(self) -> None:
        problem = workspace_problem(self.workspace)
        if problem is not None:
            raise SandboxUnavailableError(problem)
        self.workspace.mkdir(parents=True, exist_ok=True)
        user = sandbox_user(self.workspace)
        if user is not None and user[0] != self.workspace.stat().st_uid:
            # the read-only paths granted read-only too: without bubblewrap no mount shows
            # them so, and an earlier grant's write access is taken back
            if not self.uses_bwrap:  # else mounts hold them, whatever the grant says
                self._granted = ReadOnlyWatch.take(self.workspace,
                                                   self._protected_paths()).mounted
                # a grant holds a path's contents, not its name in a folder commands write
                self._watch.replaceable = True
            await self._grant(user[0])
        await to_thread(sweep_stale_cgroups, shielded=True)
        support, nest = self._support, None
        if support is not None:
            memory = self.memory_mb * 1024 * 1024 if self.memory_mb else None
            # shielded: a nest made for a cancelled start would never be removed
            nest = await to_thread(lambda: CgroupNest(support, memory_bytes=memory),
                                   shielded=True)
        await to_thread(sweep_stale_scratch, shielded=True)
        scratch = make_scratch(self.tmpfs_mb, user)
        tmp, self._tmp_bounded = scratch.path, scratch.bounded
        self._tmp, self._user, self._nest = tmp, user, nest
        if self.warm_problem is not None:
            _log.info("LocalSandbox: every command starts cold (%s)", self.warm_problem)
        elif nest is not None:
            bwrap = None if not self.uses_bwrap else {
                "network": self.network, "tmp": tmp, "workspace": self.workspace,
                "search_path": self._search_path(),
            }
            self._warm = LocalWarm(nest=nest, bwrap=bwrap, user=user, cwd=self.workspace,
                                   seccomp=self._seccomp, protect=self._protected)

    async def close(self) -> None:
        """Kill running commands and remove the private temporary folder; idempotent."""
        for handle in list(self._running):
            handle.cancel()
        warm, self._warm = self._warm, None
        if warm is not None:
            await to_thread(warm.close, shielded=True)
        nest, self._nest = self._nest, None
        if nest is not None:
            await to_thread(nest.remove, shielded=True)
        # a cancelled command's processes are gone now: what it made is moved (and logged)
        self._watch.settle()
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            await to_thread(remove_scratch, tmp, shielded=True)

    async def run(self, call: ExecCall) -> ExecResult:
        """Run one checked call as a child process and wait for it; see `Sandbox.exec`.

        Raises:
            ValueError: a timeout that is not positive, or ``cwd`` missing in the workspace.
            SandboxError: the process could not be started.
        """
        timeout = call.timeout_or(self.timeout)
        if call.ro_mounts and not self.read_only_mounts:
            raise SandboxUnavailableError(
                "read-only mounts need bubblewrap 0.8 or later (--ro-bind-fd), not usable here"
            )
        async with self._turn:
            await self.start()
            workdir = self.workspace / call.cwd
            if not workdir.is_dir():
                raise ValueError(
                    f"cwd {call.cwd!r} is not a folder in the workspace {str(self.workspace)!r}"
                )
            await self._settled()  # a cancelled command may still be dying
            if await self._hold(self._watch.before()):
                self._watch.retake()  # the new grant changed the files' change times
            if self._warm is not None and not call.ro_mounts:  # a new bind: a cold start
                result = await self._run_warm(self._warm, call, workdir, timeout)
            else:
                result = await self._run_cold(call, workdir, timeout)
            # none of its processes is left (its pid namespace or control group is gone)
            return self._watch.after(result)

    async def _settled(self) -> None:
        """Return once no process of the last cancelled command is left: its call returned
        at once, killing it (a cold child's thread reaps it, a warm supervisor is told to), and
        what it made is moved only then (else it could make it again, and it would stay)."""
        ending = self._ending
        if ending is None:
            return
        try:  # a future of no loop: the cancelled call's may be closed by now
            await asyncio.shield(asyncio.wrap_future(ending))
        finally:
            if ending.done() and self._ending is ending:
                self._ending = None

    async def _hold(self, watch: ReadOnlyWatch) -> bool:
        """Hold read-only the protected paths that exist now: the host may have made one
        since the supervisor started (it mounted those it found then) or since the grant.
        Whether the workspace was granted anew."""
        warm, user = self._warm, self._user
        if warm is not None and self.uses_bwrap and warm.supervisor is not None:
            mounted = {os.path.join(str(self.workspace), rel) for rel in watch.mounted}
            if warm.mounted != mounted:
                await to_thread(warm.restart, shielded=True)
        if self._granted is None or user is None or watch.mounted == self._granted:
            return False
        await self._grant(user[0])
        self._granted = watch.mounted  # only once granted: a cancelled grant is taken again
        return True

    async def _grant(self, uid: int) -> None:
        """`grant_tree` the workspace to ``uid``; a cancel stops the walk between folders (a
        workspace of millions of files takes seconds) and the next start walks it again."""
        stop = threading.Event()
        await to_thread(grant_tree, self.workspace, uid, self._protected_paths(), stop,
                        shielded=True, on_cancel=stop.set)

    async def _run_cold(self, call: ExecCall, workdir: Path, timeout: float) -> ExecResult:
        """Run one call in a child process of its own; see `run`."""
        ro_fds: dict[int, str] = {}
        filter_fd: int | None = None  # bwrap loads the seccomp filter from it
        protected: Protected = []
        handle = ChildHandle()
        # taken by the thread as it starts the child, or at the end by this call if none did:
        # whoever holds it closes the descriptors bwrap is given
        claim = threading.Lock()
        ended: Future[None] = Future()

        def release() -> None:
            for fd in [*ro_fds, *([] if filter_fd is None else [filter_fd]),
                       *(source for source, _ in protected if isinstance(source, int))]:
                os.close(fd)  # bwrap holds its own copies once started

        self._running.add(handle)
        try:
            for host, target in call.ro_mounts.items():
                ro_fds[open_mount_source(host)] = target
            if self.uses_bwrap and self._seccomp is not None:
                filter_fd = seccomp_fd(self._seccomp)
            if self.uses_bwrap:
                protected = self._protected()
            spec = self._child_spec(call.argv, workdir, call.env, timeout, ro_fds,
                                    filter_fd=filter_fd, protected=protected)

            def child() -> ChildOutcome:
                if not claim.acquire(blocking=False):  # cancelled first: it never starts
                    raise SandboxError("cancelled before the command started")
                try:
                    return run_child(spec, call.stdin, timeout, self.output_limit, handle)
                finally:
                    release()
                    ended.set_result(None)  # killed and reaped, its control group removed

            outcome = await to_thread(child)
        except BaseException:
            # Cancelled from outside (a runner's timeout): kill now, or as soon as the process
            # exists if the thread is still starting it; the thread cleans up after itself.
            handle.cancel()
            raise
        finally:
            self._running.discard(handle)
            if claim.acquire(blocking=False):  # no thread started it, and none will
                release()
            elif not ended.done():  # cancelled: the next call waits for the thread's clean-up
                self._ending = ended  # before moving what the command made
        return self._result(outcome, timeout)

    async def _run_warm(
        self, warm: LocalWarm, call: ExecCall, workdir: Path, timeout: float
    ) -> ExecResult:
        """Run one call through the warm supervisor; see `run`."""
        spec = self._child_spec(call.argv, workdir, call.env, timeout, {}, wrap=False)
        request = {"argv": spec.argv, "env": spec.env, "cwd": spec.cwd,
                   "timeout": timeout, "rlimits": spec.limits}
        limits = (("pids", self.pids), ("memory_bytes", self.memory_mb * 1024 * 1024
                                        if self.memory_mb else None), ("cpus", self.cpus))
        handle = ChildHandle()
        self._running.add(handle)
        try:
            reply = await warm.run(request, call.stdin, timeout, self.output_limit, handle,
                                   limits)
        except BaseException:
            handle.cancel()  # cancelled from outside: the supervisor kills it
            self._ending = warm.ending
            raise
        finally:
            self._running.discard(handle)
        if reply is None:  # the supervisor died under it (or hung): report the command killed
            died = ChildOutcome(
                exit_code=-9, stdout=CappedBuffer(self.output_limit),
                stderr=CappedBuffer(self.output_limit), timed_out=False, duration=timeout,
                oom_kills=0,
            )
            died.stderr.write(b"[jianmu sandbox: the supervisor died during the command]\n")
            return self._result(died, timeout)
        return self._result(reply, timeout)

    def _protected(self) -> Protected:
        """The workspace's read-only paths that exist now, as bubblewrap mounts them: opened
        without following a link where bubblewrap takes descriptors (the caller closes
        them), else by path once checked."""
        paths = self._protected_paths()
        if not paths:
            return []
        if bwrap_binds_fds():
            return [(fd, target) for fd, target in
                    open_read_only_paths(self.workspace, paths).items()]
        return [(host, host) for host, _ in existing_read_only_paths(self.workspace, paths)]

    def _watched_paths(self) -> list[str]:
        """The protected paths and the engine's own Python in the workspace: both are shown
        read-only, but a folder above one may be renamed away and remade (or linked to a copy
        the engine would import from next), so the way to each is watched."""
        return [*self._protected_paths(), *(rel for _, rel in engine_paths_in(self.workspace))]

    def _protected_paths(self) -> list[str]:
        # and the PATH folders in the workspace, whatever read_only_paths says, and what a
        # link on the way to one leads to (the user's .venv -> venvs/py311)
        return with_link_targets(self.workspace, [
            *self.read_only_paths, *path_folders_in(self.workspace, self._search_path())])

    def _search_path(self) -> str:
        return os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")

    def _child_spec(
        self, argv: list[str], workdir: Path, env: Mapping[str, str], timeout: float,
        ro_fds: Mapping[int, str], *, wrap: bool = True, filter_fd: int | None = None,
        protected: Protected = (),
    ) -> ChildSpec:
        assert self._tmp is not None
        home = "/tmp" if self.uses_bwrap else str(self._tmp)
        full_env = {
            "PATH": self._search_path(),
            "LANG": "C.UTF-8",
            "HOME": home,
            "TMPDIR": home,
            **self.env,
            **env,
            **safe_git_env(),  # last: no caller turns git's code-running settings back on
        }
        if self.uses_bwrap and wrap:
            argv = bwrap_argv(
                argv, network=self.network, user=self._user, tmp=self._tmp,
                workspace=self.workspace, workdir=workdir, search_path=full_env["PATH"],
                ro_fds=ro_fds, seccomp_fd=filter_fd, protected=protected,
            )
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
            limits.append((resource.RLIMIT_NPROC, user_tasks() + self.pids))
        # Without bubblewrap, the child drops to the user itself (bwrap's setpriv does it
        # inside), takes its own IPC namespace where it may (root) and loads the filter.
        user = None if self.uses_bwrap else self._user
        fds = (*ro_fds, *(() if filter_fd is None else (filter_fd,)),
               *(source for source, _ in protected if isinstance(source, int)))
        return ChildSpec(
            argv=argv, env=full_env, cwd=str(workdir), limits=limits, user=user,
            pids=self.pids, memory_bytes=memory, cpus=self.cpus, nest=self._nest,
            pass_fds=fds, own_ipc=not self.uses_bwrap and os.geteuid() == 0,
            seccomp=self._filter, pipes_owner=self._user,
        )

    def _result(self, outcome: ChildOutcome | Reply, timeout: float) -> ExecResult:
        oom = outcome.oom_kills > 0
        if (not oom and self.memory_mb and "memory" not in self._controllers
                and outcome.exit_code != 0
                and any(m in outcome.stderr.text() for m in _MEMORY_MARKERS)):
            oom = True  # the address-space rlimit made an allocation fail
        return exec_result(
            exit_code=outcome.exit_code, out=outcome.stdout, err=outcome.stderr,
            duration=outcome.duration, timed_out=outcome.timed_out, timeout=timeout, oom=oom,
            memory_mb=self.memory_mb,
        )
