"""The durable engine's database: reachable or not, named without its password.

The URL's password (in its user-info or a ``?password=`` parameter) never reaches a message,
a log line or a ``repr``: the URL is shown redacted (`redact`), and a driver's error, which may
quote the URL or a piece of it (psycopg does for a malformed one), is cleaned of its secrets
(`clean_error`) before it is shown. The loggers of DBOS, SQLAlchemy and this package drop them
too (`guard_logs`).
"""

from __future__ import annotations

import contextlib
import logging
import os

from jianmu._redact import SecretFilter, redact_text, redact_url, url_secrets
from jianmu.errors import DurableDatabaseError, DurableError, MissingExtraError

__all__ = ("check_reachable", "clean_error", "guard_logs", "redact", "require_dbos")

_LOGGERS = ("dbos", "sqlalchemy", "sqlalchemy.engine", "sqlalchemy.pool", "jianmu.durable")
_filters: dict[str, SecretFilter] = {}


def redact(url: str) -> str:
    """``url`` without its password (user-info or query parameter), for messages and logs."""
    return redact_url(url)


def clean_error(exc: BaseException | str, url: str) -> str:
    """An error's text (a driver's, say) without the secrets of ``url`` or any other URL's."""
    return redact_text(str(exc), *url_secrets(url))


def guard_logs(url: str) -> None:
    """Keep the secrets of ``url`` out of the log records of DBOS, SQLAlchemy and Jianmu's
    durable engine, whoever logs them."""
    secrets = url_secrets(url)
    if not secrets:
        return
    for name in _LOGGERS:
        found = _filters.get(name)
        if found is None:
            found = _filters[name] = SecretFilter()
            logging.getLogger(name).addFilter(found)
        found.secrets = tuple(dict.fromkeys((*found.secrets, *secrets)))


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
        raise DurableDatabaseError(
            f"cannot open the durable database {redact(url)}: {clean_error(exc, url)}"
        ) from None


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
            f"cannot reach the durable database {redact(url)}: {clean_error(reason, url)}"
        ) from None
    except Exception as exc:  # psycopg quotes a malformed URL (its password too): cleaned
        raise DurableError(
            f"bad durable database URL {redact(url)}: {clean_error(exc, url)}"
        ) from None
