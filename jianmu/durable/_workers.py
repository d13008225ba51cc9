"""Worker heartbeats, and the takeover of a dead worker's runs by a live one.

DBOS recovers a worker's pending runs when the same worker (same executor id) starts again.
A worker that never comes back needs someone else to declare it dead: each worker writes a
heartbeat row, and a live worker that sees a row older than ``durable.takeover_after_s``
claims it (one atomic delete, so two live workers never both claim it) and hands the dead
worker's runs back to the queue, where any worker picks them up.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import sqlalchemy as sa

__all__ = ("WorkerRegistry", "recover_worker", "sqlalchemy_url")

APP_VERSION = "jianmu-1"
"""DBOS application version of every Jianmu worker: recovery matches runs by it, so workers
built from different checkouts of the same app still recover each other's runs."""

_metadata = sa.MetaData()
_workers = sa.Table(
    "jianmu_workers",
    _metadata,
    sa.Column("executor_id", sa.String(200), primary_key=True),
    sa.Column("engine", sa.String(200), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
)


def sqlalchemy_url(url: str) -> str:
    """A DBOS database URL as SQLAlchemy needs it (psycopg 3 for PostgreSQL)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def recover_worker(client: Any, executor_id: str) -> list[str]:
    """Hand ``executor_id``'s pending runs back to the queue; their ids."""
    from jianmu.durable._dbos_adapter import reenqueue_dead_worker_runs

    # re-enqueueing is DBOS's own recovery path: one dequeue admits exactly one worker
    return reenqueue_dead_worker_runs(client, executor_id, APP_VERSION)


class WorkerRegistry:
    """The ``jianmu_workers`` table beside DBOS's own: who is alive, and since when."""

    def __init__(self, url: str, engine_name: str) -> None:
        self.engine_name = engine_name
        self._db = sa.create_engine(sqlalchemy_url(url), pool_size=1, max_overflow=1,
                                    pool_pre_ping=True)
        try:
            _metadata.create_all(self._db, checkfirst=True)
        except sa.exc.DBAPIError:
            # two workers starting at once both saw no table; the loser finds it made now
            _metadata.create_all(self._db, checkfirst=True)

    def beat(self, executor_id: str, *, started: float | None = None) -> None:
        """Record that ``executor_id`` is alive now."""
        now = time.time()
        with self._db.begin() as conn:
            updated = conn.execute(
                _workers.update().where(_workers.c.executor_id == executor_id)
                .values(last_seen=now)
            ).rowcount
            if not updated:
                conn.execute(_workers.insert().values(
                    executor_id=executor_id, engine=self.engine_name,
                    host=socket.gethostname(), started=started or now, last_seen=now,
                ))

    def workers(self) -> list[dict[str, Any]]:
        """Every worker's row: executor_id, host, started, last_seen."""
        with self._db.connect() as conn:
            rows = conn.execute(sa.select(_workers).where(_workers.c.engine == self.engine_name))
            return [dict(row._mapping) for row in rows]

    def stale(self, after_s: float, *, besides: str) -> list[str]:
        """Workers silent for more than ``after_s`` seconds, other than ``besides``."""
        cutoff = time.time() - after_s
        return [w["executor_id"] for w in self.workers()
                if w["last_seen"] < cutoff and w["executor_id"] != besides]

    def claim(self, executor_id: str, after_s: float | None) -> bool:
        """Declare ``executor_id`` dead (if still silent for ``after_s``); True for the winner."""
        query = _workers.delete().where(_workers.c.executor_id == executor_id)
        if after_s is not None:
            query = query.where(_workers.c.last_seen < time.time() - after_s)
        with self._db.begin() as conn:
            return bool(conn.execute(query).rowcount)

    def close(self) -> None:
        """Release the connection pool."""
        self._db.dispose()


class Heartbeat:
    """A daemon thread: beat every few seconds, and take over workers silent for too long."""

    def __init__(self, registry: WorkerRegistry, executor_id: str, takeover_after_s: float,
                 client: Any, on_error: Any = None) -> None:
        self.registry = registry
        self.executor_id = executor_id
        self.after_s = takeover_after_s
        self.client = client
        self.on_error = on_error
        self.taken: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="jianmu-heartbeat", daemon=True)
        self._started = time.time()

    def start(self) -> None:
        """Beat once now (so a worker is never unseen), then keep beating in the background."""
        self.registry.beat(self.executor_id, started=self._started)
        self.take_over()
        self._thread.start()

    def take_over(self) -> list[str]:
        """Claim every silent worker and re-enqueue its runs; the runs' ids."""
        runs: list[str] = []
        for dead in self.registry.stale(self.after_s, besides=self.executor_id):
            if self.registry.claim(dead, self.after_s):
                runs += recover_worker(self.client, dead)
                self.taken.append(dead)
        return runs

    def _loop(self) -> None:
        interval = max(0.2, min(5.0, self.after_s / 3))
        while not self._stop.wait(interval):
            try:
                self.registry.beat(self.executor_id, started=self._started)
                self.take_over()
            except Exception as exc:  # a database hiccup must not kill the worker
                if self.on_error is not None:
                    self.on_error(exc)

    def stop(self) -> None:
        """Stop beating (the row stays: a restart with the same id picks its runs up)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
