"""Durable-run fixtures: a database per test (SQLite and PostgreSQL) and real worker processes."""

from __future__ import annotations

import pytest

from tests.support.durable import client, db_url, workers

__all__ = ("client", "db_url", "workers")  # the shared fixtures, for the durable tests

pytest.importorskip("dbos")

