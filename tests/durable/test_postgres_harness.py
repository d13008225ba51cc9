"""The PostgreSQL test harness: a real private cluster on 127.0.0.1 with passwords."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.support.postgres import PostgresCluster, find_bindir, postgres_problem, skip_or_fail

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _postmaster_pid(folder: Path) -> int:
    return int((folder / "data" / "postmaster.pid").read_text().splitlines()[0])


def _wait_until(condition: Callable[[], bool], timeout: float = 90.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` passes (generous: a busy machine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def test_cluster_answers_over_tcp_with_the_password(postgres_cluster: PostgresCluster) -> None:
    import psycopg

    with psycopg.connect(postgres_cluster.url, connect_timeout=30) as conn:
        user, database, address, one = conn.execute(
            "SELECT current_user, current_database(), inet_server_addr()::text, 1"
        ).fetchone()
    assert (user, database, one) == ("jianmu", "jianmu", 1)
    assert address.split("/")[0] == "127.0.0.1"  # TCP: a unix socket has no server address


def test_wrong_password_is_refused(postgres_cluster: PostgresCluster) -> None:
    import psycopg

    parts = urlsplit(postgres_cluster.url)
    wrong = urlunsplit(parts._replace(netloc=f"jianmu:not-the-password@127.0.0.1:{parts.port}"))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong, connect_timeout=30)
    no_password = urlunsplit(parts._replace(netloc=f"jianmu@127.0.0.1:{parts.port}"))
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(no_password, connect_timeout=30, passfile="/dev/null")


def test_url_host_is_loopback(postgres_cluster: PostgresCluster, postgres_url: str) -> None:
    for url in (postgres_cluster.url, postgres_cluster.admin_url, postgres_url):
        parts = urlsplit(url)
        assert parts.scheme == "postgresql"
        assert parts.hostname == "127.0.0.1"
        assert parts.port == postgres_cluster.port
    assert urlsplit(postgres_url).username == "jianmu"
    assert urlsplit(postgres_url).password == postgres_cluster.password


def test_postgres_url_databases_are_separate(
    postgres_cluster: PostgresCluster, postgres_url: str
) -> None:
    import psycopg

    other_url = postgres_cluster.create_database("harness_other")
    try:
        assert urlsplit(other_url).path != urlsplit(postgres_url).path
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE marks (v int)")
            conn.execute("INSERT INTO marks VALUES (7)")
        with psycopg.connect(other_url, autocommit=True) as conn:
            found = conn.execute("SELECT to_regclass('marks')").fetchone()
            assert found == (None,)
        with psycopg.connect(postgres_cluster.url, autocommit=True) as conn:
            assert conn.execute("SELECT to_regclass('marks')").fetchone() == (None,)
    finally:
        postgres_cluster.drop_database("harness_other")


def test_postgres_url_is_fresh_for_each_test(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
    assert tables == (0,)


def test_jianmu_may_create_databases_but_is_no_superuser(
    postgres_cluster: PostgresCluster,
) -> None:
    import psycopg

    with psycopg.connect(postgres_cluster.url) as conn:
        row = conn.execute(
            "SELECT rolsuper, rolcreatedb FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
    assert row == (False, True)
    with psycopg.connect(postgres_cluster.admin_url) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                            ).fetchone() == (True,)


def test_database_names_are_checked(postgres_cluster: PostgresCluster) -> None:
    with pytest.raises(ValueError, match="database name"):
        postgres_cluster.create_database('x"; DROP DATABASE jianmu; --')


def test_stop_ends_the_server_and_removes_the_folder(postgres_cluster: PostgresCluster) -> None:
    cluster = PostgresCluster().start()
    folder = cluster.folder
    assert folder is not None
    pid = _postmaster_pid(folder)
    assert _alive(pid)
    cluster.stop()
    assert not folder.exists()
    assert _wait_until(lambda: not _alive(pid))
    cluster.stop()  # a second stop does nothing
    with pytest.raises(RuntimeError, match="not running"):
        _ = cluster.url


def test_a_killed_owner_leaves_no_server_behind(postgres_cluster: PostgresCluster) -> None:
    """SIGKILL the process that started a cluster: its watchdog stops the server."""
    script = (
        "import json, sys\n"
        "from tests.support.postgres import PostgresCluster\n"
        "c = PostgresCluster().start()\n"
        "print(json.dumps({'folder': str(c.folder), 'port': c.port}), flush=True)\n"
        "sys.stdin.read()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        started = json.loads(owner.stdout.readline())
        folder = Path(started["folder"])
        pid = _postmaster_pid(folder)
        assert _alive(pid)
    finally:
        owner.kill()  # SIGKILL: no atexit, no finally in the owner
        owner.wait()
        if owner.stdin is not None:
            owner.stdin.close()
        if owner.stdout is not None:
            owner.stdout.close()
    assert _wait_until(lambda: not _alive(pid)), "the server outlived its killed owner"
    assert _wait_until(lambda: not folder.exists()), "the cluster folder was left behind"


def test_missing_binaries_are_reported_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JIANMU_PG_BINDIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="does not hold initdb, pg_ctl, postgres"):
        find_bindir()
    assert "JIANMU_PG_BINDIR" in (postgres_problem() or "")
    with pytest.raises(RuntimeError, match="JIANMU_PG_BINDIR"):
        PostgresCluster()


def test_require_postgres_turns_skips_into_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JIANMU_REQUIRE_POSTGRES", "1")
    with pytest.raises(pytest.fail.Exception, match="JIANMU_REQUIRE_POSTGRES=1 but no server"):
        skip_or_fail("no server")
    monkeypatch.delenv("JIANMU_REQUIRE_POSTGRES")
    with pytest.raises(pytest.skip.Exception, match="no server"):
        skip_or_fail("no server")
