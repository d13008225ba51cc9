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

    Args:
        handler: Returns (or awaits to) the `ExecResult` for a call.
        workspace: The folder it claims as its workspace; default: cwd.
    """

    def __init__(
        self, handler: Handler, *, workspace: str | os.PathLike[str] | None = None
    ) -> None:
        super().__init__(workspace)
        self.handler = handler
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
