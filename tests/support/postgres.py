"""A private PostgreSQL cluster for tests: 127.0.0.1 only, passwords, gone when the tests end.

Usage::

    from tests.support.postgres import PostgresCluster

    with PostgresCluster() as cluster:          # or cluster.start() ... cluster.stop()
        url = cluster.create_database("t1")    # postgresql://jianmu:PW@127.0.0.1:PORT/t1
        ...

The cluster lives in a fresh folder ``/tmp/jianmu-pg-XXXX`` (data, log and unix socket inside)
and listens on a free port of 127.0.0.1 with scram-sha-256 passwords: a superuser
``jianmu_admin`` (`admin_url`) and a user ``jianmu`` (CREATEDB, owner of the database
``jianmu``: `url`). When the test process is root, initdb, pg_ctl and the server run as the
``postgres`` user through ``runuser`` (PostgreSQL refuses root); otherwise as the current user.

Binaries come from ``$JIANMU_PG_BINDIR``, else the newest ``/usr/lib/postgresql/*/bin``, else
``pg_config --bindir``. `postgres_problem()` says why no cluster can start here (for skips).

A crashed test session cannot leave the server running: `start()` registers `stop()` with
atexit, and a watchdog process in its own session holds the read end of a pipe whose write
end only this process has; when this process ends in any way (even SIGKILL), the watchdog
reads EOF, stops the server with ``pg_ctl stop -m immediate`` and removes the folder.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

USER = "jianmu"
DATABASE = "jianmu"
ADMIN = "jianmu_admin"
SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
RUN_AS = "postgres"  # the account that runs the server when the test process is root

# Small and unsafe on purpose: tests want a fast start, not durability across power loss.
TEST_SETTINGS: dict[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "32MB",
    "max_connections": "200",
    "max_wal_size": "256MB",
    "password_encryption": "'scram-sha-256'",
    "log_min_messages": "warning",
}

_PORT_IN_USE = re.compile(r"could not bind|address already in use", re.IGNORECASE)
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# Runs in its own session; argv[1] is JSON {"stop": [...], "pidfile": ..., "folder": ...}.
_WATCHDOG = """
import json, os, shutil, subprocess, sys
job = json.loads(sys.argv[1])
sys.stdin.buffer.read()  # EOF: the owner stopped the cluster, or died
if os.path.exists(job["pidfile"]):
    try:
        subprocess.run(job["stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60, cwd="/")
    except Exception:
        pass
shutil.rmtree(job["folder"], ignore_errors=True)
"""


def _version_key(path: Path) -> tuple[int, ...]:
    """Sort key for /usr/lib/postgresql/<version>: 9.6 < 10 < 15."""
    parts = re.findall(r"\d+", path.parent.name)
    return tuple(int(part) for part in parts) if parts else (-1,)


def _has_server(bindir: Path) -> bool:
    return all((bindir / name).is_file() for name in SERVER_BINARIES)


def find_bindir() -> Path:
    """The folder holding initdb, pg_ctl and postgres; RuntimeError saying why when none."""
    configured = os.environ.get("JIANMU_PG_BINDIR")
    if configured:
        bindir = Path(configured)
        if not _has_server(bindir):
            raise RuntimeError(
                f"JIANMU_PG_BINDIR={configured} does not hold {', '.join(SERVER_BINARIES)}"
            )
        return bindir
    for bindir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key,
                         reverse=True):
        if _has_server(bindir):
            return bindir
    pg_config = shutil.which("pg_config")
    if pg_config:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                               check=False)
        bindir = Path(found.stdout.strip())
        if found.returncode == 0 and found.stdout.strip() and _has_server(bindir):
            return bindir
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) are not installed: "
        "install the Debian package `postgresql` (bash .ci/postgres-setup.sh) "
        "or set JIANMU_PG_BINDIR"
    )


def postgres_problem() -> str | None:
    """Why no test cluster can start here, or None when one can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'jianmu[dbos]')"
    try:
        find_bindir()
    except RuntimeError as exc:
        return str(exc)
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return "running as root but `runuser` is missing (util-linux)"
        try:
            pwd.getpwnam(RUN_AS)
        except KeyError:
            return f"running as root but there is no `{RUN_AS}` user to run PostgreSQL as"
    return None


def skip_or_fail(reason: str) -> None:
    """Skip, or fail under JIANMU_REQUIRE_POSTGRES=1 (CI), so a broken set-up cannot pass."""
    import pytest  # here: the benchmarks start clusters too, where pytest is not installed

    if os.environ.get("JIANMU_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"JIANMU_REQUIRE_POSTGRES=1 but {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresCluster:
    """One private PostgreSQL server for a test session; see the module docstring."""

    def __init__(self, bindir: Path | str | None = None,
                 settings: dict[str, str] | None = None) -> None:
        self.bindir = Path(bindir) if bindir is not None else find_bindir()
        self.settings = {**TEST_SETTINGS, **(settings or {})}
        self.password = secrets.token_hex(16)
        self.admin_password = secrets.token_hex(16)
        self.port = 0
        self.folder: Path | None = None
        self._as_root = os.geteuid() == 0
        self._watchdog: subprocess.Popen[bytes] | None = None

    # -- urls --------------------------------------------------------------------------

    def database_url(self, name: str) -> str:
        """The url of database ``name`` for the user ``jianmu``."""
        self._require_running()
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{name}"

    @property
    def url(self) -> str:
        """``postgresql://jianmu:PASSWORD@127.0.0.1:PORT/jianmu``."""
        return self.database_url(DATABASE)

    @property
    def admin_url(self) -> str:
        """The superuser's url, on the ``postgres`` database."""
        self._require_running()
        return f"postgresql://{ADMIN}:{self.admin_password}@127.0.0.1:{self.port}/postgres"

    @property
    def running(self) -> bool:
        """Whether start() succeeded and stop() has not run yet."""
        return self.folder is not None and self.port != 0

    # -- databases ---------------------------------------------------------------------

    def create_database(self, name: str) -> str:
        """Create an empty database owned by ``jianmu``; returns its url."""
        from psycopg import sql

        self._check_name(name)
        self._admin_execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(name), sql.Identifier(USER)))
        return self.database_url(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name``, ending its sessions (no error when it is already gone)."""
        from psycopg import sql

        self._check_name(name)
        self._admin_execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> PostgresCluster:
        """initdb, start the server, create the user and database; returns self."""
        if self.folder is not None:
            raise RuntimeError("this PostgresCluster was already started")
        base = "/tmp" if self._as_root else None  # root's TMPDIR may be closed to postgres
        self.folder = Path(tempfile.mkdtemp(prefix="jianmu-pg-", dir=base))
        atexit.register(self.stop)
        try:
            self._init()
            self._start_watchdog()
            self._start_server()
            self._create_user()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (fast, then immediate, then SIGKILL) and remove the folder."""
        atexit.unregister(self.stop)
        folder, self.folder, self.port = self.folder, None, 0
        if folder is None:
            return
        data = folder / "data"
        try:
            if (data / "postmaster.pid").exists():
                for mode in ("fast", "immediate"):
                    done = self._run(["pg_ctl", "stop", "-D", str(data), "-m", mode, "-w",
                                      "-t", "30"], cwd=folder, check=False, timeout=60)
                    if done.returncode == 0:
                        break
                else:
                    self._kill_postmaster(data)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            self._stop_watchdog()

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------------------

    def _require_running(self) -> None:
        if not self.running:
            raise RuntimeError("the PostgresCluster is not running; call start() first")

    @staticmethod
    def _check_name(name: str) -> None:
        if not _NAME.match(name):
            raise ValueError(f"database name {name!r}: use lower-case letters, digits, _ "
                             "(at most 63, not starting with a digit)")

    def _command(self, argv: list[str]) -> list[str]:
        """``argv`` with the binary resolved, run as postgres when we are root."""
        full = [str(self.bindir / argv[0]), *argv[1:]]
        return ["runuser", "-u", RUN_AS, "--", *full] if self._as_root else full

    def _run(self, argv: list[str], *, cwd: Path, check: bool = True,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
        # cwd inside our folder: initdb fails when it cannot read the current directory
        done = subprocess.run(self._command(argv), cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()}")
        return done

    def _init(self) -> None:
        assert self.folder is not None
        pwfile = self.folder / "pwfile"
        pwfile.write_text(self.admin_password + "\n")
        (self.folder / "socket").mkdir()
        self.folder.chmod(0o700)
        if self._as_root:
            account = pwd.getpwnam(RUN_AS)
            for path in (self.folder, pwfile, self.folder / "socket"):
                os.chown(path, account.pw_uid, account.pw_gid)
        self._run(["initdb", "-D", str(self.folder / "data"), "-U", ADMIN,
                   f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8", "--locale=C",
                   "--no-sync", "--no-instructions"], cwd=self.folder)
        pwfile.unlink()

    def _write_settings(self) -> None:
        assert self.folder is not None
        settings = {
            **self.settings,
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.folder / 'socket'}'",
        }
        # postgresql.auto.conf is read last, so these win; rewritten on each port attempt
        auto = self.folder / "data" / "postgresql.auto.conf"
        auto.write_text("".join(f"{key} = {value}\n" for key, value in settings.items()))

    def _start_server(self) -> None:
        assert self.folder is not None
        log = self.folder / "server.log"
        for attempt in range(5):
            self.port = _free_port()
            self._write_settings()
            done = self._run(["pg_ctl", "start", "-D", str(self.folder / "data"), "-l", str(log),
                              "-w", "-t", "60"], cwd=self.folder, check=False, timeout=90)
            if done.returncode == 0:
                return
            text = log.read_text(errors="replace") if log.exists() else ""
            # another process took the free port between the probe and the bind: try another
            if _PORT_IN_USE.search(text) and attempt < 4:
                continue
            tail = "\n".join(text.splitlines()[-20:])
            raise RuntimeError(f"PostgreSQL did not start ({done.stderr.strip()}); "
                               f"its log ends with:\n{tail}")

    def _create_user(self) -> None:
        from psycopg import sql

        self._admin_execute(sql.SQL("CREATE ROLE {} LOGIN CREATEDB PASSWORD {}").format(
            sql.Identifier(USER), sql.Literal(self.password)))
        self._admin_execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(DATABASE), sql.Identifier(USER)))

    def _admin_execute(self, statement: Any) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=30) as conn:
            conn.execute(statement)

    def _start_watchdog(self) -> None:
        assert self.folder is not None
        data = self.folder / "data"
        job = {
            "stop": self._command(["pg_ctl", "stop", "-D", str(data), "-m", "immediate",
                                   "-w", "-t", "30"]),
            "pidfile": str(data / "postmaster.pid"),
            "folder": str(self.folder),
        }
        # its own session: a signal to our process group does not reach it
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, json.dumps(job)], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
            start_new_session=True)

    def _stop_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is None:
            return
        if watchdog.stdin is not None:
            watchdog.stdin.close()  # EOF: the folder is gone, so it just exits
        try:
            watchdog.wait(timeout=60)
        except subprocess.TimeoutExpired:
            watchdog.kill()
            watchdog.wait()

    @staticmethod
    def _kill_postmaster(data: Path) -> None:
        """Last resort when pg_ctl cannot stop it: SIGKILL the postmaster by its pid file,
        if that pid is still this cluster's postmaster (a pid file outlives its server, and
        its pid may be another process's by now: under xdist, another test's)."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((data / "postmaster.pid").read_text().splitlines()[0])
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if any(b"postgres" in arg for arg in argv[:1]) and os.fsencode(data) in argv:
                os.kill(pid, signal.SIGKILL)
