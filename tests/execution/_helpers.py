"""Helpers for the sandbox tests: Docker gating, sandbox construction, process-table checks."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from jianmu.execution._process import cgroup_support
from jianmu.execution.docker_sandbox import DEFAULT_IMAGE
from jianmu.execution.local_sandbox import bwrap_available

# Limits shared by every contract sandbox, small enough to hit quickly in a test.
MEMORY_MB = 96
PIDS = 48
OUTPUT_LIMIT = 64 * 1024


def docker_problem() -> str | None:
    """Why Docker tests cannot run here, or None when a daemon answers and the image exists."""
    try:
        import docker
    except ImportError:
        return "docker-py is not installed (pip install 'jianmu[docker]')"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        return f"no Docker daemon answers ({exc}); start dockerd"
    try:
        client.images.get(DEFAULT_IMAGE)
    except Exception:
        return f"image {DEFAULT_IMAGE} is missing; run `make sandbox-image`"
    finally:
        client.close()
    return None


def skip_or_fail(reason: str) -> None:
    """Skip, or fail under JIANMU_REQUIRE_DOCKER=1."""
    if os.environ.get("JIANMU_REQUIRE_DOCKER") == "1":
        pytest.fail(f"JIANMU_REQUIRE_DOCKER=1 but {reason}")
    pytest.skip(reason)


def require_docker() -> None:
    """Skip (or fail in CI) the calling test when Docker is not usable."""
    problem = docker_problem()
    if problem is not None:
        skip_or_fail(problem)


def local_problem(kind: str) -> str | None:
    """Why this local flavour cannot enforce the contract's limits here."""
    if kind == "local-bwrap" and not bwrap_available(network=False):
        return "bubblewrap is not installed or cannot create namespaces here"
    support = cgroup_support()
    if os.geteuid() == 0 and (support is None or "pids" not in support.controllers):
        return "running as root without a writable pids cgroup: no process limit binds"
    return None


SANDBOX_KINDS = [
    pytest.param("local", id="local"),
    pytest.param("local-bwrap", id="local-bwrap"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


def make_sandbox(kind: str, workspace: Path, **overrides: Any) -> Any:
    """Build (not start) a sandbox of ``kind`` with the contract limits."""
    options: dict[str, Any] = {
        "memory_mb": MEMORY_MB, "pids": PIDS, "timeout": 30.0, "output_limit": OUTPUT_LIMIT,
    }
    options.update(overrides)
    if kind == "docker":
        from jianmu.execution.docker_sandbox import DockerSandbox

        options.setdefault("network", False)
        return DockerSandbox(workspace, **options)
    from jianmu.execution.local_sandbox import LocalSandbox

    bwrap = kind == "local-bwrap"
    options.setdefault("network", not bwrap)  # network: false needs bubblewrap
    return LocalSandbox(workspace, use_bwrap=bwrap, **options)


def processes_with(text: str) -> list[str]:
    """Command lines of live (not zombie) host processes that contain ``text``."""
    return [cmdline for _, cmdline in _live_with(text)]


def pids_with(text: str) -> list[int]:
    """Pids of live (not zombie) host processes whose command line contains ``text``."""
    return [pid for pid, _ in _live_with(text)]


def _live_with(text: str) -> list[tuple[int, str]]:
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:  # a process may end while we look: it is gone, not an error
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry.name}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z" and str(os.getpid()) != entry.name:
            found.append((int(entry.name), cmdline))
    return found


def unique_tag() -> str:
    """Six digits for a test's ``sleep 1000.<tag>``: `processes_with` looks at the whole host,
    where the same test may run meanwhile (another parametrization on another xdist worker,
    another session), and a fixed tag would find its processes."""
    return f"{uuid.uuid4().int % 10**6:06d}"


async def wait_gone(text: str) -> bool:
    """Wait (bounded) for SIGKILLed processes holding ``text`` to leave the process table."""
    import anyio

    with anyio.move_on_after(5):
        while processes_with(text):
            await anyio.sleep(0.01)
    return not processes_with(text)
