"""Sandbox overhead: wall time of one trivial command (``true``) per call.

Compared in the same run against a plain ``subprocess.run`` of the same command:

- LocalSandbox without bubblewrap (session, rlimits, a control group where writable);
- LocalSandbox with bubblewrap (plus namespaces and a read-only view of ``/``);
- DockerSandbox in a running container, cold (a ``docker exec`` per command) and warm (one
  supervisor per container), when a daemon and the image are available.

Each LocalSandbox runs twice: ``warm=False`` (every command starts cold: the path before
warm supervisors) and warm (one supervisor per sandbox). The first call of a sandbox, which
starts its supervisor or container, is reported on its own ("cold start"). The warm rows pay
for the isolation between calls (issue 27): one command at a time, the keyring's seccomp
filter, and an IPC namespace per call (no bubblewrap, as root) or the sandbox's emptied after
each call (bubblewrap, Docker). The per-call namespace and the filter are set up in the child
forked ahead of the call; the row "ahead of a call: IPC namespace" shows what the namespace
costs there, off the call's path.

Targets (issue 16): LocalSandbox warm call of ``true`` at most 3x a plain ``subprocess.run``;
with bubblewrap (no network) at most 4x; a warm DockerSandbox call at most 5 ms. The figure is
the median of the calls after the first one. The plain baseline is measured twice: in this
process (the target's baseline) and in a small ``python3 -I -S`` of its own (no benchmark
imports, no other threads), and every ratio is printed against both ("here / small"). Floors
measured in the same run: a bare ``bwrap ... true``, a fork plus exec from a small Python, and
a bare ``docker exec true``.
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
LOCAL_RATIO = 3.0
BWRAP_RATIO = 4.0
DOCKER_TARGET = 0.005


def _plain(calls: int) -> float:
    times = []
    subprocess.run(["true"], check=True)
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run(["true"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def _sandboxed(box: Any, calls: int) -> tuple[float, float]:
    """(first call, median of the next ``calls``), in seconds."""
    await box.start()
    try:
        start = time.perf_counter()
        await box.exec(["true"])  # the first call starts the supervisor or container
        first = time.perf_counter() - start
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            result = await box.exec(["true"])
            times.append(time.perf_counter() - start)
            if not result.ok:
                raise RuntimeError(f"benchmark command failed: {result}")
        return first, statistics.median(times)
    finally:
        await box.close()


def _floor(argv: list[str], calls: int) -> float:
    """Median wall time of ``argv`` run plainly (a floor the sandbox cannot beat)."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run(argv, check=False, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _docker_exec_floor(workspace: Path, calls: int) -> float:
    """Median round trip of a bare ``docker exec true`` (create, start, inspect)."""
    import docker

    from jianmu.execution import DockerSandbox

    box = DockerSandbox(workspace)
    anyio.run(box.start)
    client = docker.from_env()
    try:
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            exec_id = client.api.exec_create(box.container_id, ["true"])["Id"]
            client.api.exec_start(exec_id)
            client.api.exec_inspect(exec_id)
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    finally:
        client.close()
        anyio.run(box.close)


_PLAIN_SMALL = (
    "import subprocess, time, statistics\n"
    "subprocess.run(['true'], check=True)\n"
    "t = []\n"
    "for _ in range(%d):\n"
    "    s = time.perf_counter()\n"
    "    subprocess.run(['true'], check=True, capture_output=True)\n"
    "    t.append(time.perf_counter() - s)\n"
    "print(statistics.median(t))\n"
)


def _small_python(source: str) -> float:
    """The figure a small ``python3 -I -S`` running ``source`` prints (seconds)."""
    done = subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", source],
                          capture_output=True, check=True, text=True)
    return float(done.stdout)


_FORK_EXEC = (
    "import os, time, statistics\n"
    "t = []\n"
    "for _ in range(30):\n"
    "    s = time.perf_counter(); pid = os.fork()\n"
    "    if pid == 0: os.execv('/bin/true', ['true'])\n"
    "    os.waitpid(pid, 0); t.append(time.perf_counter() - s)\n"
    "print(statistics.median(t))\n"
)
# what a warm call's child forked ahead pays for its own IPC namespace (root, no bubblewrap)
_OWN_IPC = (
    "import ctypes, os, time, statistics\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "r, w = os.pipe(); t = []\n"
    "for _ in range(30):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        s = time.perf_counter(); ok = libc.unshare(0x08000000) == 0\n"
    "        os.write(w, repr(time.perf_counter() - s if ok else -1.0).encode().ljust(32))\n"
    "        os._exit(0)\n"
    "    os.waitpid(pid, 0); t.append(float(os.read(r, 32)))\n"
    "print(statistics.median(t))\n"
)


def main() -> None:
    """Print per-call overhead of each sandbox and its ratio to a plain subprocess."""
    from jianmu.errors import JianmuError
    from jianmu.execution import DockerSandbox, LocalSandbox, bwrap_available
    from jianmu.execution._bwrap import minimal_root

    workspace = Path(tempfile.mkdtemp(prefix="jianmu-bench-"))  # granted by ACL, no chmod
    try:
        plain = _plain(CALLS)
        small = _small_python(_PLAIN_SMALL % CALLS)

        def ratio(seconds: float) -> str:
            return f"{seconds / plain:.1f}x / {seconds / small:.1f}x"

        rows: list[tuple[str, ...]] = [
            ("plain subprocess.run, here", f"{plain * 1000:.2f}", ratio(plain), "-", "-",
             "the target's baseline"),
            ("plain subprocess.run, small python", f"{small * 1000:.2f}", ratio(small), "-", "-",
             "python3 -I -S, nothing else loaded"),
        ]

        def add(label: str, figures: tuple[float, float] | None, ok: bool | None,
                target: str, note: str = "") -> None:
            if figures is None:
                rows.append((label, "-", "-", target, "-", note))
                return
            first, seconds = figures
            mark = "" if ok is None else f" {verdict(ok)}"
            rows.append((label, f"{seconds * 1000:.2f}", ratio(seconds), target + mark,
                         f"{first * 1000:.1f}", note))

        def local(label: str, ratio: float, **options: Any) -> None:
            for warm in (False, True):
                box = LocalSandbox(workspace, warm=warm, **options)
                figures = anyio.run(_sandboxed, box, CALLS)
                name = f"{label}, {'warm' if box.warm else 'cold'}"
                note = "" if box.warm or not warm else f"fallback: {box.warm_problem}"
                add(name, figures, figures[1] <= ratio * plain if warm else None,
                    f"<={ratio:g}x" if warm else "before", note)

        # without bubblewrap the network cannot be cut, so this row needs the operator's "on"
        local("LocalSandbox (no bwrap, network on)", LOCAL_RATIO, use_bwrap=False,
              network=True)
        if bwrap_available():
            local("LocalSandbox (bwrap, no network)", BWRAP_RATIO, use_bwrap=True,
                  network=False)
            bare = _floor(["bwrap", "--unshare-pid", "--unshare-net", "--die-with-parent",
                           *minimal_root("/usr/bin:/bin"), "--", "true"], CALLS)
            rows.append(("floor: bare `bwrap --unshare-pid/net true`", f"{bare * 1000:.2f}",
                         ratio(bare), "-", "-", "what a cold call cannot beat"))
        else:
            add("LocalSandbox (bwrap)", None, None, f"<={BWRAP_RATIO:g}x",
                "bubblewrap not usable here")
        fork = _small_python(_FORK_EXEC)
        rows.append(("floor: fork+exec from a small python", f"{fork * 1000:.2f}",
                     ratio(fork), "-", "-", "what a supervisor pays per call"))
        own_ipc = _small_python(_OWN_IPC)
        if own_ipc >= 0:  # root may make namespaces
            rows.append(("ahead of a call: IPC namespace", f"{own_ipc * 1000:.2f}",
                         ratio(own_ipc), "-", "-", "warm, no bwrap: in the child forked ahead"))
        try:
            for warm in (False, True):
                docker_box = DockerSandbox(workspace, warm=warm)
                figures = anyio.run(_sandboxed, docker_box, CALLS)
                note = "" if docker_box.warm_problem is None or not warm \
                    else f"fallback: {docker_box.warm_problem}"
                add(f"DockerSandbox, {'warm' if warm else 'cold'}", figures,
                    figures[1] <= DOCKER_TARGET if warm else None,
                    f"<={DOCKER_TARGET * 1000:g} ms" if warm else "before", note)
            bare = _docker_exec_floor(workspace, CALLS)
            rows.append(("floor: bare `docker exec true` (API)", f"{bare * 1000:.2f}",
                         ratio(bare), "-", "-", "what a cold call cannot beat"))
        except (JianmuError, ImportError) as exc:
            add("DockerSandbox (warm)", None, None, f"<={DOCKER_TARGET * 1000:g} ms",
                f"not run: {exc}"[:90])
        print(f"Per-call wall time of `true`, median of {CALLS} calls after the first; "
              "cold start = the first call")
        table(rows, ("runner", "ms/call", "vs plain: here / small", "target", "cold start ms",
                     "note"))
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


if __name__ == "__main__":
    main()
