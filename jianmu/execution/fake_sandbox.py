"""`FakeSandbox`: a handler-driven stand-in for tests of code that uses a `Sandbox`."""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jianmu.execution._output import normalise_argv, relative_cwd
from jianmu.execution.sandbox import ExecResult

__all__ = ("ExecCall", "FakeSandbox")


@dataclass(frozen=True, kw_only=True)
class ExecCall:
    """One call that a `FakeSandbox` received."""

    argv: list[str]
    """The command as argv (a shell string becomes ``/bin/sh -c``)."""
    stdin: bytes | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "."
    timeout: float | None = None


Handler = Callable[[ExecCall], ExecResult | Awaitable[ExecResult]]


class FakeSandbox:
    """Answers every `exec` with ``handler(call)``; records calls; runs nothing.

    Args:
        handler: Returns (or awaits to) the `ExecResult` for a call.
        workspace: The folder it claims as its workspace; default: cwd.
    """

    def __init__(
        self, handler: Handler, *, workspace: str | os.PathLike[str] | None = None
    ) -> None:
        self.handler = handler
        self.workspace = Path(workspace if workspace is not None else Path.cwd()).absolute()
        self.calls: list[ExecCall] = []
        self.started = self.closed = False

    async def start(self) -> None:
        """Mark the sandbox started."""
        self.started = True

    async def close(self) -> None:
        """Mark the sandbox closed."""
        self.closed = True

    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        stdin: str | bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Record the call and return the handler's result."""
        call = ExecCall(
            argv=normalise_argv(command),
            stdin=stdin.encode() if isinstance(stdin, str) else stdin,
            env=dict(env or {}), cwd=str(relative_cwd(cwd)), timeout=timeout,
        )
        self.calls.append(call)
        result = self.handler(call)
        if inspect.isawaitable(result):
            result = await result
        return result
