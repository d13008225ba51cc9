"""Fixtures for the MCP tests: real server processes written with the official SDK."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from tests.mcp.helpers import REPO, HttpServer, child_env, wait_for_port


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    """Start ``python SCRIPT ARGS... http PORT`` and wait until it listens; killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(script_args: list[str], port: int) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, *script_args, "http", str(port)],
            env=child_env(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        started.append(proc)
        wait_for_port(port, proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
