"""`FakeSandbox`: a handler-driven stand-in for tests of code that uses a `Sandbox`."""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable

from jianmu.execution.sandbox import BaseSandbox, ExecCall, ExecResult

__all__ = ("ExecCall", "FakeSandbox")


Handler = Callable[[ExecCall], ExecResult | Awaitable[ExecResult]]


class FakeSandbox(BaseSandbox):
    """Answers every `exec` with ``handler(call)``; records calls; runs nothing.

    Read-only mounts are accepted and recorded in `ExecCall.ro_mounts` (nothing is mounted).

    Args:
        handler: Returns (or awaits to) the `ExecResult` for a call.
        workspace: The folder it claims as its workspace; default: cwd.
        read_only_mounts: Whether it offers `MountingSandbox`; ``False`` plays a sandbox that
            does not.
    """

    def __init__(
        self, handler: Handler, *, workspace: str | os.PathLike[str] | None = None,
        read_only_mounts: bool = True,
    ) -> None:
        super().__init__(workspace)
        self.handler = handler
        self.read_only_mounts = read_only_mounts
        self.calls: list[ExecCall] = []
        self.started = self.closed = False

    async def start(self) -> None:
        """Mark the sandbox started."""
        self.started = True

    async def close(self) -> None:
        """Mark the sandbox closed."""
        self.closed = True

    async def run(self, call: ExecCall) -> ExecResult:
        """Record the call and return the handler's result."""
        self.calls.append(call)
        result = self.handler(call)
        if inspect.isawaitable(result):
            result = await result
        return result
