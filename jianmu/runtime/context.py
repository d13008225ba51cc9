"""`RunContext`: what the runner hands every node (never globals).

`StepRecorder` is the seam through which a durable engine records a run's steps. A plain run
has no recorder: a step is just its coroutine. A durable run (`jianmu.durable`) puts one in
`RunContext.steps`; it runs each step once, stores its result under the step's key, and on
recovery hands the stored result back instead of running the step again. The keys are stable
across re-executions of the same run: a model turn is ``model:{node path}`` (numbered by the
recorder per key), a tool call is ``tool:{call id}``.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from jianmu.config import AppConfig, default_config
from jianmu.constraints import Constraints, is_read_only, read_only
from jianmu.runtime.events import EventBus
from jianmu.runtime.interaction import Interaction

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = (
    "RunContext",
    "StepRecorder",
    "run_constraints",
)


T = TypeVar("T")


def _noop() -> None:
    return None


@dataclass(kw_only=True)
class RunContext:
    """The run's configuration, constraints, event bus, interaction channel and tracer."""

    config: AppConfig = field(default_factory=default_config)
    """The loaded configuration (`default_config`, shared and read-only, when none is given)."""
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
    running_calls: dict[object, int] = field(default_factory=dict, repr=False)
    """Admitted tool calls still running, per batch; shared with the runs of sub-agents, whose
    guard counts them as made (an agent tool's own call ends only after its sub-agent's)."""

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

    Read-only layers (the default configuration's) give one read-only result, merged once:
    the runs that nobody gave constraints share it rather than each copying the defaults.
    """
    present = [layer for layer in layers if layer is not None]
    if not present or not all(is_read_only(layer) for layer in present):
        return _merged(present)
    key = tuple(id(layer) for layer in present)
    shared = _shared_constraints.get(key)
    if shared is None:
        shared = _merged(present)
        if shared.execution.workdir is not None:  # made absolute from the working folder,
            return shared  # which may change: merged anew every time
        shared = _shared_constraints[key] = read_only(shared)
    return shared


_shared_constraints: dict[tuple[int, ...], Constraints] = {}
"""`run_constraints` of read-only layers (which live for good: their ids stay theirs)."""


def _merged(layers: list[Constraints]) -> Constraints:
    merged = Constraints.merge(*layers)
    if merged.execution.workdir is None:
        return merged
    workdir = os.path.abspath(os.path.expanduser(merged.execution.workdir))
    return merged.model_copy(
        update={"execution": merged.execution.model_copy(update={"workdir": workdir})}
    )


@runtime_checkable
class StepRecorder(Protocol):
    """Runs a run's steps once, durably."""

    async def run(self, key: str, factory: Callable[[], Awaitable[T]]) -> T:
        """The result recorded under ``key`` (numbered per key), or ``factory()``'s, recorded."""
        ...

    async def mark_started(self, keys: Sequence[str]) -> None:
        """Record that the steps under ``keys`` are about to run (for at-least-once marks)."""
        ...

    def maybe_repeated(self, key: str) -> bool:
        """Whether an earlier attempt started the step under ``key`` and recorded no result."""
        ...


def key_part(value: Any) -> str:
    """A value as it may appear in a step key (no ``#``, which numbers repeats)."""
    return str(value).replace("#", "%23")
