"""Decisions on a durable run's approval requests: the first one stands, recorded once.

A decision travels to the run as a DBOS message. Two people answering the same request (one
approves, the other rejects) must not both be told "done" while the run goes on with one of
the answers: so each decision is first claimed in the ``jianmu_decisions`` table (one row per
run and request; the insert of a second fails on the key), and the message is sent in the same
transaction (`DBOSClient.send_in_transaction`). The first decision is recorded and sent
together, or neither; every later one is refused, naming the first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from jianmu.durable._workers import open_tables

__all__ = ("Decision", "DecisionLedger")

_metadata = sa.MetaData()
_decisions = sa.Table(
    "jianmu_decisions",
    _metadata,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("call_id", sa.String(500), primary_key=True),
    sa.Column("approved", sa.Boolean, nullable=False),
    sa.Column("message", sa.Text, nullable=True),
    sa.Column("decided_at", sa.Float, nullable=False),
)


@dataclass(frozen=True)
class Decision:
    """How a request was decided, and when."""

    approved: bool
    message: str | None
    decided_at: float

    @property
    def verb(self) -> str:
        """``approved`` or ``rejected``."""
        return "approved" if self.approved else "rejected"


class DecisionLedger:
    """The ``jianmu_decisions`` table beside DBOS's own, in the same database."""

    def __init__(self, url: str) -> None:
        self._db = open_tables(url, _metadata)

    def first(self, run_id: str, call_id: str) -> Decision | None:
        """The decision recorded for ``call_id`` of ``run_id``, if any."""
        with self._db.connect() as conn:
            return _read(conn, run_id, call_id)

    def decide(self, run_id: str, call_id: str, approved: bool, message: str | None,
               send: Callable[[sa.Connection], None]) -> Decision | None:
        """Record this decision and ``send`` it in one transaction, unless one is recorded.

        Returns:
            ``None`` when this decision was recorded and sent; else the first decision (and
            nothing was recorded or sent).
        """
        for _attempt in range(3):
            try:
                with self._db.begin() as conn:
                    conn.execute(_decisions.insert().values(
                        run_id=run_id, call_id=call_id, approved=approved, message=message,
                        decided_at=time.time(),
                    ))
                    send(conn)
            except sa.exc.IntegrityError:
                with self._db.connect() as conn:
                    first = _read(conn, run_id, call_id)
                if first is not None:
                    return first
                continue  # the other decision's transaction was rolled back: try again
            return None
        raise RuntimeError(f"could not record the decision on {call_id!r} of run {run_id!r}")

    def close(self) -> None:
        """Release the connections."""
        self._db.dispose()


def _read(conn: sa.Connection, run_id: str, call_id: str) -> Decision | None:
    row = conn.execute(
        sa.select(_decisions.c.approved, _decisions.c.message, _decisions.c.decided_at)
        .where(_decisions.c.run_id == run_id, _decisions.c.call_id == call_id)
    ).first()
    if row is None:
        return None
    return Decision(approved=bool(row.approved), message=row.message,
                    decided_at=float(row.decided_at))
