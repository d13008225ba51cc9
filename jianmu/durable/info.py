"""`RunInfo`: what the engine knows about one durable run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jianmu.runtime.interaction import ApprovalRequest

__all__ = ("RUN_STATUSES", "RunInfo", "run_status")

RUN_STATUSES = ("queued", "running", "suspended", "success", "failure", "cancelled")
"""A durable run's statuses, as `RunInfo.status` and ``runs(status=...)`` spell them."""

_DBOS_STATUS = {
    "ENQUEUED": "queued",
    "DELAYED": "queued",
    "PENDING": "running",
    "SUCCESS": "success",
    "ERROR": "failure",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failure",
    "CANCELLED": "cancelled",
}


def run_status(dbos_status: str, output: Any, pending: list[ApprovalRequest]) -> str:
    """A run's status from DBOS's workflow status, its output and its pending approvals."""
    status = _DBOS_STATUS.get(dbos_status, dbos_status.lower())
    if status == "running" and pending:
        return "suspended"
    if status == "success" and isinstance(output, dict):
        return "success" if output.get("status") == "success" else "failure"
    return status


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """One durable run, as `DurableEngine.runs` lists it."""

    run_id: str
    """The run's id, which is its DBOS workflow id."""
    tree: str
    """The registered tree it runs."""
    status: str
    """One of `RUN_STATUSES`."""
    pending: tuple[ApprovalRequest, ...] = ()
    """Approval requests it waits for (when ``suspended``)."""
    created: float | None = None
    """When it was started (Unix time)."""
    updated: float | None = None
    """When its status last changed."""
    worker: str | None = None
    """The executor id of the worker that runs (or last ran) it."""
    error: str | None = None
    """Why it failed."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """The inputs it was started with."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return {
            "run_id": self.run_id, "tree": self.tree, "status": self.status,
            "pending": [r.to_dict() for r in self.pending], "created": self.created,
            "updated": self.updated, "worker": self.worker, "error": self.error,
            "inputs": self.inputs,
        }
