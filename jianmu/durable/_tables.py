"""Jianmu's tables beside DBOS's own, in the durable database: who is alive, and how each
approval request was decided.

**Workers.** DBOS recovers a worker's pending runs when the same worker (same executor id)
starts again. A worker that never comes back needs someone else to declare it dead: each
worker writes a heartbeat row (``jianmu_workers``), and a live worker that has seen a row
unchanged for ``durable.takeover_after_s`` by its own clock (the workers' clocks are never
compared: one running ahead must not take live workers' runs), and finds its id free (a worker
holds its id while it lives, if only paused: `_worker_lock`), claims it (one atomic delete of
that very heartbeat, so two live workers never both claim it, nor one that beat meanwhile)
and hands the dead worker's runs back to the queue, where any worker picks them up.

**Decisions.** A decision travels to the run as a DBOS message. Two people answering the same
request (one approves, the other rejects) must not both be told "done" while the run goes on
with one of the answers: so each decision is first claimed in the ``jianmu_decisions`` table
(one row per run and request; the insert of a second fails on the key), and the message is
sent in the same transaction (`DBOSClient.send_in_transaction`). The first decision is
recorded and sent together, or neither; every later one is refused, naming the first. A
request asked under a namespace (``left/call_0``) keeps, beside its decision, the id it had
without the namespace (``call_0``, ``jianmu_decision_names``): a later decision by that id
finds the first once the request is no longer pending, as one by the whole id does.
"""

from __future__ import annotations

import importlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from jianmu.errors import DurableError, WorkerIdTaken

__all__ = (
    "APP_VERSION",
    "Decision",
    "DecisionLedger",
    "Heartbeat",
    "WorkerRegistry",
    "libpq_url",
    "open_tables",
    "recover_worker",
    "sqlalchemy_url",
)

_log = logging.getLogger("jianmu.durable")

APP_VERSION = "jianmu-1"
"""DBOS application version of every Jianmu worker: recovery matches runs by it, so workers
built from different checkouts of the same app still recover each other's runs."""

_workers_metadata = sa.MetaData()
_workers = sa.Table(
    "jianmu_workers",
    _workers_metadata,
    sa.Column("executor_id", sa.String(200), primary_key=True),
    sa.Column("engine", sa.String(200), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
)


def libpq_url(url: str) -> str:
    """A DBOS PostgreSQL URL as psycopg's own ``connect`` takes it (no driver in the scheme)."""
    return sqlalchemy_url(url).replace("postgresql+psycopg://", "postgresql://", 1)


def sqlalchemy_url(url: str) -> str:
    """A DBOS database URL as SQLAlchemy needs it (psycopg 3 for PostgreSQL)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def open_tables(url: str, metadata: sa.MetaData) -> sa.Engine:
    """A small engine on the durable database, with ``metadata``'s tables made if missing
    (beside DBOS's own)."""
    db = sa.create_engine(sqlalchemy_url(url), pool_size=1, max_overflow=1, pool_pre_ping=True)
    try:
        metadata.create_all(db, checkfirst=True)
    except sa.exc.DBAPIError:
        # two processes starting at once both saw no table; the loser finds it made now
        metadata.create_all(db, checkfirst=True)
    return db


def recover_worker(client: Any, executor_id: str) -> list[str]:
    """Hand ``executor_id``'s pending runs back to the queue; their ids."""
    from jianmu.durable._dbos_adapter import reenqueue_dead_worker_runs

    # re-enqueueing is DBOS's own recovery path: one dequeue admits exactly one worker
    return reenqueue_dead_worker_runs(client, executor_id, APP_VERSION)


class WorkerRegistry:
    """The ``jianmu_workers`` table beside DBOS's own: who is alive, and since when."""

    def __init__(self, url: str, engine_name: str) -> None:
        self.engine_name = engine_name
        self._db = open_tables(url, _workers_metadata)
        self._autocommit = self._db.execution_options(isolation_level="AUTOCOMMIT")
        # the dialect's own upsert, imported for that dialect only (PostgreSQL's costs ~30 ms)
        dialect = "sqlite" if self._db.dialect.name == "sqlite" else "postgresql"
        self._insert: Any = importlib.import_module(f"sqlalchemy.dialects.{dialect}").insert

    def beat(self, executor_id: str, *, started: float | None = None) -> None:
        """Record that ``executor_id`` is alive now."""
        now = time.time()
        made = self._insert(_workers).values(
            executor_id=executor_id, engine=self.engine_name, host=socket.gethostname(),
            started=started or now, last_seen=now,
        )
        # one statement, committed as it runs: a worker paused (SIGSTOP) between two
        # statements of a transaction would hold its row locked, and every live worker's claim
        # of it (with that worker's heartbeat thread) would wait until it was woken
        with self._autocommit.connect() as conn:
            conn.execute(made.on_conflict_do_update(
                index_elements=[_workers.c.executor_id], set_={"last_seen": now}))

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

    def claim(self, executor_id: str, after_s: float | None, *,
              beat: float | None = None) -> bool:
        """Declare ``executor_id`` dead (if still silent for ``after_s``, and with ``beat``, if
        its last heartbeat is still that one); True for the winner."""
        query = _workers.delete().where(_workers.c.executor_id == executor_id)
        if after_s is not None:
            query = query.where(_workers.c.last_seen < time.time() - after_s)
        if beat is not None:
            query = query.where(_workers.c.last_seen == beat)
        with self._db.begin() as conn:
            return bool(conn.execute(query).rowcount)

    def close(self) -> None:
        """Release the connection pool."""
        self._db.dispose()


class Heartbeat:
    """A daemon thread: beat every few seconds, and take over workers silent for too long."""

    def __init__(self, registry: WorkerRegistry, executor_id: str, takeover_after_s: float,
                 client: Any, on_error: Any = None, lock: Any = None,
                 hold: Callable[[str], Any] | None = None) -> None:
        self.registry = registry
        self.lock = lock
        """This worker's hold on its id (a `WorkerLock`), taken again at each beat if the
        database dropped it."""
        self.hold = hold
        """Takes a worker's id (a `WorkerLock`, or None), or raises `WorkerIdTaken` while that
        worker lives: a silent worker is taken over only once it is dead."""
        self.executor_id = executor_id
        self.after_s = takeover_after_s
        self.client = client
        self.on_error = on_error
        self.taken: list[str] = []
        self.clock: Callable[[], float] = time.monotonic
        """This worker's own clock, by which it times the others' silence."""
        # each other worker's last heartbeat as written, and when this worker first read it:
        # the workers' clocks are never compared, so one that runs ahead takes no live worker
        self._beats: dict[str, tuple[float, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="jianmu-heartbeat", daemon=True)
        self._started = time.time()

    def start(self) -> None:
        """Beat once now (so a worker is never unseen), then keep beating in the background."""
        self.registry.beat(self.executor_id, started=self._started)
        self.take_over()
        self._thread.start()

    def take_over(self) -> list[str]:
        """Claim every worker whose heartbeat this worker has seen unchanged for
        ``takeover_after_s`` (by its own clock) and re-enqueue its runs; the runs' ids."""
        runs: list[str] = []
        now = self.clock()
        rows = {w["executor_id"]: float(w["last_seen"]) for w in self.registry.workers()
                if w["executor_id"] != self.executor_id}
        for gone in set(self._beats) - set(rows):
            del self._beats[gone]
        for worker, beat in rows.items():
            seen = self._beats.get(worker)
            if seen is None or seen[0] != beat:  # it beat since: alive, whatever its clock
                self._beats[worker] = (beat, now)
                continue
            if now - seen[1] < self.after_s:
                continue
            # silent, but is it dead? a worker holds its id while it lives (if only paused):
            # its runs stay its own, and taking them would run its calls in flight twice
            try:
                lock = self.hold(worker) if self.hold is not None else None
            except WorkerIdTaken:  # (a database error goes to `on_error`, as any beat's)
                self._beats[worker] = (beat, now)  # looked at again after another silence
                _log.warning("worker %s has been silent for %.0f s but is alive (it holds its "
                             "id, if only paused): its runs stay its own", worker, self.after_s)
                continue
            try:
                del self._beats[worker]
                if self.registry.claim(worker, None, beat=beat):  # unless it beat meanwhile
                    runs += recover_worker(self.client, worker)
                    self.taken.append(worker)
            finally:  # held until its runs are handed over: the id cannot start meanwhile
                if lock is not None:
                    lock.release()
        return runs

    def _loop(self) -> None:
        interval = max(0.2, min(5.0, self.after_s / 3))
        while not self._stop.wait(interval):
            try:
                self.registry.beat(self.executor_id, started=self._started)
                if self.lock is not None and not self.lock.renew():
                    raise DurableError(
                        f"another worker took executor id {self.executor_id!r} while this "
                        f"one's hold on it was lost: both may run its runs; stop one of them")
                self.take_over()
            except Exception as exc:  # a database hiccup must not kill the worker
                if self.on_error is not None:
                    self.on_error(exc)

    def stop(self) -> None:
        """Stop beating (the row stays: a restart with the same id picks its runs up)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


# -- decisions ---------------------------------------------------------------------------------

_decisions_metadata = sa.MetaData()
_decisions = sa.Table(
    "jianmu_decisions",
    _decisions_metadata,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("call_id", sa.String(500), primary_key=True),
    sa.Column("approved", sa.Boolean, nullable=False),
    sa.Column("message", sa.Text, nullable=True),
    sa.Column("decided_at", sa.Float, nullable=False),
)
_names = sa.Table(
    "jianmu_decision_names",
    _decisions_metadata,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("call_id", sa.String(500), primary_key=True),
    sa.Column("name", sa.String(500), nullable=False),
)
"""The id each decided request had without its namespaces' prefixes (`UNQUALIFIED`), where it
differs from its own: a later decision by that id finds the first (`named_request`)."""


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
        self._db = open_tables(url, _decisions_metadata)

    def first(self, run_id: str, call_id: str) -> Decision | None:
        """The decision recorded for ``call_id`` of ``run_id``, if any."""
        with self._db.connect() as conn:
            return _read(conn, run_id, call_id)

    def named(self, run_id: str, name: str) -> list[tuple[str, str]]:
        """The decided requests of ``run_id`` that ``name`` named without their namespaces'
        prefixes: each id, and ``name``."""
        with self._db.connect() as conn:
            found = conn.execute(sa.select(_names.c.call_id).where(
                _names.c.run_id == run_id, _names.c.name == name)).scalars().all()
        return [(str(call_id), name) for call_id in found]

    def decided(self, run_id: str, call_ids: Iterable[str]) -> set[str]:
        """Which of ``call_ids`` of ``run_id`` have a recorded decision."""
        wanted = list(call_ids)
        if not wanted:
            return set()
        with self._db.connect() as conn:
            found = conn.execute(sa.select(_decisions.c.call_id).where(
                _decisions.c.run_id == run_id, _decisions.c.call_id.in_(wanted))).scalars()
            return {str(call_id) for call_id in found}

    def decide(self, run_id: str, call_id: str, approved: bool, message: str | None,
               send: Callable[[sa.Connection], None], *,
               name: str | None = None) -> Decision | None:
        """Record this decision and ``send`` it in one transaction, unless one is recorded;
        ``name``: the request's id without its namespaces' prefixes, kept beside it.

        Returns:
            ``None`` when this decision was recorded and sent; else the first decision (and
            nothing was recorded or sent).
        """
        for _attempt in range(3):
            try:
                with self._db.begin() as conn:
                    conn.execute(_decisions.insert().values(
                        run_id=run_id, call_id=call_id, approved=approved,
                        message=_storable(message), decided_at=time.time(),
                    ))
                    if name is not None and name != call_id:
                        conn.execute(_names.insert().values(
                            run_id=run_id, call_id=call_id, name=name))
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


def _storable(message: str | None) -> str | None:
    """``message`` as the database takes it: a lone surrogate (argv's byte of another encoding)
    escaped as ``\\udcff``, which UTF-8 refused; the run itself reads the message as sent."""
    if message is None:
        return None
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def _read(conn: sa.Connection, run_id: str, call_id: str) -> Decision | None:
    row = conn.execute(
        sa.select(_decisions.c.approved, _decisions.c.message, _decisions.c.decided_at)
        .where(_decisions.c.run_id == run_id, _decisions.c.call_id == call_id)
    ).first()
    if row is None:
        return None
    return Decision(approved=bool(row.approved), message=row.message,
                    decided_at=float(row.decided_at))
