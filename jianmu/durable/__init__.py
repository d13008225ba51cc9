"""Durable runs at scale on DBOS Transact: `DurableEngine` (extra ``dbos``).

A run is a DBOS workflow; every model turn and tool call is a DBOS step, so a worker that
dies loses nothing finished: another worker (or the same one restarted) replays the recorded
steps and runs only what had not finished. Approvals wait with DBOS messaging.
"""

from jianmu.durable.engine import RUN_STATUSES, DurableEngine, RunInfo, TreeFactory

__all__ = ("RUN_STATUSES", "DurableEngine", "RunInfo", "TreeFactory")
