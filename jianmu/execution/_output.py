"""A command's output: capped buffers, and the `ExecResult` with the sandbox's notes."""

from __future__ import annotations

from jianmu.execution.sandbox import ExecResult

__all__ = ("DEFAULT_OUTPUT_LIMIT", "CappedBuffer", "exec_result")

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


def exec_result(
    *, exit_code: int, out: CappedBuffer, err: CappedBuffer, duration: float,
    timed_out: bool, timeout: float, oom: bool, memory_mb: int | None,
) -> ExecResult:
    """The result of one command, with a note on stderr of why the sandbox killed it."""
    stderr = err.text()
    notes = []
    if timed_out:
        notes.append(f"killed at its timeout of {timeout:g} s")
    if oom:
        notes.append(f"killed for going past its memory limit of {memory_mb} MiB")
    if notes:
        stderr += ("\n" if stderr and not stderr.endswith("\n") else "") + "".join(
            f"[jianmu sandbox: {n}]\n" for n in notes
        )
    return ExecResult(
        exit_code=exit_code, stdout=out.text(), stderr=stderr, timed_out=timed_out,
        duration=duration, oom_killed=oom, truncated=bool(out.dropped or err.dropped),
    )
