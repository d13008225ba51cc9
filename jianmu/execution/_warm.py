"""The host side of a warm supervisor (the program is `jianmu.execution._supervisor`).

A `Supervisor` owns one running supervisor through a `Channel` (a child's pipes, a ``docker
exec`` socket): calls send a framed request and wait for their reply, which one reader thread
hands out by id: to a thread blocked in `Supervisor.run`, or straight to an event loop's future
(`Supervisor.start`), so an async call costs no worker thread. When the supervisor dies, every
waiting call gets ``None`` and the sandbox starts a new one for the next call.

`LocalWarm` is `LocalSandbox`'s warm path: one supervisor per sandbox, a control group per
command. The supervisor runs in one bubblewrap namespace (or, without bubblewrap, as a plain
child) and is started from one long-lived thread of the sandbox: bubblewrap's
``--die-with-parent`` follows the thread that started it, and a pool thread may end at any
time. That thread also makes control groups ahead of the calls and removes the used ones (at
once when the supervisor could not empty one; one it saw empty while the next call runs), so a
call only sends a request from the event loop and awaits its reply there (the supervisor's
reader thread settles the future), and the supervisor runs it in a child forked ahead. A call
cancelled from outside returns at once, its kill sent: its reply and the removal of its group
are `LocalWarm.ending`, which the sandbox's next call waits for, so that nothing of it runs
when what it made is moved (`jianmu.execution._protect`).
(`DockerSandbox`'s warm path is in `jianmu.execution._docker`.)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from jianmu.errors import SandboxError
from jianmu.execution._bwrap import CGROUP_MOUNT, Protected, mqueue_available, supervisor_argv
from jianmu.execution._process import CgroupNest, ChildHandle, ChildOutcome, CommandCgroup
from jianmu.execution.sandbox import CappedBuffer

__all__ = (
    "SUPERVISOR_SOURCE",
    "Channel",
    "LocalWarm",
    "PipeChannel",
    "Raw",
    "Reply",
    "Supervisor",
    "frame",
    "supervisor_python",
)

SUPERVISOR_SOURCE = (Path(__file__).with_name("_supervisor.py")).read_text()
"""The supervisor program, run as ``python3 -I -S -c SUPERVISOR_SOURCE <config JSON>``."""
_HEAD = struct.Struct(">II")
_READY_TIMEOUT = 30.0
_INLINE = 1 << 15  # requests up to this size are written from the event loop itself
Raw = tuple[dict[str, Any], bytes] | None
"""A reply's header and payload, or ``None`` when the supervisor died or did not answer."""


def frame(header: dict[str, Any], payload: bytes = b"") -> bytes:
    """One protocol frame: lengths, the JSON header, the payload."""
    data = json.dumps(header).encode()
    return _HEAD.pack(len(data), len(payload)) + data + payload


class Channel(Protocol):
    """A byte stream to one supervisor."""

    def send(self, data: bytes) -> None:
        """Write all of ``data`` (raises OSError when the supervisor is gone)."""
        ...

    def recv(self) -> bytes:
        """Read what is there, blocking; ``b""`` at the end."""
        ...

    def close(self) -> None:
        """Stop the supervisor and release the stream."""
        ...


@dataclass(frozen=True, kw_only=True)
class Reply(ChildOutcome):
    """What the supervisor said about one finished command: a cold child's outcome, and more."""

    left: int
    """Processes of the command still in its control group after the supervisor's kill."""
    preforked: bool = False
    """Whether the command ran in a child the supervisor had forked ahead of the call."""


class _Slot:
    """Where a reply goes: a thread waiting on an event."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.header: dict[str, Any] | None = None
        self.payload = b""

    def deliver(self, header: dict[str, Any] | None, payload: bytes) -> None:
        self.header, self.payload = header, payload
        self.done.set()


class _LoopSlot(_Slot):
    """Where a reply goes: a future of an event loop, settled on that loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Raw]) -> None:
        super().__init__()
        self.loop, self.fut = loop, fut

    def deliver(self, header: dict[str, Any] | None, payload: bytes) -> None:
        super().deliver(header, payload)  # seen off the loop too: a cancelled call's end
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(_settle, self.fut, header, payload)


def _settle(fut: asyncio.Future[Raw], header: dict[str, Any] | None, payload: bytes) -> None:
    if not fut.done():
        fut.set_result(None if header is None else (header, payload))


class Supervisor:
    """One running supervisor: requests out, replies in by id, dead once its stream ends."""

    def __init__(self, channel: Channel, name: str) -> None:
        self._channel = channel
        self._ids = itertools.count(1)
        self._slots: dict[int, _Slot] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ready = _Slot()
        self.alive = True
        self.pid: int | None = None
        """The supervisor's pid as it sees itself (in its own pid namespace, if any)."""
        self._reader = threading.Thread(target=self._read, name=f"jianmu-{name}", daemon=True)
        self._reader.start()
        if not self._ready.done.wait(_READY_TIMEOUT) or self._ready.header is None:
            self.close()
            raise SandboxError("the warm supervisor did not start")
        self.pid = self._ready.header.get("ready")
        self.guarded = bool(self._ready.header.get("guarded"))
        """Whether the supervisor made itself undumpable (no ptrace, no ``/proc`` pipes)."""

    def _read(self) -> None:
        buf = bytearray()
        try:
            while True:
                chunk = self._channel.recv()
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= _HEAD.size:
                    hlen, plen = _HEAD.unpack_from(buf)
                    if len(buf) < _HEAD.size + hlen + plen:
                        break
                    header = json.loads(bytes(buf[_HEAD.size:_HEAD.size + hlen]))
                    payload = bytes(buf[_HEAD.size + hlen:_HEAD.size + hlen + plen])
                    del buf[:_HEAD.size + hlen + plen]
                    self._deliver(header, payload)
        except (OSError, ValueError):
            pass  # a broken stream or a garbled frame: the supervisor is no longer trusted
        finally:
            self.alive = False
            with self._lock:
                slots, self._slots = list(self._slots.values()), {}
            self._ready.done.set()
            for slot in slots:
                slot.deliver(None, b"")
            with contextlib.suppress(Exception):
                self._channel.close()

    def _deliver(self, header: dict[str, Any], payload: bytes) -> None:
        if "ready" in header:
            self._ready.header = header
            self._ready.done.set()
            return
        with self._lock:
            slot = self._slots.pop(header.get("id", -1), None)
        if slot is None:
            raise ValueError(f"a reply to no request: {header!r}")
        slot.deliver(header, payload)

    def _send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        with self._send_lock:
            self._channel.send(frame(header, payload))

    def run(
        self, request: dict[str, Any], data: bytes | None, wait: float, limit: int,
        handle: ChildHandle,
    ) -> Reply | None:
        """Run one command; ``None`` when the supervisor died or did not answer in ``wait``.

        Raises:
            SandboxError: the supervisor could not start the command.
        """
        call_id = next(self._ids)
        slot = _Slot()
        with self._lock:
            if not self.alive:
                return None
            self._slots[call_id] = slot
        try:
            self._send({**request, "op": "run", "id": call_id, "limit": limit}, data or b"")
        except OSError:
            self.close()
            return None

        def kill(_wait: float) -> None:
            with contextlib.suppress(OSError):
                self._send({"op": "kill", "id": call_id})

        handle.attach(kill)
        if not slot.done.wait(wait) or slot.header is None:
            self.close()  # it stopped answering: a fresh one serves the next call
            return None
        return self.reply((slot.header, slot.payload), limit)

    def start(
        self, request: dict[str, Any], data: bytes | None, wait: float, limit: int,
        handle: ChildHandle,
    ) -> tuple[asyncio.Future[Raw], threading.Event]:
        """Send one command from the running event loop; the future settles with the raw
        reply, or ``None`` when the supervisor died or did not answer in ``wait`` (it is
        closed then). A large request is written by a pool thread, never blocking the loop.
        The event is set, on any thread, once the reply came or the supervisor is gone.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Raw] = loop.create_future()
        call_id = next(self._ids)
        slot = _LoopSlot(loop, fut)
        with self._lock:
            if not self.alive:
                fut.set_result(None)
                slot.done.set()
                return fut, slot.done
            self._slots[call_id] = slot
        message = frame({**request, "op": "run", "id": call_id, "limit": limit}, data or b"")
        try:
            if len(message) <= _INLINE and self._send_lock.acquire(blocking=False):
                try:  # a small frame into a pipe the supervisor drains: no thread needed
                    self._channel.send(message)
                finally:
                    self._send_lock.release()
            else:
                sending = loop.run_in_executor(None, self._send_frame, message)
                sending.add_done_callback(lambda done: self._sent(done, fut))
        except OSError:
            self._lost(fut)
            return fut, slot.done

        def kill(_wait: float) -> None:
            with contextlib.suppress(OSError):
                self._send({"op": "kill", "id": call_id})

        handle.attach(kill)
        timer = loop.call_later(wait, self._expired, fut)
        fut.add_done_callback(lambda _f: timer.cancel())
        return fut, slot.done

    def _send_frame(self, message: bytes) -> None:
        with self._send_lock:
            self._channel.send(message)

    def _sent(self, sending: asyncio.Future[None], fut: asyncio.Future[Raw]) -> None:
        if sending.cancelled() or sending.exception() is not None:
            self._lost(fut)

    def _lost(self, fut: asyncio.Future[Raw]) -> None:
        """The supervisor is no longer usable: ``None`` now, closed in the background."""
        _settle(fut, None, b"")
        self.alive = False
        threading.Thread(target=self.close, name="jianmu-supervisor-close", daemon=True).start()

    def _expired(self, fut: asyncio.Future[Raw]) -> None:
        """No reply in time: it stopped answering, a fresh one serves the next call."""
        if not fut.done():
            self._lost(fut)

    def reply(self, raw: tuple[dict[str, Any], bytes], limit: int) -> Reply:
        """The `Reply` in a raw reply.

        Raises:
            SandboxError: the supervisor could not start the command.
        """
        header, payload = raw
        if header.get("error"):
            raise SandboxError(str(header["error"]))
        out, err = CappedBuffer(limit), CappedBuffer(limit)
        out.write(payload[:header["out"]])
        err.write(payload[header["out"]:header["out"] + header["err"]])
        out.dropped += header["out_dropped"]
        err.dropped += header["err_dropped"]
        return Reply(
            exit_code=header["exit"], stdout=out, stderr=err, timed_out=header["timed_out"],
            duration=header["duration"], oom_kills=header["oom"], left=header.get("left", 0),
            preforked=bool(header.get("prefork")),
        )

    def close(self) -> None:
        """Stop the supervisor (it kills its commands when its input ends); idempotent."""
        self.alive = False
        with contextlib.suppress(Exception):
            self._channel.close()


_log = logging.getLogger("jianmu.execution.local_sandbox")
_GRACE = 5.0  # host-side slack past the supervisor's own timeout
_AHEAD = 2  # control groups made ahead: the next call's and the one it names as next
Limits = tuple[tuple[str, int | float | None], ...]
"""A control group's limits (``pids``, ``memory_bytes``, ``cpus``), hashable."""


def supervisor_python() -> str:
    """The interpreter a supervisor runs on: the system's, else this one."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


class PipeChannel:
    """A supervisor that is our child process, spoken to over its stdin and stdout."""

    def __init__(self, argv: list[str], cwd: str, pass_fds: tuple[int, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=cwd, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            start_new_session=True, pass_fds=pass_fds,
        )

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self.proc.stdin.fileno(), view):]

    def recv(self) -> bytes:
        assert self.proc.stdout is not None
        data = os.read(self.proc.stdout.fileno(), 1 << 20)
        if not data:  # closed by its one reader, at the end: else a ResourceWarning at exit
            self.proc.stdout.close()
        return data

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # bwrap's whole namespace, if any
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)


class LocalWarm:
    """The warm supervisor of one `LocalSandbox`, restarted when it dies.

    Control groups are made ahead of the calls (a pool of `_AHEAD`, by the owner thread) and
    removed after them, so a call takes a ready group and names the next one: the supervisor
    forks that command's child into it once this command is over (its `Prefork`).
    """

    def __init__(
        self, *, nest: CgroupNest, bwrap: dict[str, Any] | None, user: tuple[int, int]
        | None, cwd: Path, seccomp: bytes | None,
        protect: Callable[[], Protected] = tuple,
    ) -> None:
        self._support, self._bwrap, self._user, self._cwd = nest.support, bwrap, user, cwd
        # the workspace's read-only paths, looked up (and opened) at each supervisor's start
        self._protect = protect
        self._seccomp = seccomp
        self._owner = ThreadPoolExecutor(1, thread_name_prefix="jianmu-warm")
        self._nest: CgroupNest | None = nest
        self._pool: deque[tuple[Limits, Future[CommandCgroup]]] = deque()
        self._spent: list[CommandCgroup] = []  # used and found empty, not yet removed
        self.ending: Future[None] | None = None
        """Done once no process of the last cancelled command is left (`run` returned at once,
        before the supervisor killed it): its reply came (or the supervisor is gone), then
        its group was removed. The sandbox waits for it before moving what the command made."""
        self._sup: Supervisor | None = None
        self._sup_lock = threading.Lock()
        self.starts = 0
        """How many supervisors this sandbox started (a restart counts)."""
        self.preforked = 0
        """How many commands ran in a child forked ahead of their call."""
        self.mounted: frozenset[str] = frozenset()
        """The protected paths the running supervisor's namespace shows read-only (their
        paths inside): fixed at its start, so a sandbox restarts it when they change."""

    @property
    def supervisor(self) -> Supervisor | None:
        """The running supervisor, if any."""
        return self._sup

    def _start(self) -> Supervisor:
        """Start a supervisor (on the owner thread)."""
        assert self._nest is not None
        config = {"user": list(self._user) if self._user else None,
                  "capbset": self._user is not None, "prefork": True,
                  "seccomp": self._seccomp.hex() if self._seccomp else None,
                  # bubblewrap's IPC namespace is the sandbox's own, emptied after each call
                  # (a root supervisor there may not make one per call); without it, a root
                  # supervisor gives each call one (else calls share the host's: documented)
                  "clear_ipc": self._bwrap is not None,
                  "mqueue": "/dev/mqueue" if mqueue_available() else None,
                  "own_ipc": self._bwrap is None and os.geteuid() == 0}
        argv = [supervisor_python(), "-I", "-S", "-c", SUPERVISOR_SOURCE, json.dumps(config)]
        fds: tuple[int, ...] = ()
        if self._bwrap is not None:
            assert self._user is not None
            protected = self._protect()
            fds = tuple(source for source, _ in protected if isinstance(source, int))
            self.mounted = frozenset(target for _, target in protected)
            argv = supervisor_argv(argv, user=self._user, cgroups=self._nest.folders,
                                   protected=protected, **self._bwrap)
        try:
            sup = Supervisor(PipeChannel(argv, str(self._cwd), fds), "supervisor")
        finally:
            for fd in fds:
                os.close(fd)  # bwrap holds its own copies once started
        self.starts += 1
        if self.starts > 1:
            _log.info("restarted the warm sandbox supervisor (start %d)", self.starts)
        return sup

    @property
    def upcoming(self) -> CommandCgroup | None:
        """The control group the next call takes, once made (its child may wait there)."""
        if not self._pool or not self._pool[0][1].done():
            return None
        made = self._pool[0][1]
        return None if made.exception() is not None else made.result()

    def _ensure(self) -> Supervisor:
        """The running supervisor, started if needed (on the owner thread)."""
        with self._sup_lock:
            sup = self._sup
            if sup is None or not sup.alive:
                sup = self._sup = self._start()
            return sup

    def _make(self, limits: Limits) -> CommandCgroup:
        assert self._nest is not None
        given: dict[str, Any] = dict(limits)
        return self._nest.command(**given)

    def _fill(self, limits: Limits) -> None:
        """Make groups ahead (on the owner thread) until `_AHEAD` are pooled."""
        with contextlib.suppress(RuntimeError):  # closing: no new groups
            while len(self._pool) < _AHEAD:
                self._pool.append((limits, self._owner.submit(self._make, limits)))

    async def _take(self, limits: Limits) -> CommandCgroup:
        """A ready group with these limits; pooled ones with other limits are removed."""
        while self._pool:
            key, made = self._pool.popleft()
            if key != limits:
                self._retire(made)
                continue
            with contextlib.suppress(SandboxError):
                return made.result() if made.done() else await asyncio.wrap_future(made)
        return await asyncio.wrap_future(self._owner.submit(self._make, limits))

    def _next(self, limits: Limits) -> CommandCgroup | None:
        """The group the next call will take, if it is made and has these limits."""
        return self.upcoming if self._pool and self._pool[0][0] == limits else None

    def _retire(self, made: Future[CommandCgroup] | CommandCgroup) -> Future[None] | None:
        """Kill what is left in a group and remove it, on the owner thread."""
        def work() -> None:
            group = made.result() if isinstance(made, Future) else made
            group.remove()

        try:
            return self._owner.submit(work)
        except RuntimeError:  # closing: the caller removes the nest
            return None

    def _in_view(self, path: str) -> str:
        """A host path of the nest as the supervisor sees it."""
        if self._bwrap is None or self._nest is None:
            return path
        for index, folder in enumerate(self._nest.folders):
            if path.startswith(folder + "/"):
                return f"{CGROUP_MOUNT}/{index}{path[len(folder):]}"
        raise AssertionError(f"{path} is outside the sandbox's control groups")

    def _oom_files(self, group: CommandCgroup) -> list[str]:
        memory = group.dirs.get("memory")
        if memory is None:
            return []
        name = "memory.events" if self._support.version == 2 else "memory.oom_control"
        return [self._in_view(str(memory / name))]

    async def run(
        self, request: dict[str, Any], data: bytes | None, timeout: float, limit: int,
        handle: ChildHandle, limits: Limits,
    ) -> Reply | None:
        """Run one command in a fresh control group; ``None`` if the supervisor died.

        Raises:
            SandboxError: the command could not be started.
        """
        self.ending = None  # the sandbox waited for the last one's before this call
        sup = self._sup
        if sup is None or not sup.alive:
            sup = await asyncio.wrap_future(self._owner.submit(self._ensure))
        group = await self._take(limits)
        upcoming = self._next(limits)
        nxt = None if upcoming is None else {
            "procs": [self._in_view(p) for p in upcoming.procs_files], "cwd": request["cwd"]}
        try:
            fut, replied = sup.start(
                {**request, "procs": [self._in_view(p) for p in group.procs_files],
                 "oom": self._oom_files(group), "next": nxt},
                data, timeout + _GRACE, limit, handle,
            )
        except BaseException:
            self._retire(group)
            raise
        # The owner thread's work goes while the command runs, not beside the request or the
        # reply: on a small machine it would compete with them (for a core and for the GIL).
        # A group the supervisor saw empty is removed then too (or at close, with the nest).
        self._fill(limits)
        spent, self._spent = self._spent, []
        for old in spent:
            self._retire(old)
        try:
            raw = await asyncio.shield(fut)
        except BaseException:  # cancelled: the group goes once the supervisor has answered
            self.ending = self._end(sup, replied, group, timeout + _GRACE)
            raise
        if raw is not None and raw[0].get("empty") and not raw[0].get("left"):
            self._spent.append(group)  # seen empty, and nothing enters it: removed later
        else:
            retired = self._retire(group)
            if retired is not None and (raw is None or raw[0].get("left")):
                await asyncio.wrap_future(retired)  # it could not: nothing may outlive us
        if raw is None:
            return None
        reply = sup.reply(raw, limit)
        self.preforked += reply.preforked
        return reply

    def _end(
        self, sup: Supervisor, replied: threading.Event, group: CommandCgroup, wait: float
    ) -> Future[None] | None:
        """Wait for a cancelled command's reply, then remove its group (killing what is left),
        on the owner thread; off any event loop (the one that sent it may be closed by then)."""
        def work() -> None:
            if not replied.wait(wait):
                sup.close()  # it stopped answering: a fresh one serves the next call
            group.remove()

        try:
            return self._owner.submit(work)
        except RuntimeError:  # closing: the caller removes the nest, with what runs in it
            return None

    def restart(self) -> None:
        """Stop the running supervisor (blocking): the next call starts a new one, with the
        read-only mounts of the paths that exist then."""
        with self._sup_lock:
            sup, self._sup = self._sup, None
        if sup is not None:
            sup.close()

    def close(self) -> None:
        """Stop the supervisor; idempotent (the sandbox removes the nest, with the groups
        made ahead and whatever still runs in them)."""
        sup, self._sup = self._sup, None
        if sup is not None:
            sup.close()
        self._owner.shutdown(wait=True)
        self._nest = None
