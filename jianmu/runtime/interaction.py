"""Suspend, approve, reject: how a run waits for a person."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from jianmu.errors import InteractionError

__all__ = ("ApprovalDecision", "ApprovalRequest", "Interaction")

_LOCK = threading.RLock()
"""Guards every run's interaction (decisions are rare; a lock each would cost every run)."""


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """A question the run asks before it goes on; for a tool call, ``id`` is the call's id."""

    id: str
    """Unique id; `ReactiveRunner.approve` and ``reject`` take it."""
    kind: str = "tool_call"
    """What is asked: ``tool_call`` or a node's own kind."""
    summary: str = ""
    """One line for a person, possibly shortened: show ``payload`` (the full tool arguments)
    before asking for a decision, never the summary alone."""
    payload: dict[str, Any] = field(default_factory=dict)
    """Details: tool name, arguments, the guard's reason."""
    node: str | None = None
    """Path of the node that asked."""
    created: float = field(default_factory=time.time)
    """When it was asked."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalRequest:
        """Rebuild from `to_dict`."""
        return cls(**data)


@dataclass(frozen=True, kw_only=True)
class ApprovalDecision:
    """A person's answer to one request."""

    request_id: str
    approved: bool
    message: str | None = None


class Interaction:
    """The run's channel to a person: pending requests and recorded decisions.

    Nothing is approved by default, and a decision for an id that was never asked is refused:
    the channel fails closed.
    """

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self._pending: dict[str, ApprovalRequest] = {}
        self._asked: dict[str, ApprovalRequest] = {}
        self._decisions: dict[str, ApprovalDecision] = {}
        self._consumed: dict[str, None] = {}
        """Approvals used, as the keys of a dict (which holds no object the collector
        tracks, as a set would)."""
        self._lock = _LOCK
        self._on_change = on_change
        self.suspended = False

    def suspend(self, request: ApprovalRequest) -> None:
        """Ask ``request`` and make the run return SUSPENDED after this tick."""
        with self._lock:
            self._asked[request.id] = request
            if request.id not in self._decisions:
                self._pending[request.id] = request
                self.suspended = True

    @property
    def has_pending(self) -> bool:
        """Whether any request waits for a decision (the runner asks after every tick)."""
        return bool(self._pending)  # one read of a dict's size: no lock, no copy

    @property
    def pending(self) -> list[ApprovalRequest]:
        """Requests asked and not yet decided, oldest first."""
        with self._lock:
            return list(self._pending.values())

    def asked(self, request_id: str) -> bool:
        """Whether the run ever asked this id."""
        return request_id in self._asked

    def request(self, request_id: str) -> ApprovalRequest | None:
        """The request asked under ``request_id``, if the run ever asked one."""
        return self._asked.get(request_id)

    def consume(self, request_id: str) -> None:
        """Mark an approval as used: the call it allowed has run, so it allows nothing more.

        A caller that meets a consumed id again (a model replaying it, another node) must ask
        anew under a fresh id.
        """
        with self._lock:
            self._consumed[request_id] = None

    def consumed(self, request_id: str) -> bool:
        """Whether the approval under ``request_id`` was already used."""
        return request_id in self._consumed

    def decision(self, request_id: str) -> ApprovalDecision | None:
        """The decision recorded for ``request_id``, if any."""
        return self._decisions.get(request_id)

    def _decide(self, request_id: str, approved: bool, message: str | None) -> None:
        with self._lock:
            if request_id not in self._asked:
                known = ", ".join(sorted(self._pending)) or "none"
                raise InteractionError(
                    f"no approval request {request_id!r} was asked in this run "
                    f"(pending: {known})"
                )
            first = self._decisions.get(request_id)
            if first is not None:
                verb = "approved" if first.approved else "rejected"
                said = f" ({first.message!r})" if first.message else ""
                raise InteractionError(
                    f"request {request_id!r} was already {verb}{said}; the first decision "
                    "stands and this one was not recorded"
                )
            self._decisions[request_id] = ApprovalDecision(
                request_id=request_id, approved=approved, message=message
            )
            self._pending.pop(request_id, None)
            if not self._pending:
                self.suspended = False
        if self._on_change is not None:
            self._on_change()

    def approve(self, request_id: str, message: str | None = None) -> None:
        """Approve a pending request.

        Raises:
            InteractionError: the id was never asked, or was already decided.
        """
        self._decide(request_id, True, message)

    def reject(self, request_id: str, message: str | None = None) -> None:
        """Reject a pending request; ``message`` is shown to the model.

        Raises:
            InteractionError: the id was never asked, or was already decided.
        """
        self._decide(request_id, False, message)

    def snapshot(self) -> dict[str, Any]:
        """Asked requests and decisions, JSON-serialisable."""
        with self._lock:
            return {
                "asked": [r.to_dict() for r in self._asked.values()],
                "pending": list(self._pending),
                "decisions": [asdict(d) for d in self._decisions.values()],
                "consumed": sorted(self._consumed),
            }

    def restore(self, data: dict[str, Any]) -> None:
        """Load what `snapshot` returned."""
        with self._lock:
            self._asked = {
                r["id"]: ApprovalRequest.from_dict(r) for r in data.get("asked", [])
            }
            self._pending = {i: self._asked[i] for i in data.get("pending", [])}
            self._decisions = {
                d["request_id"]: ApprovalDecision(**d) for d in data.get("decisions", [])
            }
            self._consumed = dict.fromkeys(data.get("consumed", []))
            self.suspended = bool(self._pending)
