"""`DockerSandbox`: one locked-down container per runner, commands run in it with ``exec``.

The container has no network unless asked, a memory limit with swap equal to it, a CPU share, a
process limit, a read-only root, no capabilities, ``no-new-privileges``, a tmpfs ``/tmp``, a
tmpfs ``/skills`` only the keeper (below) may write, where read-only mounts are copied (see
`jianmu.execution._docker`), and the workspace bind-mounted at ``/workspace``. Files move
through that bind mount: docker's archive copy fails on a read-only container and on tmpfs
paths.

Two unprivileged users: the container's own processes (its init and ``sleep infinity``) run as
a *keeper* uid, commands as the *sandbox* uid: yours, or as root the workspace's owner (or
nobody, granted the workspace with an ACL, see `jianmu.execution._process`). Commands run one at a
time, each under ``timeout -s KILL`` (which kills its process group). When the command returns,
its wrapper shell runs the builtin ``kill -9 -1`` as the sandbox uid: every process that uid
has in the container dies (``setsid``, double forks, ``nohup`` included) while the keeper's
survive, and nothing needs to fork for it; then what it left in the IPC namespace goes. When
the wrapper may not have got there (killed, timed out, cancelled), a second exec does the same
from outside; if even that exec cannot run (a fork bomb holds every pid), the container is
replaced. A host-side deadline backs up the timeout.

Warm (the default): one supervisor per container, run by one long ``docker exec``, starts each
command with the same guarantees, without a ``docker exec`` per call; see
`jianmu.execution._docker`. Where it cannot run (no ``python3`` with ``ctypes`` in the
image), commands start cold as above, and a warning says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

# the defaults live with the constraints, whose merge measures a skill's layer against them
from jianmu.constraints import (
    DEFAULT_IMAGE,
    DEFAULT_READ_ONLY_PATHS,
    DEFAULT_TIMEOUT_S,
    DOCKER_CPUS,
    DOCKER_MEMORY_MB,
    DOCKER_PIDS,
    read_only_path,
)
from jianmu.errors import SandboxError, SandboxUnavailableError
from jianmu.execution._docker import (
    MAX_COPY_BYTES,
    DockerWarm,
    close_exec_socket,
    feed,
    pack_folders,
    read_frames,
    unpack_in,
    wait_exit,
    warm_result,
)
from jianmu.execution._docker import docker_errors as _docker_errors
from jianmu.execution._docker import import_docker as _import_docker
from jianmu.execution._mount_check import MOUNT_PROBE, mount_problem
from jianmu.execution._process import ChildHandle, grant_tree, pid_alive, sandbox_user
from jianmu.execution._protect import (
    ProtectedPaths,
    identified_read_only_paths,
    path_folders_in,
    with_link_targets,
    workspace_problem,
)
from jianmu.execution.sandbox import (
    DEFAULT_OUTPUT_LIMIT,
    MOUNT_ROOT,
    BaseSandbox,
    ExecCall,
    ExecResult,
    LoopLock,
    engine_paths_in,
    exec_result,
    safe_git_env,
)
from jianmu.execution.threads import to_thread

if TYPE_CHECKING:
    import docker

__all__ = ("DEFAULT_IMAGE", "DockerSandbox")


_log = logging.getLogger(__name__)
T = TypeVar("T")
_LABEL = "jianmu.sandbox"
_GRACE = 5.0  # host-side slack past the in-container timeout before we step in
_CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_CLEAR_IPC = "ipcrm -a 2>/dev/null; rm -f /dev/mqueue/* 2>/dev/null"  # the user's IPC objects
# kill(-1) reaches every process of the caller's uid but itself and pid 1; a builtin, no fork.
_SWEEP = ["/bin/sh", "-c", f"kill -9 -1 2>/dev/null; {_CLEAR_IPC}; exit 0"]
# The in-exec sweep lets the output stream close at once when leftovers hold it open and
# costs no extra exec; the host-side sweep covers a command that killed this shell (its exit
# code is then 128 + the signal).
_WRAPPER = f'timeout -s KILL "$0" "$@"; rc=$?; kill -9 -1 2>/dev/null; {_CLEAR_IPC}; exit $rc'
_KEEPER = 65533
_OOM_READ = (
    "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null"
)


class DockerSandbox(BaseSandbox):
    """Runs commands in one long-lived, locked-down container.

    Args:
        workspace: Host folder bind-mounted at ``/workspace``; created if missing.
        image: The image to run; see `jianmu.execution.image.build_image`. Any image with
            ``/bin/sh``, ``sleep``, GNU ``timeout`` and ``grep`` works.
        network: ``True`` gives the container the default bridge network; ``False`` or
            ``None`` (unset) leaves it without any.
        memory_mb: Memory (and memory plus swap) limit of the container, in MiB.
        cpus: CPU share of the container.
        pids: Process limit of the container.
        user: ``uid:gid`` commands run as; default: yours, or as root the workspace's owner
            (``65534:65534``, nobody, when root owns it). As root, a numeric user that does
            not own the workspace is granted it with an ACL.
        tmpfs_mb: Size of the tmpfs ``/tmp``, in MiB.
        timeout: Default timeout of `exec`, in seconds.
        output_limit: Bytes kept of each of stdout and stderr.
        env: Variables added to every command's environment.
        base_url: Docker daemon address; default: the environment (``DOCKER_HOST``).
        read_only_paths: Paths relative to the workspace mounted read-only over it, where
            they exist (with no link on the way) when the container starts (one made on the
            host since gets a new container at the next command); what a command creates at
            one that did not exist is moved into ``.jianmu/quarantine`` after it (see
            `jianmu.execution._protect`); ``None`` is `DEFAULT_READ_ONLY_PATHS` (``.git``, the
            config files, ``skills``...), ``()`` none.
        warm: ``True`` (the default) runs commands through one supervisor per container;
            ``False``, or an image where it cannot run (see `warm_problem`), starts a
            ``docker exec`` per command.
    """

    isolation_rank = 20  # execution.mode ``docker`` isolates more than local (jianmu.plugins)
    takes_image = True  # the runner passes execution.docker_image
    read_only_mounts = True  # copied into the keeper's /skills tmpfs (see _docker)

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        *,
        image: str = DEFAULT_IMAGE,
        network: bool | None = False,
        memory_mb: int = DOCKER_MEMORY_MB,
        cpus: float = DOCKER_CPUS,
        pids: int = DOCKER_PIDS,
        user: str | None = None,
        tmpfs_mb: int = 64,
        timeout: float = DEFAULT_TIMEOUT_S,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        env: Mapping[str, str] | None = None,
        base_url: str | None = None,
        read_only_paths: Iterable[str] | None = None,
        warm: bool = True,
    ) -> None:
        self.check_positive(
            memory_mb=memory_mb, cpus=cpus, pids=pids, tmpfs_mb=tmpfs_mb, timeout=timeout,
            output_limit=output_limit,
        )
        if not image or not isinstance(image, str):
            raise ValueError(f"image must be a non-empty image name, got {image!r}")
        _import_docker()  # fail now, not at the first call, when the extra is missing
        super().__init__(workspace)
        self.image, self.network = image, bool(network)  # unset means off
        self.memory_mb, self.cpus, self.pids, self.tmpfs_mb = memory_mb, cpus, pids, tmpfs_mb
        if user is None:
            if os.geteuid() == 0:
                self.workspace.mkdir(parents=True, exist_ok=True)
                uid, gid = sandbox_user(self.workspace) or (0, 0)
                user = f"{uid}:{gid}"
            else:
                user = f"{os.getuid()}:{os.getgid()}"
        self.user = user
        keeper = _KEEPER if not user.startswith(f"{_KEEPER}:") else _KEEPER - 1
        self.keeper = f"{keeper}:{keeper}"
        """The uid the container's own processes run as, out of the commands' reach."""
        self.timeout, self.output_limit = timeout, output_limit
        self.env = dict(env or {})
        self.base_url = base_url
        self.read_only_paths: tuple[str, ...] = tuple(
            DEFAULT_READ_ONLY_PATHS if read_only_paths is None
            else dict.fromkeys(read_only_path(p) for p in read_only_paths)
        )
        self._client: docker.DockerClient | None = None
        self._container: Any = None
        self._oom_baseline = 0
        self._lock = LoopLock()
        self._exec_lock = LoopLock()  # the sweep kills all of the user's processes
        self._warm = DockerWarm(user, self.keeper)
        # what a command creates at a protected path is moved out of the way after it; the
        # container's read-only mounts are the paths that existed when it was made
        self._watch = ProtectedPaths(self.workspace, self._watched_paths)
        self._mounted: frozenset[str] = frozenset()
        # each read-only mount's target -> (st_dev, st_ino) of the folder checked for it
        self._identities: dict[str, tuple[int, int]] = {}
        if not warm:
            self._warm.problem = "warm=False"

    @property
    def warm_problem(self) -> str | None:
        """Why commands start cold (a ``docker exec`` each), or ``None`` when warm."""
        return self._warm.problem

    @property
    def supervisor_starts(self) -> int:
        """How many warm supervisors were started so far (restarts count)."""
        return self._warm.starts

    @property
    def _tmpfs_room(self) -> int:
        """Bytes of files the ``/skills`` tmpfs takes, leaving room for tar's overhead."""
        return self.tmpfs_mb * 1024 * 1024 * 3 // 4

    @property
    def container_id(self) -> str | None:
        """The running container's id, once started."""
        return self._container.id if self._container is not None else None

    async def start(self) -> None:
        """Connect to Docker, check the image and start the container; idempotent.

        Raises:
            MissingExtraError: docker-py is not installed.
            SandboxUnavailableError: no daemon answers, the image is missing, or the
                workspace is (or holds) a home or system folder.
        """
        async with self._lock:
            if self._container is None:
                await to_thread(self._start_sync, shielded=True)  # never a stray container

    async def close(self) -> None:
        """Remove the container and close the client; idempotent."""
        async with self._lock:
            await to_thread(self._close_sync, shielded=True)
        self._watch.settle()  # a cancelled command's, its processes gone with the container

    def _connect(self) -> docker.DockerClient:
        if self._client is None:
            docker = _import_docker()
            with _docker_errors("connect to Docker"):
                client = (
                    docker.DockerClient(base_url=self.base_url, timeout=30)
                    if self.base_url else docker.from_env(timeout=30)
                )
                client.ping()
            self._client = client
        return self._client

    def _start_sync(self) -> None:
        problem = workspace_problem(self.workspace)
        if problem is not None:
            raise SandboxUnavailableError(problem)
        client = self._connect()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._grant_workspace()
        with _docker_errors(f"find the image {self.image!r}", self.image):
            client.images.get(self.image)
        self._remove_stale(client)
        keeper_uid = self.keeper.partition(":")[0]
        with _docker_errors("start the sandbox container", self.image):
            self._container = client.containers.run(
                self.image, ["sleep", "infinity"], detach=True, init=True,
                name=f"jianmu-sandbox-{os.getpid()}-{uuid.uuid4().hex[:8]}",
                labels={_LABEL: "1", "jianmu.owner_pid": str(os.getpid()),
                        "jianmu.owner_host": socket.gethostname()},
                network_mode="bridge" if self.network else "none",
                mem_limit=f"{self.memory_mb}m", memswap_limit=f"{self.memory_mb}m",
                nano_cpus=int(self.cpus * 1e9), pids_limit=self.pids,
                read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
                user=self.keeper,
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={self.tmpfs_mb}m,mode=1777",
                       # read-only mounts are copied here; only the keeper may write
                       MOUNT_ROOT: f"rw,exec,nosuid,nodev,size={self.tmpfs_mb}m,mode=0755,"
                                   f"uid={keeper_uid},gid={keeper_uid}"},
                volumes=self._volumes(),
                working_dir="/workspace",
                environment={"HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                             "PATH": _CONTAINER_PATH},
            )
        self._check_mounts()
        self._oom_baseline = self._oom_count()

    def _check_mounts(self) -> None:
        """Make sure each read-only mount holds the folder checked for it (`_mount_check`);
        remove the container otherwise.

        Raises:
            SandboxError: a read-only path was swapped (for a link) while the container
                started.
        """
        if not self._identities:
            return
        client, container = self._connect(), self._container
        with _docker_errors("check the container's mounts"):
            exec_id = client.api.exec_create(
                container.id,
                ["/bin/sh", "-c", MOUNT_PROBE, "sh", "/workspace", *self._identities],
                user=self.user)["Id"]
            output = client.api.exec_start(exec_id).decode(errors="replace")
        problem = mount_problem(output, self._identities, _identity(str(self.workspace)))
        if problem is not None:
            self._drop_container()
            raise SandboxError(
                f"a read-only path of the workspace changed while the sandbox's container "
                f"started ({problem}; a link swapped in by code running meanwhile?): the "
                "container was removed; run the command again"
            )

    def _volumes(self) -> dict[str, dict[str, str]]:
        """The workspace, writable at ``/workspace`` but for the engine's own Python (when
        it lives there), the `read_only_paths` that exist and the host's ``PATH`` folders in
        it (`jianmu.execution._protect`), read-only."""
        identified = identified_read_only_paths(self.workspace, self._protected_paths())
        self._mounted = frozenset(rel for _, rel, _ in identified)
        engine = [(host, rel, _identity(host)) for host, rel in engine_paths_in(self.workspace)]
        ro = [*engine, *identified]
        # one mount per target: the engine's .venv may also be a read-only path, named
        # through another spelling of the workspace (docker refuses a target twice)
        targets = {f"/workspace/{os.path.normpath(rel)}": host for host, rel, _ in reversed(ro)}
        self._identities = {f"/workspace/{os.path.normpath(rel)}": identity
                            for _, rel, identity in reversed(ro)}
        return {str(self.workspace): {"bind": "/workspace", "mode": "rw"},
                **{host: {"bind": target, "mode": "ro"} for target, host in targets.items()}}

    def _watched_paths(self) -> list[str]:
        """The protected paths and the engine's own Python in the workspace: both are shown
        read-only, but a folder above one may be renamed away and remade (or linked to a copy
        the engine would import from next), so the way to each is watched."""
        return [*self._protected_paths(), *(rel for _, rel in engine_paths_in(self.workspace))]

    def _protected_paths(self) -> list[str]:
        # and what a link on the way to one leads to (the user's .venv -> venvs/py311)
        return with_link_targets(self.workspace,
                                 [*self.read_only_paths, *path_folders_in(self.workspace)])

    def _grant_workspace(self) -> None:
        """Let the commands' user write to the workspace, without opening it to everyone.

        Raises:
            SandboxUnavailableError: the user cannot write there and we cannot grant it.
        """
        uid, _, gid = self.user.partition(":")
        st = self.workspace.stat()
        if not uid.isdigit() or int(uid) == st.st_uid:
            return
        if os.geteuid() == 0:
            grant_tree(self.workspace, int(uid), self._protected_paths())
            return
        writable = bool(st.st_mode & (0o020 if gid.isdigit() and int(gid) == st.st_gid
                                      else 0o002))
        if not writable:
            raise SandboxUnavailableError(
                f"the sandbox runs as {self.user}, which cannot write to the workspace "
                f"{str(self.workspace)!r} (owner {st.st_uid}, mode {st.st_mode & 0o777:o}); "
                "pass user= the folder's owner, or run as root (the folder is then granted "
                "to the sandbox's user with an ACL)"
            )

    @staticmethod
    def _remove_stale(client: docker.DockerClient) -> None:
        """Remove containers whose owning process on this host has died."""
        host = socket.gethostname()
        with _docker_errors("list old sandbox containers"):
            # one request, labels included: `containers.list` inspects each container in turn,
            # and fails when another process removes one meanwhile
            stale = client.api.containers(
                all=True, filters={"label": [f"{_LABEL}=1", f"jianmu.owner_host={host}"]}
            )
        for container in stale:
            pid = (container.get("Labels") or {}).get("jianmu.owner_pid", "")
            if pid.isdigit() and not pid_alive(int(pid)):
                with contextlib.suppress(Exception), _docker_errors("remove a stale container"):
                    client.api.remove_container(container["Id"], force=True)

    def _close_sync(self) -> None:
        self._warm.forget()
        container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(SandboxError), _docker_errors("remove the container"):
                container.remove(force=True)
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _drop_container(self) -> None:
        """Forget a container that stopped answering; the next call starts a fresh one."""
        self._warm.forget()
        container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(Exception), _docker_errors("remove the container"):
                container.remove(force=True)

    async def run(self, call: ExecCall) -> ExecResult:
        """Run one checked call in the container and wait for it; see `Sandbox.exec`.

        Raises:
            ValueError: a timeout that is not positive.
            SandboxError: Docker failed twice in a row, even with a fresh container.
            SandboxUnavailableError: no daemon, or no image.
        """
        argv, data = call.argv, call.stdin
        workdir = str(PurePosixPath("/workspace") / call.cwd)
        timeout = call.timeout_or(self.timeout)
        # last: no caller turns git's code-running settings back on
        full_env = {**self.env, **call.env, **safe_git_env()}
        # the host side of read-only mounts, once: a folder too large is no container fault
        archive = await to_thread(
            lambda: pack_folders(call.ro_mounts, limit=min(MAX_COPY_BYTES, self._tmpfs_room))
        )
        # One command at a time: the sweep after a command kills every process of the user.
        async with self._exec_lock:
            if self._warm.lock.locked():  # a cancelled call's command is being killed: what
                await to_thread(self._warm.settled)  # it made is moved once it is gone
            watch = self._watch.before()
            if self._container is not None and watch.mounted != self._mounted:
                # a protected path made (or removed) on the host since the container started:
                # its mounts are fixed, so a new container mounts the ones there now
                async with self._lock:
                    await to_thread(self._drop_container, shielded=True)
                await self.start()
                self._watch.retake()  # its grant (as root) changed the files' change times
            # each way below returns once none of the command's processes is left: the warm
            # supervisor and the cold wrapper kill all of the user's, else a sweep does
            return self._watch.after(await self._run_one(argv, data, full_env, workdir,
                                                         timeout, archive))

    async def _run_one(
        self, argv: list[str], data: bytes | None, full_env: dict[str, str], workdir: str,
        timeout: float, archive: bytes,
    ) -> ExecResult:
        """Run one call, warm where a supervisor can run, else cold; see `run`."""
        if self._warm.problem is None:
            request = {"argv": argv, "env": full_env, "cwd": workdir, "timeout": timeout,
                       "rlimits": []}
            result = await self._run_warm(request, data, archive, timeout)
            if result is not None:
                return result  # else: the supervisor cannot run here, start cold

        async def cold(state: dict[str, Any]) -> ExecResult:
            return await to_thread(self._exec_sync, argv, data, full_env, workdir, timeout,
                                   state, archive)

        async def stop_cold(state: dict[str, Any]) -> None:
            # a thread that has not started the command yet sees the flag and does not
            state["cancelled"] = True
            if "started" in state:
                with contextlib.suppress(Exception):
                    await to_thread(self._sweep, shielded=True)

        return await self._at_most_twice(cold, stop_cold)

    async def _at_most_twice(
        self,
        attempt: Callable[[dict[str, Any]], Awaitable[T]],
        on_cancel: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> T:
        """Run ``attempt`` in the container; once more in a fresh one if Docker failed before
        the command started (so that nothing runs twice). ``on_cancel`` kills what a
        cancelled attempt started."""
        for tries in (1, 2):
            await self.start()
            state: dict[str, Any] = {}
            try:
                return await attempt(state)
            except SandboxUnavailableError:
                raise
            except SandboxError:
                # the container died or stopped answering: replace it
                async with self._lock:
                    await to_thread(self._drop_container, shielded=True)
                if tries == 2 or "started" in state:
                    raise
            except BaseException:
                await on_cancel(state)
                raise
        raise AssertionError("unreachable")

    async def _run_warm(
        self, request: dict[str, Any], data: bytes | None, archive: bytes, timeout: float
    ) -> ExecResult | None:
        """Run one call through the supervisor; ``None`` when none can run here."""

        async def warm(state: dict[str, Any]) -> ExecResult | None:
            handle = state["handle"] = ChildHandle()
            return await to_thread(
                self._warm_sync, request, data, archive, timeout, handle, state
            )

        async def stop_warm(state: dict[str, Any]) -> None:
            # a thread that has not taken the lock yet sees the flag and does not start it
            state["cancelled"] = True
            state["handle"].cancel()  # the supervisor kills it; its thread waits for that

        return await self._at_most_twice(warm, stop_warm)

    def _warm_sync(
        self, request: dict[str, Any], data: bytes | None, archive: bytes, timeout: float,
        handle: ChildHandle, state: dict[str, Any],
    ) -> ExecResult | None:
        with self._warm.lock:
            if state.get("cancelled"):
                raise SandboxError("the call was cancelled before the command started")
            container = self._container
            if container is None:
                raise SandboxError("the sandbox container is gone")
            api = self._connect().api
            with _docker_errors("start the warm supervisor in the sandbox container"):
                sup = self._warm.ensure(api, container)
                if sup is None:
                    return None
                if archive:
                    self._warm.unpack(api, container.id, archive)
            state["started"] = True
            start = time.monotonic()
            reply = sup.run(request, data, timeout + _GRACE, self.output_limit, handle)
            if reply is None or reply.left:
                # it died, hung (stopped by the command?) or could not kill everything: the
                # sweep kills every process of the commands' user, the supervisor too, so the
                # next call starts a new one rather than find this one dead mid-call
                self._warm.forget()
                self._sweep()
            return warm_result(reply, timeout, time.monotonic() - start,
                               limit=self.output_limit, memory_mb=self.memory_mb)

    def _exec_sync(
        self, argv: list[str], data: bytes | None, env: dict[str, str], workdir: str,
        timeout: float, state: dict[str, Any], archive: bytes,
    ) -> ExecResult:
        client, container = self._connect(), self._container
        if container is None:
            raise SandboxError("the sandbox container is gone")
        if archive:
            with _docker_errors("copy read-only folders into the sandbox container"):
                unpack_in(client.api, container.id, self.keeper, archive)
        env_list = [f"{k}={v}" for k, v in env.items()]
        start = time.monotonic()
        with _docker_errors("run a command in the sandbox container"):
            exec_id = client.api.exec_create(
                container.id, ["/bin/sh", "-c", _WRAPPER, f"{timeout:.3f}", *argv],
                stdin=bool(data), stdout=True, stderr=True, environment=env_list,
                workdir=workdir, user=self.user,
            )["Id"]
            state["started"] = True
            if state.get("cancelled"):
                raise SandboxError("the call was cancelled before the command started")
            sock = client.api.exec_start(exec_id, socket=True)
        if state.get("cancelled"):
            self._sweep()  # cancelled while starting: the first sweep may have missed
        raw: socket.socket = getattr(sock, "_sock", sock)
        # Feed stdin from another thread: a command that writes before it has read all its
        # input would otherwise block on a full pipe while we block on sending.
        feeder = threading.Thread(target=feed, args=(raw, data or b""), daemon=True)
        feeder.start()
        try:
            out, err, finished = read_frames(raw, start + timeout + _GRACE, self.output_limit)
        finally:
            close_exec_socket(sock, raw)
        if not finished:
            self._sweep()  # the in-container timeout failed to act; step in
        exit_code = self._exit_code(exec_id, finished)
        if finished and not state.get("cancelled") and (exit_code is None or exit_code >= 128):
            # The wrapper sweeps as it exits; a signal-sized code means it may have been killed
            # first (or the timeout fired), so sweep from outside. A cancelled call was swept
            # by the canceller, and a later command may be running by now.
            self._sweep()
        duration = time.monotonic() - start
        timed_out = not finished or (exit_code == 137 and duration >= timeout * 0.98)
        oom = False
        if exit_code == 137 and not timed_out:
            count = self._oom_count()
            oom, self._oom_baseline = count > self._oom_baseline, count
        if exit_code is None:
            exit_code = -9 if timed_out else -1
        return exec_result(
            exit_code=exit_code, out=out, err=err, duration=duration, timed_out=timed_out,
            timeout=timeout, oom=oom, memory_mb=self.memory_mb,
        )

    def _exit_code(self, exec_id: str, finished: bool) -> int | None:
        with _docker_errors("inspect a command in the sandbox container"):
            code = wait_exit(self._connect().api, exec_id, 5.0 if finished else 2.0)
        if code is None and finished:
            raise SandboxError("the command's output ended but Docker says it still runs")
        return code

    def _sweep(self) -> None:
        """Kill every process of the commands' user; replace a container that cannot."""
        container = self._container
        if container is None:
            return
        client = self._connect()
        try:
            with _docker_errors("kill what a command left in the sandbox container"):
                exec_id = client.api.exec_create(container.id, _SWEEP, user=self.user)["Id"]
                client.api.exec_start(exec_id)
                code = client.api.exec_inspect(exec_id).get("ExitCode")
            if code != 0:  # the exec could not even start (no pid left): start afresh
                raise SandboxError(f"the sweep exited with {code}")
        except SandboxError as exc:
            _log.info("replacing the sandbox container: %s", exc)
            self._drop_container()

    def _oom_count(self) -> int:
        container = self._container
        if container is None:
            return 0
        client = self._connect()
        with _docker_errors("read the container's OOM count"):
            exec_id = client.api.exec_create(container.id, ["/bin/sh", "-c", _OOM_READ])["Id"]
            text = client.api.exec_start(exec_id).decode(errors="replace")
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0


def _identity(path: str) -> tuple[int, int]:
    """``(st_dev, st_ino)`` of the folder at ``path``."""
    st = os.stat(path)
    return st.st_dev, st.st_ino
