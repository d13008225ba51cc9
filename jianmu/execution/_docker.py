"""What `DockerSandbox` says to Docker: docker-py and its errors, ``docker exec`` streams,
folders copied in read-only, and the warm supervisor run by one long ``docker exec``.

**Errors.** docker-py is imported on first use (`import_docker`), and its errors and requests'
are translated into Jianmu's in one place (`docker_errors`), naming the fix.

**Read-only folders.** A read-only container refuses docker's archive upload (``put_archive``),
and ``exec`` cannot add a mount to a running container. So a folder that a command must see
read-only is packed on the host from a descriptor reached without following symlinks
(`tar_folders`: regular files and folders only, so unpacking can never write through a link),
sent as a tar on an exec's stdin and unpacked by the container's *keeper* user into the
``/skills`` tmpfs that only the keeper may write: the commands' user can read it, not change it.
Each command's mounts replace the previous ones there, so the tmpfs never fills up with old
copies.

**Warm** (`DockerWarm`). The supervisor (`jianmu.execution._supervisor`) runs in the container
as the commands' user, started once with ``docker exec -i`` and spoken to over that exec's
socket: a call is a frame there and back plus a fork and exec in the container, instead of a
``docker exec`` of its own (tens of milliseconds in the daemon). The container has no capability
to change users, so the supervisor shares the commands' uid; it therefore runs in *sweep* mode
(one command at a time, and ``kill(-1)`` until nothing of that uid is left after each, as the
cold path's wrapper does), is not dumpable (a command can neither trace it nor open its pipes
through ``/proc``) and ignores every signal it may. A command can still SIGKILL or stop it: its
call then ends (at once, or at the host-side deadline), the host sweeps the user's processes
from outside, and the next call starts a new supervisor. After each command it removes the
System V objects and message queues the command left (its own uid owns them).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import socket
import stat
import struct
import tarfile
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from jianmu.errors import MissingExtraError, SandboxError, SandboxUnavailableError
from jianmu.execution._warm import SUPERVISOR_SOURCE, Reply, Supervisor
from jianmu.execution.sandbox import (
    MOUNT_ROOT,
    CappedBuffer,
    ExecResult,
    exec_result,
    open_mount_source,
)

__all__ = (
    "MAX_COPY_BYTES",
    "DockerChannel",
    "DockerWarm",
    "close_exec_socket",
    "docker_errors",
    "feed",
    "import_docker",
    "pack_folders",
    "read_frames",
    "tar_folders",
    "unpack_in",
    "wait_exit",
    "warm_result",
)

_log = logging.getLogger("jianmu.execution.docker_sandbox")



# --- docker-py ----------------------------------------------------------------------------


def close_exec_socket(sock: Any, raw: socket.socket) -> None:
    """Close an exec's attached socket: docker-py's wrapper and the socket under it (closing
    the wrapper alone leaves the socket open until it is collected, as an unclosed one)."""
    for each in (sock, raw):
        with contextlib.suppress(OSError):
            each.close()

def import_docker() -> Any:
    """The ``docker`` package, or a `MissingExtraError` naming the extra."""
    try:
        import docker
    except ImportError as exc:
        raise MissingExtraError("docker", "docker") from exc
    return docker


@contextlib.contextmanager
def docker_errors(action: str, image: str | None = None) -> Iterator[None]:
    """Translate docker-py and requests errors into Jianmu's, naming the fix."""
    docker = import_docker()
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


# --- exec streams and read-only folders ---------------------------------------------------

_COPY_TIMEOUT = 60.0
# As the keeper, in the folder the commands' user cannot write: remove the previous copies
# (read-only, so made writable first; the folder holds only what this copies in), unpack.
_UNPACK = (
    'set -e; cd "$1"; for d in ./* ./.[!.]*; do [ -e "$d" ] || continue; '
    'chmod -R u+w "$d"; rm -rf "$d"; done; tar -x -f - --no-same-owner'
)


def feed(raw: socket.socket, data: bytes) -> None:
    """Send stdin, then half-close so that the command sees end-of-file."""
    with contextlib.suppress(OSError):
        if data:
            raw.sendall(data)
        raw.shutdown(socket.SHUT_WR)


def read_frames(
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


def pack_folders(mounts: Mapping[str | int, str], *, limit: int) -> bytes:
    """One tar of every mount's host folder, each under its target's name (`tar_folders`);
    empty when there is none.

    Raises:
        SandboxError: a folder cannot be reached without a symlink, or they are too large.
    """
    if not mounts:
        return b""
    names = {target.rpartition("/")[2]: host for host, target in mounts.items()}
    return tar_folders(names, limit=limit)


def unpack_in(api: Any, container_id: str, user: str, archive: bytes) -> None:
    """Replace what ``/skills`` holds by ``archive``, as ``user`` (the keeper).

    Raises:
        SandboxError: the container could not unpack it.
    """
    exec_id = api.exec_create(
        container_id, ["/bin/sh", "-c", _UNPACK, "sh", MOUNT_ROOT], stdin=True, stdout=True,
        stderr=True, user=user,
    )["Id"]
    sock = api.exec_start(exec_id, socket=True)
    raw: socket.socket = getattr(sock, "_sock", sock)
    feeder = threading.Thread(target=feed, args=(raw, archive), daemon=True)
    feeder.start()
    try:
        _out, err, finished = read_frames(raw, time.monotonic() + _COPY_TIMEOUT, 4096)
    finally:
        close_exec_socket(sock, raw)
    code = wait_exit(api, exec_id, 5.0) if finished else None
    if code != 0:
        raise SandboxError(
            f"could not unpack the read-only folders in the container (exit code {code}): "
            f"{err.text().strip() or 'no message'}"
        )


def wait_exit(api: Any, exec_id: str, wait: float) -> int | None:
    """The exec's exit code, or ``None`` if it still runs after ``wait`` seconds (the stream
    closes a moment before Docker marks the exec done)."""
    deadline = time.monotonic() + wait
    while True:
        info = api.exec_inspect(exec_id)
        if not info.get("Running"):
            return int(info.get("ExitCode") or 0)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


MAX_COPY_BYTES = 32 * 1024 * 1024
"""The largest folder (file bytes) a sandbox copies in for a read-only mount."""
_MAX_ENTRIES = 10_000
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def tar_folders(folders: Mapping[str, str | int], *, limit: int = MAX_COPY_BYTES) -> bytes:
    """An uncompressed tar holding each host folder of ``folders`` under its name: their
    sub-folders and regular files, read-only.

    Each folder is reached with `open_mount_source` (by path, or by a pinned descriptor).
    Symbolic links, devices, sockets and pipes are left out, so unpacking the archive can
    never write through a link. Folders and executable files get mode 0555, other files 0444.

    Raises:
        SandboxError: a folder cannot be reached without a symlink, or together they hold more
            than ``limit`` bytes or too many entries.
    """
    buf = io.BytesIO()
    budget = _Budget(limit)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, host in folders.items():
            fd = open_mount_source(host)
            try:
                tar.addfile(_info(name, tarfile.DIRTYPE, 0o555, os.fstat(fd)))
                _add_folder(tar, fd, f"{name}/", budget)
            finally:
                os.close(fd)
    return buf.getvalue()


class _Budget:
    """What is left to copy: bytes and entries."""

    def __init__(self, limit: int) -> None:
        self.limit, self.bytes, self.entries = limit, limit, _MAX_ENTRIES

    def entry(self) -> None:
        self.entries -= 1
        if self.entries < 0:
            raise SandboxError(f"the folder has more than {_MAX_ENTRIES:,} entries to copy")

    def take(self, size: int) -> None:
        self.bytes -= size
        if self.bytes < 0:
            raise SandboxError(f"the folder holds more than {self.limit:,} bytes to copy")


def _add_folder(tar: tarfile.TarFile, dir_fd: int, prefix: str, budget: _Budget) -> None:
    for name in sorted(os.listdir(dir_fd)):
        budget.entry()
        member = f"{prefix}{name}"
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                child = os.open(name, _DIR, dir_fd=dir_fd)
                try:
                    tar.addfile(_info(member, tarfile.DIRTYPE, 0o555, os.fstat(child)))
                    _add_folder(tar, child, member + "/", budget)
                finally:
                    os.close(child)
            elif stat.S_ISREG(st.st_mode):
                _add_file(tar, dir_fd, name, member, budget)
        except OSError:
            continue  # swapped for a link or removed meanwhile: left out, never followed


def _add_file(tar: tarfile.TarFile, dir_fd: int, name: str, member: str, budget: _Budget) -> None:
    fd = os.open(name, _FILE, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        budget.take(st.st_size)
        data = fh.read(st.st_size)
    mode = 0o555 if st.st_mode & 0o111 else 0o444
    info = _info(member, tarfile.REGTYPE, mode, st)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _info(name: str, kind: bytes, mode: int, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = kind, mode, int(st.st_mtime)
    return info


# --- the warm supervisor ------------------------------------------------------------------

# cgroup v1 and v2 names of the container's memory counters, as seen inside it
_OOM_FILES = ["/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"]
_PYTHON = "python3"  # the image's: the supervisor needs only its standard library and ctypes
# clear_ipc: the container's IPC namespace outlives each command; what one left there (System V
# objects, message queues, all the user's) is removed before the next (Docker's default
# seccomp profile already refuses the keyring)
_CONFIG = {
    "sweep": True, "shield": True, "inherit_env": True, "shell_codes": True,
    "require_guard": True, "oom": _OOM_FILES, "user": None, "capbset": False,
    "clear_ipc": True, "mqueue": "/dev/mqueue",
}


class DockerChannel:
    """A supervisor's stdin and stdout over its ``docker exec`` socket (stderr kept aside)."""

    def __init__(self, api: Any, container_id: str, user: str) -> None:
        argv = [_PYTHON, "-I", "-S", "-c", SUPERVISOR_SOURCE, json.dumps(_CONFIG)]
        self.exec_id = api.exec_create(
            container_id, argv, stdin=True, stdout=True, stderr=True, user=user,
            workdir="/workspace",
        )["Id"]
        self._sock = api.exec_start(self.exec_id, socket=True)
        self._raw: socket.socket = getattr(self._sock, "_sock", self._sock)
        self._raw.settimeout(None)  # the reader blocks between calls; silence is no failure
        self._buf = bytearray()
        self.stderr = CappedBuffer(4096)
        """What the supervisor wrote to stderr (why it did not start, say)."""

    def send(self, data: bytes) -> None:
        self._raw.sendall(data)

    def recv(self) -> bytes:
        """The next stdout bytes of Docker's multiplexed stream (8-byte frame headers)."""
        while True:
            out = bytearray()
            while len(self._buf) >= 8:
                size = struct.unpack_from(">I", self._buf, 4)[0]
                if len(self._buf) < 8 + size:
                    break
                payload = bytes(self._buf[8:8 + size])
                kind = self._buf[0]
                del self._buf[:8 + size]
                if kind == 2:
                    self.stderr.write(payload)
                else:
                    out += payload
            if out:
                return bytes(out)
            chunk = self._raw.recv(1 << 20)
            if not chunk:
                return b""
            self._buf += chunk

    def close(self) -> None:
        """End the exec's stdin: the supervisor kills what it runs and exits."""
        with contextlib.suppress(OSError):
            self._raw.shutdown(socket.SHUT_RDWR)
        close_exec_socket(self._sock, self._raw)


class DockerWarm:
    """The warm supervisor of one `DockerSandbox`: started on demand, restarted when it dies."""

    def __init__(self, user: str, keeper: str) -> None:
        self._user, self._keeper = user, keeper
        self._sup: Supervisor | None = None
        self._unpacked: tuple[str, bytes] | None = None
        self.lock = threading.Lock()
        """Held by the thread of each call until its command is over, cancelled or not: the
        sweep after one command would kill the next."""
        self.starts = 0
        """How many supervisors were started (a restart counts)."""
        self.problem: str | None = None
        """Why commands start cold from now on, or ``None``."""

    @property
    def supervisor(self) -> Supervisor | None:
        """The running supervisor, if any."""
        return self._sup

    def settled(self) -> None:
        """Block until no call's command runs: a cancelled call returned before its thread
        saw its command killed (blocking)."""
        with self.lock:
            pass

    def ensure(self, api: Any, container: Any) -> Supervisor | None:
        """The running supervisor, started if needed; ``None`` when none can run (`problem`).

        Raises:
            SandboxError: the container itself is gone or stopped (docker errors pass too).
        """
        sup = self._sup
        if sup is not None and sup.alive:
            return sup
        self._sup = None
        if self.problem is not None:
            return None
        sup = self._start(api, container)
        if sup is None:
            return None
        if not sup.guarded:
            sup.close()
            self._give_up("the warm supervisor could not make itself undumpable (no ctypes "
                          "in the image's python3)")
            return None
        self.starts += 1
        if self.starts > 1:
            _log.info("restarted the warm sandbox supervisor (start %d)", self.starts)
        self._sup = sup
        return sup

    def _start(self, api: Any, container: Any) -> Supervisor | None:
        """A new supervisor; ``None`` (and `problem` said) when two starts in a row failed:
        one start lost to a busy daemon is tried once more before every command goes cold."""
        for attempt in (1, 2):
            channel = DockerChannel(api, container.id, self._user)
            try:
                return Supervisor(channel, "docker-supervisor")
            except SandboxError:
                container.reload()
                if container.status != "running":
                    raise SandboxError("the sandbox container stopped") from None
                why = (channel.stderr.text().strip().splitlines()[-1:] or ["no message"])[0]
                if attempt == 1:
                    _log.info("the warm sandbox supervisor did not start (%s): again", why[:200])
                    continue
                self._give_up(f"the warm supervisor did not start in the image ({why[:200]})")
        return None

    def _give_up(self, problem: str) -> None:
        self.problem = problem
        _log.warning("DockerSandbox: every command starts cold from now on (%s)", problem)

    def unpack(self, api: Any, container_id: str, archive: bytes) -> None:
        """Copy read-only folders into ``/skills`` unless the same ones are there already.

        Only the keeper may write there, so what was unpacked stays as it was.
        """
        key = (container_id, hashlib.sha256(archive).digest())
        if self._unpacked != key:
            self._unpacked = None
            unpack_in(api, container_id, self._keeper, archive)
            self._unpacked = key

    def forget(self) -> None:
        """Stop the supervisor (it hung, or its container goes); idempotent."""
        sup, self._sup = self._sup, None
        if sup is not None:
            sup.close()


def warm_result(
    reply: Reply | None, timeout: float, elapsed: float, *, limit: int, memory_mb: int
) -> ExecResult:
    """The result of one warm call; a signal's death reads ``128 + n``, as from a shell."""
    if reply is None:  # the supervisor died or hung: everything was swept
        out, err = CappedBuffer(limit), CappedBuffer(limit)
        timed_out = elapsed >= timeout
        if not timed_out:
            err.write(b"[jianmu sandbox: the supervisor died during the command]\n")
        return exec_result(
            exit_code=137 if timed_out else -1, out=out, err=err, duration=elapsed,
            timed_out=timed_out, timeout=timeout, oom=False, memory_mb=memory_mb,
        )
    code = reply.exit_code if reply.exit_code >= 0 else 128 - reply.exit_code
    return exec_result(
        exit_code=code, out=reply.stdout, err=reply.stderr, duration=reply.duration,
        timed_out=reply.timed_out, timeout=timeout, oom=reply.oom_kills > 0,
        memory_mb=memory_mb,
    )
