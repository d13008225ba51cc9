"""Durable-run fixtures: a database per test (SQLite and PostgreSQL) and real worker processes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.durable import HERE, db_url, workers

__all__ = ("client", "db_url", "workers")  # the shared fixtures, for the durable tests

pytest.importorskip("dbos")


@pytest.fixture
def client(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The test app's engine in this process, as a client (never launched here)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    sys.path.insert(0, str(HERE))
    from durable_app import engine

    from jianmu.durable import DurableEngine

    made = DurableEngine(db_url, name=engine.name, config=engine.config)
    made._trees = engine._trees  # the same registered trees, on this test's database
    try:
        yield made
    finally:
        made.shutdown()
