"""Helpers for the MCP tests: paths, free ports, readiness polling, child environments."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WEATHER = str(HERE / "servers" / "weather_server.py")
NOTES = str(HERE / "servers" / "notes_server.py")
SERVE_APP = str(HERE / "serve_app.py")


def free_port() -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], attempts: int = 300) -> None:
    """Poll until ``port`` accepts connections (bounded); fail if the process died."""
    for _ in range(attempts):
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen on port {port} after {attempts} attempts")


def child_env() -> dict[str, str]:
    """The environment for child processes: jianmu importable from the checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


HttpServer = Callable[[list[str], int], subprocess.Popen[bytes]]
"""Starts ``python SCRIPT_ARGS... http PORT`` and waits until it listens."""
