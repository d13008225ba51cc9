"""The studio's own record of what it did to a run: who answered which approval, which run
it forked, what went wrong continuing one. A table beside the checkpoints, in the same SQLite
file; the runs' own events are in their history (`jianmu.runtime.history`)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from typing import Any

from jianmu.errors import CheckpointError
from jianmu.runtime.history import short

__all__ = ("Journal",)


class Journal:
    """Appends and lists a run's studio events (``jianmu_studio_events``)."""

    def __init__(self, path: str) -> None:
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False)
            with self._db:
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS jianmu_studio_events (run_id TEXT NOT NULL,"
                    " time REAL NOT NULL, name TEXT NOT NULL, node TEXT, fields TEXT NOT NULL)"
                )
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open the studio's journal {path!r}: {exc}") from exc

    def add(self, run_id: str, name: str, node: str | None = None, **fields: Any) -> None:
        """Record one event of ``run_id``."""
        data = json.dumps(short(fields), ensure_ascii=False)
        with self._lock, self._db:
            self._db.execute("INSERT INTO jianmu_studio_events VALUES (?, ?, ?, ?, ?)",
                             (run_id, time.time(), name, node, data))

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """``run_id``'s events, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT time, name, node, fields FROM jianmu_studio_events WHERE run_id = ?"
                " ORDER BY rowid", (run_id,)).fetchall()
        return [{"time": r[0], "name": r[1], "node": r[2], "fields": json.loads(r[3])}
                for r in rows]

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
