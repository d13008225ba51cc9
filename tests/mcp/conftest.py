"""Fixtures for the MCP tests: real server processes written with the official SDK."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from tests.mcp.helpers import REPO, HttpServer, child_env, wait_for_port

EVERYTHING = "@modelcontextprotocol/server-everything"


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


@pytest.fixture(scope="session")
def everything_bin() -> str:
    """``mcp-server-everything`` installed into a cache folder (skips when npm cannot)."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(f"npm/node are not installed: cannot run {EVERYTHING}")
    cache = Path(os.environ.get("JIANMU_NPM_CACHE") or Path.home() / ".cache" / "jianmu-tests")
    binary = cache / "node_modules" / ".bin" / "mcp-server-everything"
    if not binary.exists():
        try:
            subprocess.run(
                [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", EVERYTHING],
                check=True, capture_output=True, timeout=300,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            pytest.skip(f"npm could not install {EVERYTHING} (offline?): {exc}")
    return str(binary)
