"""`RunContext`: what the runner hands every node (never globals)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from jianmu.config import AppConfig
from jianmu.constraints import Constraints
from jianmu.runtime.events import EventBus
from jianmu.runtime.interaction import Interaction

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from jianmu.runtime.steps import StepRecorder

__all__ = ("RunContext", "run_constraints")

T = TypeVar("T")


def _noop() -> None:
    return None


@dataclass(kw_only=True)
class RunContext:
    """The run's configuration, constraints, event bus, interaction channel and tracer."""

    config: AppConfig = field(default_factory=AppConfig)
    """The loaded configuration."""
    constraints: Constraints = field(default_factory=Constraints)
    """The constraints in force for this run (config layer merged with the caller's)."""
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    """Id of the run, kept across checkpoint and restore."""
    events: EventBus = field(default_factory=EventBus)
    """The runtime event bus."""
    interaction: Interaction | None = field(default_factory=Interaction)
    """The channel to a person; ``None`` means nobody can approve (confirm becomes deny)."""
    tracer: Tracer | None = None
    """OpenTelemetry tracer for spans; ``None`` disables tracing."""
    user_roles: frozenset[str] = frozenset()
    """Roles of the user who started the run (``admin`` unlocks admin_only tools)."""
    wake: Callable[[], None] = _noop
    """Wakes the runner; thread-safe."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Anything a host wants nodes to reach (services, clients)."""
    cancelled_tasks: set[asyncio.Task[Any]] = field(default_factory=set, repr=False)
    """Tasks of pre-empted nodes; the runner lets them finish their ``finally`` blocks."""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list, repr=False)
    """Async callbacks the runner awaits when the run ends (not when it suspends)."""
    runner: Any = field(default=None, repr=False)
    """The `ReactiveRunner` ticking this run (for nodes that compile subtrees lazily)."""
    steps: StepRecorder | None = field(default=None, repr=False)
    """Records model turns and tool calls when the run is durable (`jianmu.durable`)."""

    def __post_init__(self) -> None:
        if not self.events.run_id:
            self.events.run_id = self.run_id

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Await ``closer`` when the run ends (sandboxes, connections); once per closer."""
        if closer not in self.closers:
            self.closers.append(closer)

    async def step(self, key: str, factory: Callable[[], Awaitable[T]]) -> T:
        """Run ``factory()`` as the step ``key``: once per durable run, replayed on recovery."""
        steps = self.steps
        if steps is None:
            return await factory()
        return await steps.run(key, factory)

    @property
    def checkpointed(self) -> bool:
        """Whether the run has a checkpointer (`save_checkpoint` saves something)."""
        return getattr(self.runner, "checkpointer", None) is not None

    def save_checkpoint(self) -> None:
        """Checkpoint the run now, if it has a checkpointer (after a side effect, say)."""
        if self.checkpointed:
            self.runner.save_checkpoint()


def run_constraints(*layers: Constraints | None) -> Constraints:
    """The run's constraints: the layers merged, a given workdir made absolute.

    An unset workdir stays unset: it means the working folder, and a skill's layer is measured
    against that folder (`ExecutionConstraints.tightened_by`), while a node the operator wrote
    may still choose its own workspace, as it may when the config names none.
    """
    merged = Constraints.merge(*layers)
    if merged.execution.workdir is None:
        return merged
    workdir = os.path.abspath(os.path.expanduser(merged.execution.workdir))
    return merged.model_copy(
        update={"execution": merged.execution.model_copy(update={"workdir": workdir})}
    )
