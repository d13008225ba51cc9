"""Sandbox overhead: wall time of one trivial command (``true``) per call.

Compared in the same run against a plain ``subprocess.run`` of the same command:

- LocalSandbox without bubblewrap (session, rlimits, a control group where writable);
- LocalSandbox with bubblewrap (plus namespaces and a read-only view of ``/``);
- DockerSandbox with a warm container (``exec`` in a running container), when a daemon and
  the image are available.

Targets: LocalSandbox under 0.1 s a call, warm DockerSandbox under 0.15 s a call. The figure is
the median of the calls after one warm-up call.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks._util import table, verdict

__all__ = ("main",)

CALLS = 30
LOCAL_TARGET = 0.1
DOCKER_TARGET = 0.15


def _plain(calls: int) -> float:
    times = []
    subprocess.run(["true"], check=True)
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run(["true"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def _sandboxed(box: Any, calls: int) -> float:
    await box.start()
    try:
        await box.exec(["true"])  # warm-up: the container start is not per-call overhead
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            result = await box.exec(["true"])
            times.append(time.perf_counter() - start)
            if not result.ok:
                raise RuntimeError(f"benchmark command failed: {result}")
        return statistics.median(times)
    finally:
        await box.close()


def main() -> None:
    """Print per-call overhead of each sandbox and its ratio to a plain subprocess."""
    from jianmu.errors import JianmuError
    from jianmu.execution import DockerSandbox, LocalSandbox, bwrap_available

    workspace = Path(tempfile.mkdtemp(prefix="jianmu-bench-"))  # granted by ACL, no chmod
    try:
        plain = _plain(CALLS)
        rows: list[tuple[str, ...]] = [
            ("plain subprocess.run", f"{plain * 1000:.1f}", "1.0x", "-", "")
        ]

        def add(label: str, seconds: float | None, target: float, note: str = "") -> None:
            if seconds is None:
                rows.append((label, "-", "-", "-", note))
                return
            rows.append((label, f"{seconds * 1000:.1f}", f"{seconds / plain:.1f}x",
                         f"<{target * 1000:.0f} ms {verdict(seconds < target)}", note))

        # without bubblewrap the network cannot be cut, so this row needs the operator's "on"
        bare = LocalSandbox(workspace, use_bwrap=False, network=True)
        add("LocalSandbox (no bwrap, network on)", anyio.run(_sandboxed, bare, CALLS),
            LOCAL_TARGET)
        if bwrap_available():
            box = LocalSandbox(workspace, use_bwrap=True, network=False)
            add("LocalSandbox (bwrap, no network)", anyio.run(_sandboxed, box, CALLS),
                LOCAL_TARGET)
        else:
            add("LocalSandbox (bwrap)", None, LOCAL_TARGET, "bubblewrap not usable here")
        try:
            docker_box = DockerSandbox(workspace)
            add("DockerSandbox (warm)", anyio.run(_sandboxed, docker_box, CALLS),
                DOCKER_TARGET)
        except (JianmuError, ImportError) as exc:
            add("DockerSandbox (warm)", None, DOCKER_TARGET, f"not run: {exc}"[:90])
        print(f"Per-call wall time of `true`, median of {CALLS} calls after a warm-up")
        table(rows, ("runner", "ms/call", "vs plain", "target", "note"))
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


if __name__ == "__main__":
    main()
