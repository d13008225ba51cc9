"""A worker that was only paused (SIGSTOP), then woken (SIGCONT): the run has one owner, and no
call is paid twice.

A paused worker's heartbeat stops, and the live workers used to take its runs over once it had
been silent for ``takeover_after_s``: woken, it ran its call in flight a second time. Now a
worker holds its executor id for its life (`_worker_lock`), and a silent worker that still holds
it is alive: nobody takes its runs, and it finishes them itself once woken. Both databases.

Its hold can still be lost while it is paused: PostgreSQL ends the session of a machine it no
longer hears (simulated here by ending that session). Then the live workers take its runs over,
and the woken worker must not pay for what its successor runs. DBOS refused the woken worker's
record of a step, but only after the step's body had run: a worker paused between two steps,
woken while its successor was in the next call, ran that call a second time (a payment made
twice). Now each step that is not replayed first checks that the run is still PENDING under
this worker's executor id.

A worker paused in the middle of a transaction would hold its locks until woken: its heartbeat
is therefore one statement, committed as it runs, so no live worker's claim of a paused one
waits on that one's heartbeat row.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support import durable
from tests.support.durable import Workers, wait_for

pytest.importorskip("dbos")
pytestmark = pytest.mark.timeout(400)

db_url = durable.db_url
workers = durable.workers
client = durable.client

_LOST = "no longer owned by this execution"
"""What DBOS logs when an execution finds its run taken over (it then waits for the owner)."""


def _paused(workers: Workers, client: Any, tmp_path: Path,
            **inputs: Any) -> tuple[Any, str, Path]:
    """Worker A reaches the point ``inputs`` name, B starts, A is paused."""
    out, marker = tmp_path / "lines.txt", tmp_path / "hung"
    a = workers.start("A", JIANMU_TEST_TAKEOVER="2")
    run_id = asyncio.run(client.start("lines", {
        "path": str(out), "asks": str(tmp_path / "asks.txt"), "marker": str(marker), **inputs,
    }))
    wait_for(marker.exists, what="worker A to reach the pause")
    workers.start("B", JIANMU_TEST_TAKEOVER="2")
    workers.pause(a)  # slow, not dead: its heartbeat stops
    return a, run_id, out


def _hold_lost(db_url: str) -> None:
    """End worker A's PostgreSQL session that holds its id, as the server does once it no
    longer hears A's machine."""
    import sqlalchemy as sa

    from jianmu.durable._tables import sqlalchemy_url
    from jianmu.durable._worker_lock import _key

    key = _key("testapp", "A")
    db = sa.create_engine(sqlalchemy_url(db_url), poolclass=sa.pool.NullPool)
    try:
        with db.begin() as conn:
            ended = conn.execute(sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
                " AND classid = :high AND objid = :low AND objsubid = 1"
            ), {"high": key >> 32, "low": key & 0xFFFFFFFF}).scalars().all()
    finally:
        db.dispose()
    assert ended == [True], ended


def _paused_and_taken_over(workers: Workers, client: Any, tmp_path: Path,
                           **inputs: Any) -> tuple[Any, str, Path]:
    """`_paused`, then A's hold on its id is lost (PostgreSQL): B takes the run."""
    a, run_id, out = _paused(workers, client, tmp_path, **inputs)
    _hold_lost(workers.db)
    wait_for(lambda: client.run_info(run_id).worker == "B", what="B to take the run")
    return a, run_id, out


def test_a_paused_worker_is_not_taken_over_and_finishes_its_run_once_woken(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    a, run_id, out = _paused(workers, client, tmp_path, hang_at=2, go=str(go))
    # B finds A silent past its takeover time, and alive: it says so, and takes nothing
    wait_for(lambda: "is alive" in (tmp_path / "B.log").read_text(),
             what="B to find A silent but alive")
    assert client.run_info(run_id).worker == "A"
    go.touch()
    os.killpg(a.pid, signal.SIGCONT)
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert client.run_info(run_id).worker == "A"
    assert Counter(out.read_text().splitlines()) == {"line 1": 1, "line 2": 1, "line 3": 1}


def test_a_heartbeat_leaves_no_transaction_open_between_statements(db_url: str) -> None:
    import sqlalchemy as sa

    from jianmu.durable._tables import WorkerRegistry

    registry = WorkerRegistry(db_url, "app")
    seen: list[tuple[str, bool]] = []

    def after(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        dbapi = conn.connection.dbapi_connection
        if hasattr(dbapi, "in_transaction"):  # sqlite3
            held = bool(dbapi.in_transaction)
        else:  # psycopg: IDLE is 0
            held = dbapi.info.transaction_status != 0
        seen.append((statement.split()[0], held))

    sa.event.listen(registry._db, "after_cursor_execute", after)
    try:
        registry.beat("A", started=1.0)  # its row made
        made, seen[:] = list(seen), []
        registry.beat("A", started=2.0)  # its row updated
        assert made == seen == [("INSERT", False)]  # one statement, nothing left open after it
        [row] = registry.workers()
        assert row["executor_id"] == "A" and row["started"] == 1.0
    finally:
        registry.close()


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_woken_worker_records_nothing_of_a_call_its_successor_ran(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    a, run_id, out = _paused_and_taken_over(workers, client, tmp_path, hang_at=2, go=str(go))
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    go.touch()
    os.killpg(a.pid, signal.SIGCONT)  # A's second call returns: its record is refused
    wait_for(lambda: _LOST in (tmp_path / "A.log").read_text(), what="A to give the run up")
    # the call in flight while A was paused ran on both (at-least-once); no other did
    assert Counter(out.read_text().splitlines()) == {"line 1": 1, "line 2": 2, "line 3": 1}
    assert client.run_info(run_id).status == "success"


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_woken_worker_starts_no_call_its_successor_runs(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    go, release = tmp_path / "go", tmp_path / "release"
    a, run_id, out = _paused_and_taken_over(workers, client, tmp_path, pause_before=3,
                                            go=str(go), release=str(release))

    def line_3() -> int:
        return out.read_text().splitlines().count("line 3")

    wait_for(lambda: line_3() == 1, what="B to be in the third call")
    go.touch()
    os.killpg(a.pid, signal.SIGCONT)  # A was paused between two steps: the next is B's
    wait_for(lambda: line_3() > 1 or _LOST in (tmp_path / "A.log").read_text(),
             what="A to run the third call or give the run up")
    release.touch()
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert client.run_info(run_id).worker == "B"
    # A recorded the first two calls and stopped before the third: each ran once
    assert Counter(out.read_text().splitlines()) == {"line 1": 1, "line 2": 1, "line 3": 1}
