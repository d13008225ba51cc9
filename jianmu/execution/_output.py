"""Pieces both sandboxes share: capped output buffers, argv and cwd normalisation."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath

__all__ = ("DEFAULT_OUTPUT_LIMIT", "CappedBuffer", "normalise_argv", "relative_cwd")

DEFAULT_OUTPUT_LIMIT = 256 * 1024
"""Bytes kept of each of stdout and stderr; the rest is counted and dropped."""


class CappedBuffer:
    """Keeps the first ``limit`` bytes written to it and counts the rest."""

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"output limit must be a positive number of bytes, got {limit!r}")
        self.limit = limit
        self._chunks: list[bytes] = []
        self._kept = 0
        self.dropped = 0

    def write(self, data: bytes) -> None:
        """Append ``data``, keeping what fits under the limit."""
        room = self.limit - self._kept
        if room > 0:
            head = data[:room]
            self._chunks.append(head)
            self._kept += len(head)
        self.dropped += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        """The kept bytes decoded as UTF-8, with a note of how much was cut."""
        text = b"".join(self._chunks).decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n…[truncated by the sandbox: {self.dropped} more bytes]"
        return text


def normalise_argv(command: Sequence[str] | str) -> list[str]:
    """Turn a shell string into ``/bin/sh -c`` argv; check an argv list.

    Raises:
        ValueError: the command is empty or an argv item is not a string.
    """
    if isinstance(command, str):
        if not command.strip():
            raise ValueError("command is an empty string; pass a shell command or an argv list")
        return ["/bin/sh", "-c", command]
    argv = list(command)
    if not argv:
        raise ValueError("command is an empty list; pass at least the program to run")
    bad = [a for a in argv if not isinstance(a, str)]
    if bad:
        raise ValueError(f"every argv item must be a string, got {bad[0]!r} in {argv!r}")
    return argv


def relative_cwd(cwd: str | None) -> PurePosixPath:
    """Check that ``cwd`` stays inside the workspace and return it as a relative path.

    Raises:
        ValueError: ``cwd`` is absolute or climbs out with ``..``.
    """
    if cwd is None or cwd in ("", "."):
        return PurePosixPath(".")
    path = PurePosixPath(cwd)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(
            f"cwd {cwd!r} must be a path relative to the workspace without '..' "
            f"(for example 'src' or {shlex.quote('sub dir')})"
        )
    return path
