"""`RunnableTool`: what a `ToolRunner` needs of a tool (a `jianmu.tools.Tool` has it all)."""

from __future__ import annotations

from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import anyio

    from jianmu.execution.sandbox import Sandbox
    from jianmu.execution.threads import WorkerPool

__all__ = ("RunnableTool",)


class RunnableTool(Protocol):
    """A tool as the runner sees it: its name, limits and effects, and two ways to run it."""

    @property
    def name(self) -> str:
        """The tool's name, for errors."""

    @property
    def timeout_seconds(self) -> float | None:
        """Its own per-call timeout; ``None`` for none."""

    @property
    def effect_tags(self) -> tuple[str, ...]:
        """Its side effects; ``http`` is refused while the network is off."""

    @property
    def sandboxed(self) -> bool:
        """Whether it runs code through the sandbox (`run_sandboxed`)."""

    @property
    def is_async(self) -> bool:
        """Whether it runs on the event loop (a timeout stops it) rather than in a thread."""

    async def invoke(
        self, args: dict[str, Any], *, limiter: anyio.CapacityLimiter | None = None,
        executor: Executor | WorkerPool | None = None,
    ) -> Any:
        """Run in-process with validated ``args``."""

    async def run_sandboxed(self, sandbox: Sandbox, **kwargs: Any) -> Any:
        """Run through ``sandbox``."""
