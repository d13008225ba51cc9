"""`RunResult`: how a call to `ReactiveRunner.run` ended."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from jianmu.runtime.interaction import ApprovalRequest

__all__ = ("RunResult", "RunStatus")


class RunStatus(enum.StrEnum):
    """How a call to `ReactiveRunner.run` ended."""

    SUCCESS = "success"
    """The root succeeded."""
    FAILURE = "failure"
    """The root failed (or the tree raised); ``error`` says why."""
    SUSPENDED = "suspended"
    """The run waits for a person: ``pending`` lists the approvals asked for."""
    CANCELLED = "cancelled"
    """The run was cancelled from outside."""
    TIMEOUT = "timeout"
    """``run(timeout=...)`` ran out before the tree finished."""

    @property
    def finished(self) -> bool:
        """Whether the tree ran to its end (SUCCESS or FAILURE), not stopped or waiting."""
        return self in (RunStatus.SUCCESS, RunStatus.FAILURE)


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
    output: Any = None
    """The agent's typed answer (the state's ``final_output``) when it gave one."""

    @property
    def ok(self) -> bool:
        """Whether the root succeeded."""
        return self.status is RunStatus.SUCCESS
