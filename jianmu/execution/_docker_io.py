"""Talking to a ``docker exec`` stream: feed stdin, read the output frames, copy a folder in.

A read-only container refuses docker's archive upload (``put_archive``), and ``exec`` cannot
add a mount to a running container. So a folder that a command must see read-only is sent as
a tar on an exec's stdin, unpacked by the container's *keeper* user into the ``/skills`` tmpfs
that only the keeper may write: the commands' user can read it, not change it. Each command's
mounts replace the previous ones there, so the tmpfs never fills up with old copies.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Mapping
from typing import Any

from jianmu.errors import SandboxError
from jianmu.execution._mounts import tar_folders
from jianmu.execution._output import CappedBuffer
from jianmu.execution.sandbox import MOUNT_ROOT

__all__ = ("feed", "pack_folders", "read_frames", "unpack_in", "wait_exit")

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
        with contextlib.suppress(OSError):
            sock.close()
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
