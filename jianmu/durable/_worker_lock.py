"""One live worker per executor id: a lock that the worker holds for its whole life.

DBOS recovers a worker's pending runs when a worker of the same executor id starts. A second
worker started under the id of one still alive would therefore run that one's runs too, and a
call could run twice (a payment paid twice). So every worker takes a lock named after its app
and id before DBOS starts, and keeps it until it stops; a second worker finds it taken and
refuses to start, and `DurableEngine.recover` and the heartbeat's takeover leave alone a worker
that holds it (alive, if only paused). The lock is the database host's own and dies with its
holder (a killed worker's restart finds it free at once; a paused one still holds it):

- SQLite (one machine): a POSIX record lock on a file beside the database, one byte per id;
- PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on a connection of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from typing import Any

from jianmu.errors import WorkerIdTaken

__all__ = ("WorkerLock", "hold_worker_id")


def _key(app: str, executor_id: str) -> int:
    """A 62-bit number naming ``executor_id`` of ``app``: an advisory lock's key, a byte's
    offset in the lock file (both well inside a signed 64-bit number)."""
    digest = hashlib.sha256(f"jianmu-worker\0{app}\0{executor_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 2


class WorkerLock:
    """A held lock on an executor id; `release` gives it up (so does the process's end)."""

    def __init__(self, release: Any, renew: Any = None) -> None:
        self._release = release
        self._renew = renew

    def renew(self) -> bool:
        """Take the lock again if the database dropped it (a PostgreSQL session ended by a
        restart of the server): False when another worker took the id meanwhile."""
        return self._renew() if self._renew is not None and self._release is not None else True

    def release(self) -> None:
        """Give the id up (once)."""
        release, self._release = self._release, None
        if release is not None:
            with contextlib.suppress(Exception):  # a dropped connection released it already
                release()


def _refused(executor_id: str) -> WorkerIdTaken:
    return WorkerIdTaken(
        f"a worker with executor id {executor_id!r} is already running on this database: a "
        f"second would run its runs too, and a call could run twice. Stop that worker first, "
        f"or give this one another id (the id of a worker whose machine is gone is free "
        f"again once the database has noticed, within about a minute)")


def hold_worker_id(url: str, app: str, executor_id: str) -> WorkerLock | None:
    """Take the lock on ``executor_id`` of ``app`` on the database at ``url``; None where the
    database has no place for it yet (a PostgreSQL database DBOS has still to create) or is
    neither SQLite nor PostgreSQL.

    Raises:
        WorkerIdTaken: a live worker holds that id.
    """
    key = _key(app, executor_id)
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        if not path or path == ":memory:":
            return None
        return _hold_file(path, key, executor_id)
    if url.startswith(("postgresql://", "postgres://", "postgresql+")):
        return _hold_advisory(url, key, executor_id)
    return None


_FILES: dict[str, int] = {}
"""Each lock file this process opened, by path: open until the process ends. Closing any
descriptor of a file drops every record lock the process holds on it, so one is never closed."""
_HELD: set[tuple[str, int]] = set()
"""The (file, byte) locks this process holds: the process's own locks never refuse it, so a
second take of one is refused here."""
_FILES_LOCK = threading.Lock()


def _hold_file(database: str, key: int, executor_id: str) -> WorkerLock:
    import fcntl

    path = f"{database}.workers-lock"
    with _FILES_LOCK:
        fd = _FILES.get(path)
        if fd is None:
            try:  # the database's own permissions, as SQLite gives its journal files
                mode = os.stat(database).st_mode & 0o666
            except OSError:
                mode = 0o600
            fd = _FILES[path] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
        if (path, key) in _HELD:
            raise _refused(executor_id)
        try:
            # a record lock, not flock: it is the process's, so a forked child (a tool's own
            # process) neither inherits nor keeps it, and it dies with the process
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, key)
        except OSError:
            raise _refused(executor_id) from None
        _HELD.add((path, key))

    def release() -> None:
        with _FILES_LOCK:
            _HELD.discard((path, key))
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, key)

    return WorkerLock(release)


_KEEPALIVES = "-c tcp_keepalives_idle=20 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3"


def _hold_advisory(url: str, key: int, executor_id: str) -> WorkerLock | None:
    from jianmu.durable._tables import libpq_url

    hold = _AdvisoryHold(libpq_url(url), key)
    taken = hold.take()
    if taken is None:
        return None
    if not taken:
        raise _refused(executor_id)
    return WorkerLock(hold.close, hold.renew)


class _AdvisoryHold:
    """A session advisory lock on a PostgreSQL connection of its own."""

    def __init__(self, dsn: str, key: int) -> None:
        self.dsn = dsn
        self.key = key
        self.conn: Any = None

    def take(self) -> bool | None:
        """Connect and try the lock: whether it was taken; None if the database is missing."""
        import psycopg

        try:
            # the server's own keepalives, for this session: a worker whose machine vanished
            # (power, network) frees its id within about a minute, not the system's two hours
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5,
                                   application_name="jianmu worker lock", options=_KEEPALIVES)
        except psycopg.OperationalError as exc:
            if "does not exist" in str(exc):  # DBOS makes it at launch: nobody runs on it yet
                return None
            raise
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
        except Exception:
            conn.close()
            raise
        if not (row and row[0]):
            conn.close()
            return False
        self.conn = conn
        return True

    def renew(self) -> bool:
        import psycopg

        if self.conn is not None:
            try:
                self.conn.execute("SELECT 1")
                return True
            except psycopg.Error:  # the session is gone, and its lock with it: take it again
                self.close()
        return bool(self.take())

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()  # the session's end releases its advisory locks
            self.conn = None
