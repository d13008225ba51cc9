"""`ToolRunner`: runs tools under the execution constraints, in-process or through a sandbox,
and `RunnableTool`, what it needs of a tool."""

from __future__ import annotations

import math
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from jianmu import plugins
from jianmu.constraints import DEFAULT_IMAGE, DEFAULT_TIMEOUT_S, ExecutionConstraints
from jianmu.errors import ToolExecutionError, ToolTimeoutError
from jianmu.execution._deadlines import within
from jianmu.execution.threads import WorkerPool
from jianmu.execution.workspace import effective_root, reset_workspace, set_workspace

if TYPE_CHECKING:
    from jianmu.execution.sandbox import Sandbox

__all__ = ("RunnableTool", "ToolRunner")


class RunnableTool(Protocol):
    """A tool as the runner sees it: its name, limits and effects, and two ways to run it
    (a `jianmu.tools.Tool` has it all)."""

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
        self, args: dict[str, Any], *, executor: Executor | WorkerPool | None = None
    ) -> Any:
        """Run in-process with validated ``args``, a sync tool on ``executor``'s threads."""

    async def run_sandboxed(self, sandbox: Sandbox, **kwargs: Any) -> Any:
        """Run through ``sandbox``."""


def _takes_image(mode: str) -> bool:
    """Whether ``mode``'s sandbox class is given ``execution.docker_image`` (``takes_image``)."""
    return getattr(plugins.resolve("sandbox", mode), "takes_image", False) is True


class ToolRunner:
    """Runs tools under one set of `ExecutionConstraints`.

    Python tools run in-process under the timeout, sync ones in a bounded worker pool. Tools
    that set ``sandboxed = True`` (``bash``, ``python_repl``) run their command through
    `sandbox`, so the constraints, not the tool, decide where code runs: ``mode`` names a
    registered sandbox (`jianmu.plugins`): ``local`` is a `LocalSandbox`, ``docker`` a
    `DockerSandbox`, a plug-in its own class; each has no network unless ``network: true``
    (unset is off). The sandbox is built, and the isolation it promises checked, when the first
    sandboxed call comes: a runner whose calls all run in-process never touches one. The
    workspace is ``execution.workdir`` or the current folder; file tools see it through
    `jianmu.execution.workspace.current_workspace` while the runner runs them.

    Args:
        execution: The merged execution constraints; unset fields take the defaults.
        sandbox: Use this sandbox instead of building one from ``execution``.
        max_workers: Sync tools that may run at once in worker threads.
    """

    def __init__(
        self,
        execution: ExecutionConstraints | None = None,
        *,
        sandbox: Sandbox | None = None,
        max_workers: int = 8,
    ) -> None:
        if max_workers <= 0:
            raise ValueError(f"max_workers must be positive, got {max_workers!r}")
        self.execution = execution if execution is not None else ExecutionConstraints()
        # fixed now, not read from the context at each call: the guard checks paths against
        # this same folder (`effective_root`), whatever folder the process later runs in
        workdir = self.execution.workdir
        self.workspace = effective_root(workdir) if workdir else Path.cwd()
        self.max_workers = max_workers
        self._sandbox = sandbox
        # this runner's share of the process's tool threads (made with the first call)
        self._pool: WorkerPool | None = None

    @property
    def sandbox(self) -> Sandbox:
        """Where sandboxed tools run: the one given, else the mode's, built on first use.

        Raises:
            SandboxUnavailableError: the constraints ask for isolation this machine lacks
                (``network: false`` without bubblewrap or Docker, a process limit for root
                without control groups).
            MissingExtraError: ``mode: docker`` without the ``docker`` extra.
            ConfigError: the mode's class cannot be imported or is not a sandbox.
        """
        if self._sandbox is None:
            self._sandbox = self._build_sandbox()
        return self._sandbox

    @classmethod
    def from_execution_constraints(cls, execution: ExecutionConstraints | None) -> ToolRunner:
        """Build a runner from the constraints (its sandbox comes with the first sandboxed call)."""
        return cls(execution)

    @property
    def mode(self) -> str:
        """The registered sandbox mode: ``local``, ``docker`` or a plug-in's name."""
        return self.execution.mode or "local"

    def signature(self) -> tuple[Any, ...]:
        """The stable tuple of what makes two runners differ; equal tuples, same behaviour.

        Returns:
            ``(mode, image, network, timeout_s, memory_mb, cpus, pids, workdir)``; the image
            only for a mode whose sandbox takes one.
        """
        e = self.execution
        image = (e.docker_image or DEFAULT_IMAGE) if _takes_image(self.mode) else None
        return (self.mode, image, e.network, e.timeout_s, e.memory_mb, e.cpus, e.pids,
                str(self.workspace))

    def _build_sandbox(self) -> Sandbox:
        """The mode's sandbox class (`jianmu.plugins`), built from the constraints."""
        e = self.execution
        given = (("memory_mb", e.memory_mb), ("cpus", e.cpus), ("pids", e.pids))
        # unset limits are left to the sandbox's own defaults (a container always has some)
        options: dict[str, Any] = {k: v for k, v in given if v is not None}
        if _takes_image(self.mode):
            options["image"] = e.docker_image or DEFAULT_IMAGE
        sandbox: Sandbox = plugins.resolve("sandbox", self.mode)(
            # unset is off: only an operator's network: true lets sandboxed code out
            self.workspace, network=e.network is True,
            timeout=e.timeout_s or DEFAULT_TIMEOUT_S, **options,
        )
        return sandbox

    def timeout_for(self, tool: RunnableTool) -> float:
        """The call's timeout: the smaller of the tool's and the constraints' (inf if neither)."""
        given = (tool.timeout_seconds, self.execution.timeout_s)
        limits = [t for t in given if t is not None and t > 0]
        return min(limits) if limits else math.inf

    async def run(self, tool: RunnableTool, args: dict[str, Any]) -> Any:
        """Run ``tool`` with already-validated ``args`` and return its raw result.

        Raises:
            ToolExecutionError: the tool talks to the network (effect tag ``http``) while
                ``execution.network`` is false: such tools run in-process, where the
                sandbox's network cut does not reach them.
            SandboxUnavailableError: a sandboxed tool, and the isolation the constraints ask
                for is missing here (see `sandbox`): it never runs without it.
            ToolTimeoutError: the call ran past `timeout_for` (a sandboxed command is killed).
            Exception: whatever the tool raised.
        """
        if self.execution.network is False and "http" in tool.effect_tags:
            raise ToolExecutionError(
                f"tool {tool.name!r} uses the network, which is off in the execution constraints "
                "(execution.network: false); work without it, or ask for a run with "
                "execution.network: true"
            )
        if self._pool is None:
            if self.execution.workdir:  # else the current folder: it exists
                self.workspace.mkdir(parents=True, exist_ok=True)
            self._pool = WorkerPool(self.max_workers)
        timeout = self.timeout_for(tool)
        # a deadline shared with the calls that started with it (`within`)
        if tool.sandboxed:
            if timeout == math.inf:
                return await self._run_sandboxed(tool, args)
            return await within(self._run_sandboxed(tool, args), timeout,
                                lambda: self._timed_out(tool, timeout))
        # in-process; the folder was made with the pool above: no stat on every call
        token = set_workspace(self.workspace)
        try:
            if timeout == math.inf:
                return await tool.invoke(args, executor=self._pool)
            return await within(tool.invoke(args, executor=self._pool), timeout,
                                lambda: self._timed_out(tool, timeout))
        finally:
            reset_workspace(token)

    async def _run_sandboxed(self, tool: RunnableTool, args: dict[str, Any]) -> Any:
        """Through the sandbox, built and checked now if this is the first such call."""
        sandbox = self.sandbox
        token = set_workspace(self.workspace)
        try:
            await sandbox.start()
            return await tool.run_sandboxed(sandbox, **args)
        finally:
            reset_workspace(token)

    @staticmethod
    def _timed_out(tool: RunnableTool, timeout: float) -> ToolTimeoutError:
        """The error for a call that ran past ``timeout``."""
        sandboxed = tool.sandboxed
        # a thread cannot be killed: say so rather than claim the work stopped
        fate = "was stopped" if sandboxed or tool.is_async else (
            "was abandoned (a synchronous tool's thread finishes in the background)"
        )
        knob = "its timeout argument or execution.timeout_s" if sandboxed else (
            "its timeout_seconds or execution.timeout_s"
        )
        return ToolTimeoutError(
            f"tool {tool.name!r} did not finish within {timeout:g}s and {fate}; raise "
            f"{knob}, or make the call smaller"
        )

    async def release(self) -> None:
        """Close the sandbox at the end of a run but keep the worker pool for the next one.

        The sandbox starts again on its next use.
        """
        if self._sandbox is not None:
            await self._sandbox.close()

    async def close(self) -> None:
        """Close the sandbox (a Docker container is removed) and drop the sync calls not started
        yet; idempotent. The threads are the process's: they end once idle (`IDLE_S`)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()
        if self._sandbox is not None:
            await self._sandbox.close()

    async def __aenter__(self) -> ToolRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        built = "not built yet" if self._sandbox is None else type(self._sandbox).__name__
        return f"<ToolRunner mode={self.mode!r} sandbox={built}>"
