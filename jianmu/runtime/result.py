"""`RunResult`: how a call to `ReactiveRunner.run` ended."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from jianmu.runtime.interaction import ApprovalRequest

__all__ = ("RunResult", "RunStatus")


class RunStatus(enum.StrEnum):
    """How a call to `ReactiveRunner.run` ended."""

    SUCCESS = "success"
    FAILURE = "failure"
    SUSPENDED = "suspended"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """The outcome of one `ReactiveRunner.run` call."""

    status: RunStatus
    """SUCCESS or FAILURE of the root, or why the run stopped before it finished."""
    run_id: str
    """The run's id (the checkpoint key)."""
    ticks: int = 0
    """Ticks in this call."""
    duration: float = 0.0
    """Wall time of this call, in seconds."""
    pending: tuple[ApprovalRequest, ...] = ()
    """Approval requests the run waits for (when SUSPENDED)."""
    error: str | None = None
    """Why the run failed, timed out or was cancelled."""

    @property
    def ok(self) -> bool:
        """Whether the root succeeded."""
        return self.status is RunStatus.SUCCESS
