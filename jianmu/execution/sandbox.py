"""The `Sandbox` protocol: where code and commands from tools run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ("ExecResult", "Sandbox")


@dataclass(frozen=True, kw_only=True)
class ExecResult:
    """The outcome of one command in a sandbox."""

    exit_code: int
    """The process's exit status; negative for a signal, as `subprocess` reports it."""
    stdout: str = ""
    """Standard output, decoded as UTF-8 with replacement and cut to the sandbox's limit."""
    stderr: str = ""
    """Standard error, likewise."""
    timed_out: bool = False
    """Whether the command was killed at its timeout."""
    duration: float = 0.0
    """Wall time in seconds."""
    oom_killed: bool = False
    """Whether the command was killed for going past its memory limit."""
    truncated: bool = False
    """Whether stdout or stderr was cut."""

    @property
    def ok(self) -> bool:
        """Exit code zero and no timeout."""
        return self.exit_code == 0 and not self.timed_out


@runtime_checkable
class Sandbox(Protocol):
    """Runs commands in isolation. ``exec`` is the one working method."""

    workspace: Path
    """The host folder that the sandboxed code sees as its working directory."""

    async def start(self) -> None:
        """Prepare the sandbox (a container, a folder); idempotent."""
        ...

    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        stdin: str | bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run ``command`` (an argv list, or a shell string) and wait for it.

        ``cwd`` is relative to the workspace. On timeout the whole process group is killed
        and ``timed_out`` is set; the call returns, it does not raise. When the command's main
        process exits, whatever it left running in the background is killed too. Cancelling
        the call kills the command.
        """
        ...

    async def close(self) -> None:
        """Release everything the sandbox holds; idempotent."""
        ...
