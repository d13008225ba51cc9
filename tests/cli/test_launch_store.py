"""How `jianmu run` started a run, read from a damaged checkpoint file: said naming the file.

Before the fix, `jianmu resume RUN` on a file whose pages were damaged (a disk's fault, a copy
cut short) failed with sqlite3's bare "DatabaseError: database disk image is malformed",
naming neither the file nor the run, where every other read of the file names both.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jianmu._cli.targets import Launch, LaunchStore
from jianmu.errors import CheckpointError


def test_a_damaged_launch_record_names_the_file_and_the_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    store = LaunchStore(db)
    store.save("r1", Launch(kind="script", target="/x/pay.py"))
    assert store.load("r1") == Launch(kind="script", target="/x/pay.py")
    store.close()
    plain = sqlite3.connect(db)
    (root,), (size,) = (plain.execute(sql).fetchone() for sql in (
        "SELECT rootpage FROM sqlite_master WHERE name = 'jianmu_cli_launches'",
        "PRAGMA page_size"))
    plain.close()
    data = bytearray(db.read_bytes())
    data[(root - 1) * size:root * size] = b"\xff" * size  # the table's page overwritten
    db.write_bytes(bytes(data))
    damaged = LaunchStore(db)
    with pytest.raises(CheckpointError, match=r"run 'r1' was started in .*runs\.sqlite.*"
                       "malformed"):
        damaged.load("r1")
    with pytest.raises(CheckpointError, match=r"run 'r2' was started in .*runs\.sqlite"):
        damaged.save("r2", Launch(kind="script", target="/x/pay.py"))
    damaged.close()
