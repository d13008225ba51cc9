"""`DockerSandbox`'s warm path: one supervisor per container, run by one long ``docker exec``.

The supervisor (`jianmu.execution._supervisor_main`) runs in the container as the commands'
user, started once with ``docker exec -i`` and spoken to over that exec's socket: a call is a
frame there and back plus a fork and exec in the container, instead of a ``docker exec`` of
its own (tens of milliseconds in the daemon). The container has no capability to change
users, so the supervisor shares the commands' uid; it therefore runs in *sweep* mode (one
command at a time, and ``kill(-1)`` until nothing of that uid is left after each, as the cold
path's wrapper does), is not dumpable (a command can neither trace it nor open its pipes
through ``/proc``) and ignores every signal it may. A command can still SIGKILL or stop it:
its call then ends (at once, or at the host-side deadline), the host sweeps the user's
processes from outside, and the next call starts a new supervisor. After each command it
removes the System V objects and message queues the command left (its own uid owns them).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import socket
import struct
import threading
from typing import Any

from jianmu.errors import SandboxError
from jianmu.execution._docker_io import unpack_in
from jianmu.execution._output import CappedBuffer, exec_result
from jianmu.execution._warm import PART_SOURCES, SUPERVISOR_SOURCE, Reply, Supervisor
from jianmu.execution.sandbox import ExecResult

__all__ = ("DockerChannel", "DockerWarm", "warm_result")

_log = logging.getLogger("jianmu.execution.docker_sandbox")
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
        argv = [_PYTHON, "-I", "-S", "-c", SUPERVISOR_SOURCE, json.dumps(_CONFIG), *PART_SOURCES]
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
        with contextlib.suppress(OSError):
            self._sock.close()


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
        channel = DockerChannel(api, container.id, self._user)
        try:
            sup = Supervisor(channel, "docker-supervisor")
        except SandboxError:
            container.reload()
            if container.status != "running":
                raise SandboxError("the sandbox container stopped") from None
            why = channel.stderr.text().strip().splitlines()[-1:] or ["no message"]
            self._give_up(f"the warm supervisor did not start in the image ({why[0][:200]})")
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
