"""A second worker started under the executor id of one still alive is refused.

DBOS recovers an executor id's pending runs when a worker of that id starts: before the fix, a
second ``jianmu worker APP --id A`` beside a live A started, recovered A's run in flight and
ran its call a second time (README warned, nothing refused it). Now a worker with a stable id
holds a lock on it for its life (a record lock beside an SQLite database, an advisory lock on
PostgreSQL), taken before DBOS recovers anything: the second worker fails to start, saying
why, and A's call runs once. The lock dies with its holder: a killed or stopped worker's id is
free at once, and a paused one still holds it. The same lock tells ``runs recover --worker A``
that A is alive: before, it only warned, then handed A's runs over while A still ran them.
Both databases.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import DurableError
from tests.support import durable
from tests.support.durable import Workers, wait_for
from tests.support.forked_cli import DURABLE, run_jianmu

pytest.importorskip("dbos")
pytestmark = pytest.mark.timeout(300)

db_url = durable.db_url
workers = durable.workers
client = durable.client

_REFUSED = "a worker with executor id 'A' is already running on this database"


def _refused_start(workers: Workers, worker: str, **extra: str) -> str:
    """Start a worker that must not start: what it said on stderr as it exited non-zero."""
    proc, line = workers.launch(worker, f"{worker}-second.log", **extra)
    assert not line.startswith("ready"), "a second worker of the id started"
    assert proc.wait(timeout=120) != 0
    return (workers.tmp / f"{worker}-second.log").read_text()


def test_a_second_worker_of_a_live_id_is_refused_and_its_call_runs_once(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out, marker, go = tmp_path / "lines.txt", tmp_path / "hung", tmp_path / "go"
    workers.start("A")
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(tmp_path / "asks.txt"), "marker": str(marker),
        "hang_at": 2, "go": str(go),
    }))
    wait_for(marker.exists, what="worker A to be in its second call")
    assert _REFUSED in _refused_start(workers, "A")
    go.touch()  # A's second call returns, and A finishes the run alone
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert out.read_text().splitlines().count("line 2") == 1


def test_a_paused_worker_keeps_its_id_a_killed_or_stopped_one_frees_it(
    workers: Workers, tmp_path: Path
) -> None:
    a = workers.start("A")
    workers.pause(a)  # slow, not dead: its runs are still its own
    try:
        assert _REFUSED in _refused_start(workers, "A")
    finally:
        os.killpg(a.pid, signal.SIGCONT)
    workers.kill(a)  # SIGKILL: no clean-up ran, and the id is free at once
    b = workers.start("A")
    b.send_signal(signal.SIGTERM)  # stopped: free again once it has ended
    b.wait(timeout=120)
    workers.start("A")
    workers.start("B")  # another id is another worker's


def test_the_cli_says_why_a_second_worker_of_an_id_does_not_start(
    workers: Workers, tmp_path: Path
) -> None:
    workers.start("A")
    done = run_jianmu(["worker", f"{durable.HERE / 'durable_app.py'}:engine", "--id", "A"],
                      cwd=durable.ROOT, env=workers.env("A"), timeout=120, preload=DURABLE)
    assert done.returncode != 0
    assert "jianmu: error:" in done.stderr and _REFUSED in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "serving" not in done.stdout, done.stderr


def test_recover_refuses_a_live_worker_and_its_call_runs_once(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out, marker, go = tmp_path / "lines.txt", tmp_path / "hung", tmp_path / "go"
    a = workers.start("A", JIANMU_TEST_WORKER="")  # a fresh id, as `runs workers` shows it
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(tmp_path / "asks.txt"), "marker": str(marker),
        "hang_at": 2, "go": str(go),
    }))
    wait_for(marker.exists, what="worker A to be in its second call")
    workers.start("B")
    alive = client.run_info(run_id).worker
    workers.pause(a)  # paused, not dead (outside any write of the database)
    try:
        with pytest.raises(DurableError, match=f"worker {alive!r} is alive"):
            client.recover(alive)
        done = run_jianmu(["runs", "recover", "--worker", alive, "--app",
                           f"{durable.HERE / 'durable_app.py'}:engine"],
                          cwd=durable.ROOT, env=workers.env("cli"), timeout=120, preload=DURABLE)
        assert done.returncode != 0 and "is alive" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
    finally:
        os.killpg(a.pid, signal.SIGCONT)
    go.touch()
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert client.run_info(run_id).worker == alive  # A finished its own run
    assert out.read_text().splitlines().count("line 2") == 1


def test_a_process_checking_another_id_keeps_its_own(tmp_path: Path) -> None:
    """POSIX record locks are the process's: closing any descriptor of the lock file would drop
    them all, so a worker that checked another id (`recover`) once lost its own."""
    import subprocess
    import sys

    from jianmu.durable._worker_lock import hold_worker_id

    url = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    mine = hold_worker_id(url, "app", "A")
    assert mine is not None
    with pytest.raises(DurableError, match="'A' is already running"):
        hold_worker_id(url, "app", "A")  # this process's own lock refuses it a second time
    other = hold_worker_id(url, "app", "B")
    assert other is not None
    other.release()
    probe = ("import sys\nfrom jianmu.durable._worker_lock import hold_worker_id\n"
             "try:\n    hold_worker_id(sys.argv[1], 'app', sys.argv[2])\n"
             "except Exception as exc:\n    print(exc)\nelse:\n    print('taken')\n")

    def taken_elsewhere(worker: str) -> str:
        return subprocess.run([sys.executable, "-c", probe, url, worker], capture_output=True,
                              text=True, timeout=120, check=True).stdout

    assert "'A' is already running" in taken_elsewhere("A")  # still held here
    assert taken_elsewhere("B") == "taken\n"
    mine.release()
    assert taken_elsewhere("A") == "taken\n"


def test_a_hold_lost_with_its_postgresql_session_is_taken_again(postgres_url: str) -> None:
    """A server restart ends every session, and the advisory locks with them: each worker takes
    its id again at its next beat, unless another worker took it meanwhile (then it says so)."""
    import psycopg

    from jianmu.durable._tables import libpq_url
    from jianmu.durable._worker_lock import hold_worker_id

    dsn = libpq_url(postgres_url)

    def end_sessions() -> None:
        """End the lock sessions, and wait until they are gone: a terminated backend ends
        (and lets its advisory locks go) a moment after it is told to."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                         "application_name = 'jianmu worker lock'")
            deadline = time.monotonic() + 60
            while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name"
                               " = 'jianmu worker lock'").fetchone() != (0,):
                assert time.monotonic() < deadline, "the sessions did not end"
                time.sleep(0.01)

    held = hold_worker_id(postgres_url, "app", "A")
    assert held is not None
    end_sessions()
    assert held.renew()  # taken again
    with pytest.raises(DurableError, match="'A' is already running"):
        hold_worker_id(postgres_url, "app", "A")
    end_sessions()
    other = hold_worker_id(postgres_url, "app", "A")  # another worker, while A's hold is lost
    assert other is not None
    assert not held.renew()
    other.release()
    held.release()


def test_the_lock_file_takes_the_databases_permissions(tmp_path: Path) -> None:
    """Workers of several users of one group share an SQLite database: its lock file must be
    theirs as much as the database is (SQLite gives its journal files the database's mode)."""
    from jianmu.durable._worker_lock import hold_worker_id

    database = tmp_path / "shared.sqlite"
    database.write_bytes(b"")
    database.chmod(0o640)
    held = hold_worker_id(f"sqlite:///{database}", "app", "A")
    assert held is not None
    try:
        mode = (tmp_path / "shared.sqlite.workers-lock").stat().st_mode & 0o777
        assert mode == 0o640 & ~_umask()
    finally:
        held.release()


def _umask() -> int:
    """This process's umask, read without setting it (``os.umask`` would, for every thread)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError("no Umask line in /proc/self/status")
