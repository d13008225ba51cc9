"""`LocalSandbox`'s warm path: one supervisor per sandbox, a control group per command.

The supervisor runs in one bubblewrap namespace (or, without bubblewrap, as a plain child)
and is started from one long-lived thread of the sandbox: bubblewrap's ``--die-with-parent``
follows the thread that started it, and a pool thread may end at any time. That thread also
removes each used control group after the call returned and makes the next one ahead, so a
call only sends a request and waits for its reply.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from jianmu.errors import SandboxError
from jianmu.execution._bwrap import CGROUP_MOUNT, supervisor_argv
from jianmu.execution._cgroup import CgroupNest, CgroupSupport, CommandCgroup
from jianmu.execution._child import ChildHandle
from jianmu.execution._warm import SUPERVISOR_SOURCE, Reply, Supervisor

__all__ = ("LocalWarm", "PipeChannel", "supervisor_python")

_log = logging.getLogger("jianmu.execution.local_sandbox")
_GRACE = 5.0  # host-side slack past the supervisor's own timeout


def supervisor_python() -> str:
    """The interpreter a supervisor runs on: the system's, else this one."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


class PipeChannel:
    """A supervisor that is our child process, spoken to over its stdin and stdout."""

    def __init__(self, argv: list[str], cwd: str) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=cwd, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            start_new_session=True,
        )

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self.proc.stdin.fileno(), view):]

    def recv(self) -> bytes:
        assert self.proc.stdout is not None
        return os.read(self.proc.stdout.fileno(), 1 << 20)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # bwrap's whole namespace, if any
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)


class LocalWarm:
    """The warm supervisor of one `LocalSandbox`, restarted when it dies."""

    def __init__(
        self, *, support: CgroupSupport, bwrap: dict[str, Any] | None, user: tuple[int, int]
        | None, cwd: Path, limits: dict[str, Any],
    ) -> None:
        self._support, self._bwrap, self._user, self._cwd = support, bwrap, user, cwd
        self._limits = limits
        self._owner = ThreadPoolExecutor(1, thread_name_prefix="jianmu-warm")
        self._nest: CgroupNest | None = None
        self._spare: Future[CommandCgroup] | None = None
        self._sup: Supervisor | None = None
        self._sup_lock = threading.Lock()
        self.starts = 0
        """How many supervisors this sandbox started (a restart counts)."""

    @property
    def supervisor(self) -> Supervisor | None:
        """The running supervisor, if any."""
        return self._sup

    def _start(self) -> Supervisor:
        """Start a supervisor (on the owner thread); the nest is made once."""
        if self._nest is None:
            self._nest = CgroupNest(self._support)
        config = {"user": list(self._user) if self._user else None,
                  "capbset": self._user is not None}
        argv = [supervisor_python(), "-I", "-S", "-c", SUPERVISOR_SOURCE, json.dumps(config)]
        if self._bwrap is not None:
            assert self._user is not None
            argv = supervisor_argv(argv, user=self._user, cgroups=self._nest.folders,
                                   **self._bwrap)
        sup = Supervisor(PipeChannel(argv, str(self._cwd)), "supervisor")
        self.starts += 1
        if self.starts > 1:
            _log.info("restarted the warm sandbox supervisor (start %d)", self.starts)
        return sup

    def _supervisor(self) -> Supervisor:
        with self._sup_lock:
            sup = self._sup
            if sup is None or not sup.alive:
                sup = self._sup = self._owner.submit(self._start).result()
            return sup

    def _group(self) -> CommandCgroup:
        spare, self._spare = self._spare, None
        if spare is not None:
            with contextlib.suppress(SandboxError):
                return spare.result()
        assert self._nest is not None
        return self._nest.command(**self._limits)

    def _in_view(self, path: str) -> str:
        """A host path of the nest as the supervisor sees it."""
        if self._bwrap is None or self._nest is None:
            return path
        for index, folder in enumerate(self._nest.folders):
            if path.startswith(folder + "/"):
                return f"{CGROUP_MOUNT}/{index}{path[len(folder):]}"
        raise AssertionError(f"{path} is outside the sandbox's control groups")

    def run(
        self, request: dict[str, Any], data: bytes | None, timeout: float, limit: int,
        handle: ChildHandle,
    ) -> Reply | None:
        """Run one command in a fresh control group; ``None`` if the supervisor died.

        Raises:
            SandboxError: the command could not be started.
        """
        sup = self._supervisor()
        group = self._group()
        memory = group.dirs.get("memory")
        oom = [] if memory is None else [str(memory / (
            "memory.events" if self._support.version == 2 else "memory.oom_control"))]
        reply = None
        try:
            reply = sup.run(
                {**request, "procs": [self._in_view(p) for p in group.procs_files],
                 "oom": [self._in_view(p) for p in oom]},
                data, timeout + _GRACE, limit, handle,
            )
        finally:
            if reply is None or reply.left:
                group.kill_all(wait=1.0)  # the supervisor could not: nothing may outlive us
            with contextlib.suppress(RuntimeError):  # closing: the caller removes the nest
                self._owner.submit(group.remove)
                self._spare = self._owner.submit(self._nest.command, **self._limits) \
                    if self._nest is not None else None
        return reply

    def close(self) -> None:
        """Stop the supervisor, kill what runs in the nest and remove it; idempotent."""
        sup, self._sup = self._sup, None
        if sup is not None:
            sup.close()
        self._owner.shutdown(wait=True)
        nest, self._nest = self._nest, None
        if nest is not None:
            nest.remove()
