"""Fixtures for the MCP tests: real server processes written with the official SDK."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from tests.mcp.helpers import REPO, HttpServer, child_env, wait_for_port
from tests.support.forked_mcp import start_server

EVERYTHING = "@modelcontextprotocol/server-everything"
FILESYSTEM = "@modelcontextprotocol/server-filesystem"


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    """Start ``python SCRIPT ARGS... http PORT`` (forked with the SDK imported: `start_server`)
    and wait until it listens; killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(script_args: list[str], port: int) -> subprocess.Popen[bytes]:  # or ForkedProcess
        proc = start_server([*script_args, "http", str(port)], env=child_env(), cwd=REPO)
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


@pytest.fixture(scope="session")
def filesystem_script() -> Path:
    """The installed server's entry point (installed on first use)."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("npm/node are not installed: cannot fetch the official filesystem server")
    cache = Path(os.environ.get("JIANMU_NPM_CACHE")
                 or Path.home() / ".cache" / "jianmu-tests" / "npm")
    script = cache / "node_modules" / FILESYSTEM / "dist" / "index.js"
    if not script.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", FILESYSTEM],
                capture_output=True, text=True, timeout=300,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm install {FILESYSTEM} timed out (registry unreachable?)")
        if done.returncode != 0 or not script.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            pytest.skip(
                f"npm install {FILESYSTEM} failed (registry unreachable?): {' | '.join(tail)}"
            )
    return script
