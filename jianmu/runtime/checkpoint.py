"""Checkpointers: where a suspended or running run is saved so another process can resume it."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from jianmu.errors import CheckpointError
from jianmu.runtime.points import RecordedRun, RunHistory, TickRecorder

__all__ = ("Checkpointer", "SQLiteCheckpointer")


@runtime_checkable
class Checkpointer(Protocol):
    """Saves and loads run checkpoints (JSON-serialisable dicts) by run id."""

    def save(self, run_id: str, checkpoint: dict[str, Any]) -> None:
        """Store a new checkpoint for ``run_id``."""
        ...

    def load(self, run_id: str) -> dict[str, Any] | None:
        """Return the newest checkpoint of ``run_id``, or None."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


class SQLiteCheckpointer:
    """A `Checkpointer` on SQLite (stdlib); ``":memory:"`` is the in-process stand-in.

    Every save appends a row, so the history of a run is kept; ``load`` returns the newest.
    With ``record_ticks`` (the default) it also keeps every tick that changed something
    (`RunHistory`, in the same file): Jianmu Studio travels back through them, and
    ``jianmu runs fork`` starts a new run from any of them.
    """

    def __init__(self, path: str | Path = ":memory:", *, record_ticks: bool = True) -> None:
        self.path = str(path)
        self.record_ticks = record_ticks
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS checkpoints ("
                " run_id TEXT NOT NULL, seq INTEGER NOT NULL, created REAL NOT NULL,"
                " status TEXT, data TEXT NOT NULL, PRIMARY KEY (run_id, seq))"
            )
            self._db.commit()
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open checkpoint store {self.path!r}: {exc}") from exc
        self.history = RunHistory(self._db, self._lock)
        """The run's points and events, beside its checkpoints."""

    def observe(self, runner: RecordedRun) -> None:
        """Record ``runner``'s ticks (the runner calls this when it is made)."""
        if self.record_ticks:
            TickRecorder(runner, self.history).attach()

    def save(self, run_id: str, checkpoint: dict[str, Any]) -> None:
        """Append a checkpoint for ``run_id`` (one transaction)."""
        try:
            data = json.dumps(checkpoint)
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint of run {run_id!r} is not JSON: {exc}") from exc
        with self._lock:
            try:
                with self._db:
                    self.history.write_pending()  # the points up to this checkpoint first
                    row = self._db.execute(
                        "SELECT COALESCE(MAX(seq), 0) FROM checkpoints WHERE run_id = ?", (run_id,)
                    ).fetchone()
                    self._db.execute(
                        "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                        (run_id, row[0] + 1, time.time(), checkpoint.get("status"), data),
                    )
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot save run {run_id!r}: {exc}") from exc

    def load(self, run_id: str) -> dict[str, Any] | None:
        """Return the newest checkpoint of ``run_id``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT data FROM checkpoints WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
                (run_id,),
            ).fetchone()
        return json.loads(row[0]) if row else None

    def list_runs(self) -> list[tuple[str, str | None, float]]:
        """Each run's id, newest status and time of its newest checkpoint, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, status, created FROM checkpoints c WHERE seq = "
                "(SELECT MAX(seq) FROM checkpoints WHERE run_id = c.run_id) ORDER BY created DESC"
            ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def delete(self, run_id: str) -> None:
        """Forget every checkpoint of ``run_id``."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM checkpoints WHERE run_id = ?", (run_id,))
            self.history.delete(run_id)

    def close(self) -> None:
        """Write what the history holds, then close the database."""
        try:
            self.history.flush()
        except CheckpointError:
            pass  # closing must not fail on the history: the checkpoints are what resumes
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLiteCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
