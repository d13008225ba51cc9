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

import os
import pkgutil
import subprocess
import sys
from collections.abc import Sequence

import jianmu._cli
from tests.support.forked import shared_server

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

def run_jianmu(args: Sequence[str], *, cwd: str | os.PathLike[str], env: dict[str, str],
               input: str | None = None, timeout: float = 90,
               preload: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """``python -m jianmu.cli ARGS`` in ``cwd`` with ``env``, to its end; text out and err.

    ``preload`` names more modules for the server to import (`DURABLE` for durable commands).
    """
    server = shared_server((*CLI, *preload), env)
    if server is None:
        return subprocess.run(
            [sys.executable, "-m", "jianmu.cli", *args], cwd=cwd, env=env,
            input=input if input is not None else "", capture_output=True, text=True,
            timeout=timeout)
    return server.run(["-m", "jianmu.cli", *args], env=env, cwd=os.path.abspath(cwd),
                      input=input, timeout=timeout)

