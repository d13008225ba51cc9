"""Where Jianmu meets DBOS at the edge of its public API.

Everything else in `jianmu.durable` goes through DBOS's public names (`DBOS`, `DBOSClient`,
`dbos.error`, `DBOS.migrate`, `DBOSClient.list_workflow_steps`). The two needs met here:

1. **Numbering new steps after replayed ones** (public API). A recovered run replays its
   finished steps from Jianmu's own record (by key, so parallel calls replay whatever their
   timing), not by re-running DBOS steps in order. The steps it then runs must be numbered
   after the last one recorded, or DBOS would mistake a new step for an old one.
   `advance_step_counter` draws step numbers with `DBOS.reserve_step` until the workflow's
   counter has passed the last recorded one.
2. **Handing a dead worker's runs back to the queue, only if still its own** (not public).
   DBOS recovers a worker's runs when the same executor id starts again; a worker that never
   returns needs a live one to take them. `DBOSClient.resume_workflow` would also restart a
   run another worker took meanwhile; the system database's conditional re-enqueue (PENDING
   and still owned by the dead executor) is the atomic form, and it is not public.

`tests/durable/test_dbos_adapter.py` fails loudly, naming the missing attribute, when a DBOS
release changes what it uses.
"""

from __future__ import annotations

from typing import Any

__all__ = ("advance_step_counter", "reenqueue_dead_worker_runs")


def advance_step_counter(last: int) -> None:
    """Make the running workflow's next step number follow ``last``.

    Each `DBOS.reserve_step` draws the next number; the reservations are never run (a number
    left unused is a gap DBOS allows). When the counter has passed ``last`` already, one
    number is drawn and skipped: DBOS offers no public way to read the counter.
    """
    from dbos import DBOS

    while DBOS.reserve_step().step_id < last:
        pass


def reenqueue_dead_worker_runs(client: Any, executor_id: str, app_version: str) -> list[str]:
    """Return ``executor_id``'s pending runs to the queue; the ids of those it re-enqueued.

    ``client`` is a `DBOSClient` on the runs' database. Each run is re-enqueued only while it is
    PENDING and still ``executor_id``'s, so one that a live worker has taken is left alone.
    """
    from dbos._utils import INTERNAL_QUEUE_NAME

    sys_db = client._sys_db
    ids = []
    for pending in sys_db.get_pending_workflows(executor_id, app_version):
        if sys_db.reenqueue_for_recovery(pending.workflow_id, [executor_id], INTERNAL_QUEUE_NAME):
            ids.append(pending.workflow_id)
    return ids
