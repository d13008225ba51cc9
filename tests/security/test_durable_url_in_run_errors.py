"""A run's error that quotes the durable database's URL shows no password.

A tree whose factory (or tool) fails with a message quoting its settings, the database URL
among them, failed the run with that text: `result()`, `run_info()`, ``jianmu runs list`` and
``runs show`` printed the password the engine keeps out of every log and message of its own.
Now a run's error is cleaned of the URL's secrets wherever the engine hands it out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support import durable
from tests.support.durable import HERE, ROOT, Workers
from tests.support.forked_cli import DURABLE, run_jianmu

pytest.importorskip("dbos")
pytestmark = pytest.mark.timeout(400)

workers = durable.workers


@pytest.fixture
def db_url(postgres_url: str) -> str:
    """A URL with a password: PostgreSQL's."""
    return postgres_url


client = durable.client


def _cli(workers: Workers, *args: str) -> str:
    env = workers.env("cli", COLUMNS="300", NO_COLOR="1")
    env.pop("JIANMU_TEST_WORKER")
    done = run_jianmu([*args, "--app", f"{HERE / 'durable_app.py'}:engine"], cwd=ROOT, env=env,
                      timeout=120, preload=DURABLE)
    return done.stdout + done.stderr


def test_a_run_error_quoting_the_database_url_shows_no_password(
    workers: Workers, client: Any, db_url: str, tmp_path: Path
) -> None:
    password = urlsplit(db_url).password
    assert password
    workers.start("w1")
    run_id = asyncio.run(client.start("broken", {"why": "its database"}))
    result = asyncio.run(client.result(run_id, timeout=120))
    assert not result.ok
    info = client.run_info(run_id)
    listed = _cli(workers, "runs", "list")
    shown = _cli(workers, "runs", "show", run_id)
    log = (tmp_path / "w1.log").read_text()  # the worker logs the run's failure
    for text in (result.error, info.error, listed, shown, log):
        assert text and password not in text
    assert "cannot reach postgresql://jianmu:***@" in str(info.error)  # still said, cleaned
    assert "cannot reach" in shown
