"""A live durable worker is not taken over because another worker's clock differs from its own.

Before the fix, a worker declared another dead when that one's last heartbeat, written by its
own clock, was older than ``takeover_after_s`` by the observer's clock. A worker whose clock
ran a few minutes ahead (a VM restored from a snapshot, a host without NTP) therefore took over
every live worker's runs at once, and each call they had in flight, an approved payment among
them, ran a second time (the README: taking over a live worker runs its in-flight calls twice).
Now a worker is declared dead only once its heartbeat has stopped changing for
``takeover_after_s`` as the observer measures it: the clocks are never compared.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from jianmu.durable._tables import Heartbeat, WorkerRegistry

pytestmark = pytest.mark.timeout(120)


class NoRuns:
    """A DBOS client stand-in: the system database has no pending run to hand over."""

    class _sys_db:  # DBOSClient's attribute
        @staticmethod
        def get_pending_workflows(executor_id: str, app_version: str) -> list[Any]:
            return []


def test_a_worker_whose_clock_is_behind_is_not_taken_while_it_beats(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    behind = WorkerRegistry(url, "app")  # worker A, its clock an hour behind B's
    observer = WorkerRegistry(url, "app")
    beats = iter(range(1, 10_000))
    hour_ago = time.time() - 3600

    def a_beats() -> None:
        with behind._db.begin() as conn:  # as A's own Heartbeat writes it, by A's clock
            from jianmu.durable._tables import _workers

            stamp = hour_ago + next(beats)
            updated = conn.execute(_workers.update().where(_workers.c.executor_id == "A")
                                   .values(last_seen=stamp)).rowcount
            if not updated:
                conn.execute(_workers.insert().values(executor_id="A", engine="app", host="h",
                                                      started=stamp, last_seen=stamp))

    now = [0.0]  # B's own clock (monotonic), moved by hand
    b = Heartbeat(observer, "B", takeover_after_s=5, client=NoRuns())
    b.clock = lambda: now[0]
    a_beats()
    for _ in range(10):  # long past the takeover time by B's clock, A beating all along
        b.take_over()
        now[0] += 10
        a_beats()
    assert b.taken == []
    assert "A" in {w["executor_id"] for w in observer.workers()}

    # A stops beating: B declares it dead once it has seen it silent for takeover_after_s
    b.take_over()
    assert b.taken == []
    now[0] += 6
    b.take_over()
    assert b.taken == ["A"]
    assert "A" not in {w["executor_id"] for w in observer.workers()}
    behind.close()
    observer.close()
