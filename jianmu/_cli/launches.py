"""How each CLI run was started, kept beside its checkpoints so ``jianmu resume`` can rebuild
the same tree in another process.

A table ``jianmu_cli_launches`` in the checkpointer's SQLite file holds one JSON row per run:
the target (script path or skill name), the inputs, the config path, the folder the run was
started in, and for BT skills the state namespace the tree was built for. A fork
(``jianmu runs fork``, the studio's Fork) has none of its own: it runs what its origin ran.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from jianmu.errors import CheckpointError
from jianmu.runtime.history import forked_from

__all__ = ("Launch", "LaunchStore")


@dataclass(kw_only=True)
class Launch:
    """What ``jianmu run`` was asked to run."""

    kind: Literal["script", "bt_skill", "prompt_skill"]
    """What the target is."""
    target: str
    """The script's absolute path, or the skill's name."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """The ``--input`` values."""
    config: str | None = None
    """The config file's absolute path, if one was loaded."""
    cwd: str = "."
    """The folder the run was started in (relative paths in the config resolve against it)."""
    skill_folder: str | None = None
    """For skills: the folder it was loaded from (found again even if the catalog changed)."""
    namespace: str | None = None
    """For BT skills: the state namespace the tree reads and writes."""


class LaunchStore:
    """Saves and loads `Launch` records in a SQLite file (the checkpoint file)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            self._db = sqlite3.connect(self.path)
            with self._db:
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS jianmu_cli_launches "
                    "(run_id TEXT PRIMARY KEY, data TEXT NOT NULL)"
                )
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open the run store {self.path!r}: {exc}") from exc

    def save(self, run_id: str, launch: Launch) -> None:
        """Record how ``run_id`` was started."""
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO jianmu_cli_launches VALUES (?, ?)",
                (run_id, json.dumps(asdict(launch))),
            )

    def load(self, run_id: str) -> Launch | None:
        """How ``run_id`` was started (for a fork, its origin), or None if the CLI did not."""
        seen: set[str] = set()
        while run_id not in seen:
            seen.add(run_id)
            row = self._db.execute(
                "SELECT data FROM jianmu_cli_launches WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row:
                return Launch(**json.loads(row[0]))
            origin = forked_from(self._db, run_id)
            if origin is None:
                return None
            run_id = origin[0]
        return None

    def close(self) -> None:
        """Close the database."""
        self._db.close()
