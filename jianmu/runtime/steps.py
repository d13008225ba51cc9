"""`StepRecorder`: the seam through which a durable engine records a run's steps.

A plain run has no recorder: a step is just its coroutine. A durable run (`jianmu.durable`)
puts one in `RunContext.steps`; it runs each step once, stores its result under the step's
key, and on recovery hands the stored result back instead of running the step again. The
keys are stable across re-executions of the same run: a model turn is ``model:{node path}``
(numbered by the recorder per key), a tool call is ``tool:{call id}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ("StepRecorder",)

T = TypeVar("T")


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
