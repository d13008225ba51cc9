"""The durable engine's database: reachable or not, named without its password."""

from __future__ import annotations

import contextlib
import os

from jianmu.errors import DurableDatabaseError, DurableError, MissingExtraError

__all__ = ("check_reachable", "redact", "require_dbos")


def redact(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1] if "@" in url else url


def require_dbos() -> None:
    """Fail with the extra to install when DBOS or psycopg is missing."""
    try:
        import dbos  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError(exc.name or "dbos", "dbos") from exc


def _prepare_sqlite(url: str) -> None:
    """Put an SQLite database in WAL mode (a setting kept in the file).

    DBOS leaves SQLite in its rollback-journal mode, which syncs the disk several times per
    commit; with a write-ahead log every step still commits durably (synchronous=FULL), at one
    sync each, and readers (a CLI listing runs) no longer wait for the worker's writes.
    """
    import sqlite3

    path = url.removeprefix("sqlite:///")
    if not path or path == ":memory:":
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:
        raise DurableDatabaseError(f"cannot open the durable database {url}: {exc}") from None


def check_reachable(url: str) -> None:
    """Fail fast, naming the database without its password, when it cannot be reached."""
    if url.startswith("sqlite:///"):
        _prepare_sqlite(url)
        return
    if not url.startswith(("postgresql://", "postgres://", "postgresql+")):
        return
    import psycopg

    from jianmu.durable._workers import sqlalchemy_url

    raw = sqlalchemy_url(url).replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        psycopg.connect(raw, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        if "does not exist" in str(exc):
            return  # DBOS creates its database on first launch
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise DurableDatabaseError(
            f"cannot reach the durable database {redact(url)}: {reason}"
        ) from None
    except Exception as exc:
        raise DurableError(f"bad durable database URL {redact(url)}: {exc}") from None
