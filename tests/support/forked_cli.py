"""Run a ``jianmu`` command to its end as ``subprocess.run`` would, without paying its imports.

A fresh ``python -m jianmu.cli`` spends ~0.3 s of CPU importing (~1 s with DBOS) before it does
anything, and the suite runs hundreds. `run_jianmu` runs it in a process forked from a
`ForkServer` that imported the CLI once (one per test process and startup environment, started
at first use): still a process of its own, with its own pid, folder, environment,
descriptors and exit status, running ``jianmu.cli`` as ``__main__``.

Where no server can run, or its imports printed anything (a warning each command would print
too), the command runs as a plain subprocess.
"""

from __future__ import annotations

import atexit
import os
import pkgutil
import subprocess
import sys
import threading
from collections.abc import Sequence

import jianmu._cli
from tests.support.forked import ForkServer

__all__ = ("DURABLE", "MCP", "run_jianmu")

CLI = ("jianmu.cli", *(f"jianmu._cli.{m.name}" for m in pkgutil.iter_modules(jianmu._cli.__path__)))
"""What every command imports: the CLI and its command modules."""

DURABLE = ("jianmu.durable", "jianmu.durable.engine", "jianmu.durable._workflow",
           "jianmu.durable._tables", "dbos", "dbos._sys_db_sqlite", "dbos._sys_db_postgres",
           "sqlalchemy", "sqlalchemy.dialects.sqlite", "sqlalchemy.dialects.postgresql",
           "psycopg", "jianmu.nodes", "jianmu.tools", "jianmu.llm.scripted",
           "jianmu.guard.guardrails")
"""What durable commands (``--app``, ``worker``) import besides the CLI: DBOS and its database
drivers, and what a durable app's trees import. ``jianmu.durable`` imports DBOS only when a
command reaches the database, so it is named here: each command would otherwise spend ~0.5 s of
CPU importing it."""

MCP = ("mcp.client.session", "mcp.client.stdio", "mcp.client.streamable_http", "jianmu.mcp")
"""What commands that connect to MCP servers (``tools list --mcp``) import: the MCP SDK, ~1 s."""

_STARTUP = ("PYTHON", "LC_", "LANG")
"""Prefixes of the variables Python reads when it starts: a server serves one set of them."""

_servers: dict[tuple[object, ...], ForkServer | None] = {}
_starting = threading.Lock()  # tests run commands from several threads at once


def run_jianmu(args: Sequence[str], *, cwd: str | os.PathLike[str], env: dict[str, str],
               input: str | None = None, timeout: float = 90,
               preload: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """``python -m jianmu.cli ARGS`` in ``cwd`` with ``env``, to its end; text out and err.

    ``preload`` names more modules for the server to import (`DURABLE` for durable commands).
    """
    server = _server(env, tuple(preload))
    if server is None:
        return subprocess.run(
            [sys.executable, "-m", "jianmu.cli", *args], cwd=cwd, env=env,
            input=input if input is not None else "", capture_output=True, text=True,
            timeout=timeout)
    return server.run(["-m", "jianmu.cli", *args], env=env, cwd=os.path.abspath(cwd),
                      input=input, timeout=timeout)


def _server(env: dict[str, str], preload: tuple[str, ...]) -> ForkServer | None:
    """The server for this startup environment and these modules; started at first use."""
    startup = {k: v for k, v in env.items() if k.startswith(_STARTUP)}
    key = (tuple(sorted(startup.items())), preload)
    with _starting:
        if key not in _servers:
            _servers[key] = _start(startup, preload)
        server = _servers[key]
    return server if server is not None and server.alive else None


def _start(startup: dict[str, str], preload: tuple[str, ...]) -> ForkServer | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STARTUP)}
    env.update(startup)
    try:
        server = ForkServer((*CLI, *preload), env=env)
    except (OSError, RuntimeError):
        return None
    atexit.register(server.close)
    return server if server.quiet else None
