"""Real worker processes of the durable test app, for the durable tests."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.forked import ForkServer, shared_server

HERE = Path(__file__).resolve().parent.parent / "durable"
ROOT = HERE.parent.parent

PRELOAD = (
    "dbos", "sqlalchemy", "psycopg", "pydantic", "py_trees", "jianmu.config",
    "jianmu.durable.engine", "jianmu.durable._workflow", "jianmu.durable._tables",
    "jianmu.guard.guardrails", "jianmu.llm.messages", "jianmu.llm.provider",
    "jianmu.llm.scripted", "jianmu.nodes", "jianmu.nodes.cut_off", "jianmu.runtime",
    "jianmu.state", "jianmu.tools", "jianmu.cli", "jianmu._cli.durable",
)
"""What every worker of the test app imports (``worker.py`` and ``jianmu worker``), and
nothing that reads a worker's settings (`durable_app` does: each worker imports it itself)."""

def fork_server() -> ForkServer:
    """This test process's fork server pre-imported with `PRELOAD` (the test app's folder on
    its path)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    server = shared_server(PRELOAD, env)
    assert server is not None, "the durable workers' fork server did not start"
    return server


def wait_for(condition: Callable[[], Any], timeout: float = 120.0, what: str = "") -> Any:
    """Wait until ``condition()`` is truthy; fail (never hang) after a generous ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.05)


class Workers:
    """Starts and kills real worker processes of `durable_app`."""

    def __init__(self, db: str, tmp: Path) -> None:
        self.db = db
        self.tmp = tmp
        self.procs: list[Any] = []  # Popen, or ForkedProcess
        self._logs: list[Any] = []  # each worker's log, open while it runs

    def env(self, worker: str, **extra: str) -> dict[str, str]:
        """The environment of a worker (or a CLI process) of the test app."""
        env = dict(os.environ)
        env.update({
            "JIANMU_TEST_DB": self.db, "JIANMU_TEST_WORKER": worker,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")]),
            "XDG_STATE_HOME": str(self.tmp / "state"),
        })
        env.update(extra)
        return env

    def start(self, worker: str, **extra: str) -> Any:
        """Start a worker (forked from the pre-imported `fork_server`, in a session of its own)
        and wait until it has launched; its `subprocess.Popen`-like handle."""
        proc, line = self.launch(worker, f"{worker}.log", **extra)
        if not line.startswith("ready"):
            proc.kill()
            log_text = (self.tmp / f"{worker}.log").read_text()
            raise AssertionError(f"worker {worker} did not start: {line!r}\n{log_text}")
        return proc

    def launch(self, worker: str, log_name: str, **extra: str) -> tuple[Any, str]:
        """Start a worker, its stderr in ``log_name`` (in the test's folder); its handle and
        the first line it printed ("ready ..." once launched, empty if it exited)."""
        log = open(self.tmp / log_name, "a", encoding="utf-8")
        self._logs.append(log)
        proc = fork_server().spawn([str(HERE / "worker.py")], env=self.env(worker, **extra),
                                   cwd=os.getcwd(), stderr=log.fileno(), new_session=True)
        self.procs.append(proc)  # killed at the end of the test whatever happens
        assert proc.stdout is not None
        return proc, proc.stdout.readline()

    def pause(self, proc: Any) -> None:
        """SIGSTOP a worker (slow, not dead: its heartbeat stops) at a moment it is inside no
        write of the database. One stopped inside a SQLite write keeps the file's one write
        lock, and one stopped inside a PostgreSQL transaction keeps its row locks: no other
        worker could write (nor take it over) until it was woken (README, durable runs)."""
        for _ in range(40):
            os.killpg(proc.pid, signal.SIGSTOP)
            if not self._write_held():
                return
            os.killpg(proc.pid, signal.SIGCONT)  # let it finish that write, then stop it again
            time.sleep(0.05)
        raise AssertionError("the worker was inside a write of the database at every pause")

    def _write_held(self) -> bool:
        """Whether a process (the stopped worker) holds a write of the database: the SQLite
        write lock, or a PostgreSQL session left for seconds inside a transaction that wrote
        or locked rows (DBOS holds an advisory lock in one that does neither)."""
        if self.db.startswith("sqlite:///"):
            probe = sqlite3.connect(self.db[len("sqlite:///"):], timeout=3.0,
                                    isolation_level=None)
            try:
                probe.execute("BEGIN IMMEDIATE")  # waits out any live writer's short hold
                probe.execute("ROLLBACK")
                return False
            except sqlite3.OperationalError:  # "database is locked": held past the timeout
                return True
            finally:
                probe.close()
        import sqlalchemy as sa

        from jianmu.durable._tables import sqlalchemy_url

        db = sa.create_engine(sqlalchemy_url(self.db), poolclass=sa.pool.NullPool)
        try:
            with db.connect() as conn:
                deadline = time.monotonic() + 3.0
                while time.monotonic() < deadline:
                    if not conn.execute(sa.text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND state LIKE 'idle in transaction%' AND backend_xid IS NOT NULL"
                    )).scalar():
                        return False
                    conn.rollback()  # a fresh snapshot of the sessions at the next look
                    time.sleep(0.05)
                return True
        finally:
            db.dispose()

    @staticmethod
    def kill(proc: Any) -> None:
        """SIGKILL a worker: no clean-up runs."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=60)
            if proc.stdout is not None:  # else collected later, in another test's warnings
                proc.stdout.close()
        for log in self._logs:
            log.close()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database: the embedded SQLite file, and a real PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'durable.sqlite'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def workers(db_url: str, tmp_path: Path) -> Iterator[Workers]:
    """Worker processes on the test's database; all killed at the end."""
    pool = Workers(db_url, tmp_path)
    try:
        yield pool
    finally:
        pool.close()


def engine_client(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The test app's engine in this process, as a client of ``db_url`` (never launched)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.syspath_prepend(str(HERE))
    from durable_app import engine

    from jianmu.durable import DurableEngine

    made = DurableEngine(db_url, name=engine.name, config=engine.config)
    made._trees = engine._trees  # the same registered trees, on this test's database
    return made


@pytest.fixture
def client(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`engine_client`, shut down after the test."""
    made = engine_client(db_url, tmp_path, monkeypatch)
    try:
        yield made
    finally:
        made.shutdown()
