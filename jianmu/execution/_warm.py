"""The host side of a warm supervisor (see `jianmu.execution._supervisor_main`).

A `Supervisor` owns one running supervisor through a `Channel` (a child's pipes, a ``docker
exec`` socket): calls send a framed request and wait for their reply, which one reader thread
hands out by id: to a thread blocked in `Supervisor.run`, or straight to an event loop's future
(`Supervisor.start`), so an async call costs no worker thread. When the supervisor dies, every
waiting call gets ``None`` and the sandbox starts a new one for the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from jianmu.errors import SandboxError
from jianmu.execution._child import ChildHandle, ChildOutcome
from jianmu.execution._output import CappedBuffer

__all__ = ("PART_SOURCES", "SUPERVISOR_SOURCE", "Channel", "Raw", "Reply", "Supervisor", "frame")

SUPERVISOR_SOURCE = (Path(__file__).with_name("_supervisor_main.py")).read_text()
"""The supervisor program, run as ``python3 -I -S -c SUPERVISOR_SOURCE <config> <parts>...``."""
PART_SOURCES = tuple(Path(__file__).with_name(name).read_text()
                     for name in ("_supervisor_spare.py", "_supervisor_isolation.py"))
"""Its other parts, passed as the arguments after the config: how a child is set up and forked
ahead; what keeps one command's kernel state from the next."""
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
    ) -> asyncio.Future[Raw]:
        """Send one command from the running event loop; the future settles with the raw
        reply, or ``None`` when the supervisor died or did not answer in ``wait`` (it is
        closed then). A large request is written by a pool thread, never blocking the loop.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Raw] = loop.create_future()
        call_id = next(self._ids)
        with self._lock:
            if not self.alive:
                fut.set_result(None)
                return fut
            self._slots[call_id] = _LoopSlot(loop, fut)
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
            return fut

        def kill(_wait: float) -> None:
            with contextlib.suppress(OSError):
                self._send({"op": "kill", "id": call_id})

        handle.attach(kill)
        timer = loop.call_later(wait, self._expired, fut)
        fut.add_done_callback(lambda _f: timer.cancel())
        return fut

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
