"""`DockerSandbox`: one locked-down container per runner, commands run in it with ``exec``.

The container has no network unless asked, a memory limit with swap equal to it, a CPU share, a
process limit, a read-only root, no capabilities, ``no-new-privileges``, an unprivileged user,
a tmpfs ``/tmp`` and the workspace bind-mounted at ``/workspace``. Files move through that bind
mount: docker's archive copy fails on a read-only container and on tmpfs paths.

Each command runs under ``timeout -s KILL`` inside the container, which kills its process
group; every process carries a ``JIANMU_EXEC`` token in its environment, so that anything the
command left behind (even outside its group) is killed when it returns. A host-side deadline
backs this up and replaces the container if it stops answering.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

# the defaults live with the constraints, whose merge measures a skill's layer against them
from jianmu.constraints import (
    DEFAULT_IMAGE,
    DEFAULT_TIMEOUT_S,
    DOCKER_CPUS,
    DOCKER_MEMORY_MB,
    DOCKER_PIDS,
)
from jianmu.errors import MissingExtraError, SandboxError, SandboxUnavailableError
from jianmu.execution._output import (
    DEFAULT_OUTPUT_LIMIT,
    CappedBuffer,
    normalise_argv,
    relative_cwd,
)
from jianmu.execution.sandbox import ExecResult

if TYPE_CHECKING:
    import docker

__all__ = ("DEFAULT_IMAGE", "DockerSandbox")


_log = logging.getLogger(__name__)
_LABEL = "jianmu.sandbox"
_GRACE = 5.0  # host-side slack past the in-container timeout before we step in
_CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Kill every process (but ourselves) whose environment holds this command's token.
_SWEEP = (
    'for p in /proc/[0-9]*; do [ "$p" = "/proc/$$" ] && continue; '
    'grep -qsxz "JIANMU_EXEC=$JIANMU_EXEC" "$p/environ" && kill -9 "${p#/proc/}" 2>/dev/null; '
    "done"
)
_WRAPPER = f'timeout -s KILL "$0" "$@"; rc=$?; {_SWEEP}; exit $rc'
_OOM_READ = (
    "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null"
)


def _import_docker() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise MissingExtraError("docker", "docker") from exc
    return docker


@contextlib.contextmanager
def _docker_errors(action: str, image: str | None = None) -> Iterator[None]:
    """Translate docker-py and requests errors into Jianmu's, naming the fix."""
    docker = _import_docker()
    import requests

    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise SandboxUnavailableError(
            f"the sandbox image {image!r} is not present; build it with `make sandbox-image` "
            "or `jianmu sandbox build-image`"
        ) from exc
    except (docker.errors.APIError, docker.errors.NotFound) as exc:
        raise SandboxError(f"Docker refused to {action}: {exc.explanation or exc}") from exc
    except docker.errors.DockerException as exc:
        raise SandboxUnavailableError(
            f"cannot {action}: the Docker daemon does not answer ({exc}); start it with "
            "`dockerd > /var/log/dockerd.log 2>&1 &` (or `systemctl start docker`), or set "
            "DOCKER_HOST"
        ) from exc
    except requests.exceptions.RequestException as exc:
        # wait()/exec calls with a timeout raise these, not docker errors.
        raise SandboxError(f"Docker did not answer while trying to {action}: {exc}") from exc


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DockerSandbox:
    """Runs commands in one long-lived, locked-down container.

    Args:
        workspace: Host folder bind-mounted at ``/workspace``; created if missing.
        image: The image to run; see `jianmu.execution.image.build_image`. Any image with
            ``/bin/sh``, ``sleep``, GNU ``timeout`` and ``grep`` works.
        network: ``True`` gives the container the default bridge network.
        memory_mb: Memory (and memory plus swap) limit of the container, in MiB.
        cpus: CPU share of the container.
        pids: Process limit of the container.
        user: ``uid:gid`` to run as; default: yours, or ``65534:65534`` (nobody) for root.
            That user needs write access to the workspace for commands to write there.
        tmpfs_mb: Size of the tmpfs ``/tmp``, in MiB.
        timeout: Default timeout of `exec`, in seconds.
        output_limit: Bytes kept of each of stdout and stderr.
        env: Variables added to every command's environment.
        base_url: Docker daemon address; default: the environment (``DOCKER_HOST``).
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        *,
        image: str = DEFAULT_IMAGE,
        network: bool = False,
        memory_mb: int = DOCKER_MEMORY_MB,
        cpus: float = DOCKER_CPUS,
        pids: int = DOCKER_PIDS,
        user: str | None = None,
        tmpfs_mb: int = 64,
        timeout: float = DEFAULT_TIMEOUT_S,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        env: Mapping[str, str] | None = None,
        base_url: str | None = None,
    ) -> None:
        for label, value in (("memory_mb", memory_mb), ("cpus", cpus), ("pids", pids),
                             ("tmpfs_mb", tmpfs_mb), ("timeout", timeout),
                             ("output_limit", output_limit)):
            if value <= 0:
                raise ValueError(f"{label} must be positive, got {value!r}")
        if not image or not isinstance(image, str):
            raise ValueError(f"image must be a non-empty image name, got {image!r}")
        _import_docker()  # fail now, not at the first call, when the extra is missing
        self.workspace = Path(workspace if workspace is not None else Path.cwd()).absolute()
        self.image, self.network = image, network
        self.memory_mb, self.cpus, self.pids, self.tmpfs_mb = memory_mb, cpus, pids, tmpfs_mb
        if user is None:
            user = "65534:65534" if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}"
        self.user = user
        self.timeout, self.output_limit = timeout, output_limit
        self.env = dict(env or {})
        self.base_url = base_url
        self._client: docker.DockerClient | None = None
        self._container: Any = None
        self._oom_baseline = 0
        self._lock = anyio.Lock()

    @property
    def container_id(self) -> str | None:
        """The running container's id, once started."""
        return self._container.id if self._container is not None else None

    async def start(self) -> None:
        """Connect to Docker, check the image and start the container; idempotent.

        Raises:
            MissingExtraError: docker-py is not installed.
            SandboxUnavailableError: no daemon answers, or the image is missing.
        """
        async with self._lock:
            if self._container is None:
                await anyio.to_thread.run_sync(self._start_sync)

    async def close(self) -> None:
        """Remove the container and close the client; idempotent."""
        async with self._lock:
            await anyio.to_thread.run_sync(self._close_sync)

    async def __aenter__(self) -> DockerSandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

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
        client = self._connect()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._check_workspace_access()
        with _docker_errors(f"find the image {self.image!r}", self.image):
            client.images.get(self.image)
        self._remove_stale(client)
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
                user=self.user,
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={self.tmpfs_mb}m,mode=1777"},
                volumes={str(self.workspace): {"bind": "/workspace", "mode": "rw"}},
                working_dir="/workspace",
                environment={"HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                             "PATH": _CONTAINER_PATH},
            )
        self._oom_baseline = self._oom_count()

    def _check_workspace_access(self) -> None:
        """Log when the container's user will not be able to write to the workspace."""
        uid, _, gid = self.user.partition(":")
        try:
            st = self.workspace.stat()
        except OSError:
            return
        if not uid.isdigit():
            return
        if int(uid) == st.st_uid:
            writable = bool(st.st_mode & 0o200)
        elif gid.isdigit() and int(gid) == st.st_gid:
            writable = bool(st.st_mode & 0o020)
        else:
            writable = bool(st.st_mode & 0o002)
        if not writable:
            _log.warning(
                "the sandbox runs as %s, which cannot write to the workspace %s (owner %d, "
                "mode %o); commands can read it but not write it: chown/chmod the folder or "
                "pass user=", self.user, self.workspace, st.st_uid, st.st_mode & 0o777,
            )

    @staticmethod
    def _remove_stale(client: docker.DockerClient) -> None:
        """Remove containers whose owning process on this host has died."""
        host = socket.gethostname()
        with _docker_errors("list old sandbox containers"):
            stale = client.containers.list(
                all=True, filters={"label": [f"{_LABEL}=1", f"jianmu.owner_host={host}"]}
            )
        for container in stale:
            pid = container.labels.get("jianmu.owner_pid", "")
            if pid.isdigit() and not _pid_alive(int(pid)):
                with contextlib.suppress(Exception), _docker_errors("remove a stale container"):
                    container.remove(force=True)

    def _close_sync(self) -> None:
        container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(SandboxError), _docker_errors("remove the container"):
                container.remove(force=True)
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _drop_container(self) -> None:
        """Forget a container that stopped answering; the next call starts a fresh one."""
        container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(Exception), _docker_errors("remove the container"):
                container.remove(force=True)

    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        stdin: str | bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run ``command`` in the container and wait for it; see `Sandbox.exec`.

        Raises:
            ValueError: an empty command, or ``cwd`` outside the workspace.
            SandboxError: Docker failed twice in a row, even with a fresh container.
            SandboxUnavailableError: no daemon, or no image.
        """
        argv = normalise_argv(command)
        workdir = str(PurePosixPath("/workspace") / relative_cwd(cwd))
        timeout = self.timeout if timeout is None else timeout
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        data = stdin.encode() if isinstance(stdin, str) else stdin
        full_env = {**self.env, **(env or {})}
        for attempt in (1, 2):
            await self.start()
            state: dict[str, Any] = {}
            try:
                return await anyio.to_thread.run_sync(
                    self._exec_sync, argv, data, full_env, workdir, timeout, state,
                    abandon_on_cancel=True,
                )
            except SandboxUnavailableError:
                raise
            except SandboxError:
                # The container died or stopped answering: replace it. Retry only when the
                # command never started, so that nothing runs twice.
                async with self._lock:
                    await anyio.to_thread.run_sync(self._drop_container)
                if attempt == 2 or "token" in state:
                    raise
            except BaseException:
                # Cancelled from outside: kill what we started; a thread that has not started
                # the command yet sees the flag and does not start it.
                state["cancelled"] = True
                token = state.get("token")
                if token is not None:
                    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                        await anyio.to_thread.run_sync(self._kill_token, token)
                raise
        raise AssertionError("unreachable")

    def _exec_sync(
        self, argv: list[str], data: bytes | None, env: dict[str, str], workdir: str,
        timeout: float, state: dict[str, Any],
    ) -> ExecResult:
        client, container = self._connect(), self._container
        if container is None:
            raise SandboxError("the sandbox container is gone")
        token = uuid.uuid4().hex
        env_list = [f"{k}={v}" for k, v in env.items()] + [f"JIANMU_EXEC={token}"]
        start = time.monotonic()
        with _docker_errors("run a command in the sandbox container"):
            exec_id = client.api.exec_create(
                container.id, ["/bin/sh", "-c", _WRAPPER, f"{timeout:.3f}", *argv],
                stdin=bool(data), stdout=True, stderr=True, environment=env_list,
                workdir=workdir,
            )["Id"]
            state["token"] = token
            if state.get("cancelled"):
                raise SandboxError("the call was cancelled before the command started")
            sock = client.api.exec_start(exec_id, socket=True)
        if state.get("cancelled"):
            self._kill_token(token)  # cancelled while starting: the first kill may have missed
        raw: socket.socket = getattr(sock, "_sock", sock)
        # Feed stdin from another thread: a command that writes before it has read all its
        # input would otherwise block on a full pipe while we block on sending.
        feeder = threading.Thread(target=_feed, args=(raw, data or b""), daemon=True)
        feeder.start()
        try:
            out, err, finished = _read_frames(raw, start + timeout + _GRACE, self.output_limit)
        finally:
            with contextlib.suppress(OSError):
                sock.close()
        if not finished:
            self._kill_token(token)  # in-container timeout failed to act; step in
        exit_code = self._exit_code(exec_id, finished)
        duration = time.monotonic() - start
        timed_out = not finished or (exit_code == 137 and duration >= timeout * 0.98)
        oom = False
        if exit_code == 137 and not timed_out:
            count = self._oom_count()
            oom, self._oom_baseline = count > self._oom_baseline, count
        notes = []
        if timed_out:
            notes.append(f"killed at its timeout of {timeout:g} s")
            exit_code = exit_code if exit_code is not None else -9
        if oom:
            notes.append(f"killed for going past its memory limit of {self.memory_mb} MiB")
        stderr = err.text()
        if notes:
            stderr += ("\n" if stderr and not stderr.endswith("\n") else "") + "".join(
                f"[jianmu sandbox: {n}]\n" for n in notes
            )
        return ExecResult(
            exit_code=exit_code if exit_code is not None else -1,
            stdout=out.text(), stderr=stderr, timed_out=timed_out, duration=duration,
            oom_killed=oom, truncated=bool(out.dropped or err.dropped),
        )

    def _exit_code(self, exec_id: str, finished: bool) -> int | None:
        client = self._connect()
        deadline = time.monotonic() + (5.0 if finished else 2.0)
        while True:
            with _docker_errors("inspect a command in the sandbox container"):
                info = client.api.exec_inspect(exec_id)
            if not info.get("Running"):
                return int(info.get("ExitCode") or 0)
            if time.monotonic() > deadline:
                if finished:
                    raise SandboxError("the command's output ended but Docker says it still runs")
                return None
            time.sleep(0.01)  # the stream closes a moment before the exec is marked done

    def _kill_token(self, token: str) -> None:
        """Kill every process of one command; a container that cannot do it is replaced."""
        container = self._container
        if container is None:
            return
        client = self._connect()
        try:
            with _docker_errors("kill a command in the sandbox container"):
                exec_id = client.api.exec_create(
                    container.id, ["/bin/sh", "-c", _SWEEP],
                    environment=[f"JIANMU_EXEC={token}"],
                )["Id"]
                client.api.exec_start(exec_id)
        except SandboxError:
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


def _feed(raw: socket.socket, data: bytes) -> None:
    """Send stdin, then half-close so that the command sees end-of-file."""
    with contextlib.suppress(OSError):
        if data:
            raw.sendall(data)
        raw.shutdown(socket.SHUT_WR)


def _read_frames(
    raw: socket.socket, deadline: float, limit: int
) -> tuple[CappedBuffer, CappedBuffer, bool]:
    """Read Docker's multiplexed stream (8-byte headers) until EOF or the deadline."""
    out, err = CappedBuffer(limit), CappedBuffer(limit)
    buf = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return out, err, False
        raw.settimeout(remaining)
        try:
            chunk = raw.recv(65536)
        except TimeoutError:
            return out, err, False
        except OSError:
            chunk = b""
        if not chunk:
            return out, err, True
        buf += chunk
        while len(buf) >= 8:
            kind, size = buf[0], struct.unpack(">I", buf[4:8])[0]
            if len(buf) < 8 + size:
                break
            (err if kind == 2 else out).write(buf[8:8 + size])
            buf = buf[8 + size:]
