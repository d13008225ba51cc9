"""LocalSandbox's pre-forked children: one per command, never reused, limits per call, replaced.

The warm supervisor forks the next command's child ahead of its call (`_supervisor_spare`).
That child must be a fresh process for each command, take each call's limits, wait as root
while idle (so the commands' user cannot reach it), and be replaced when it dies idle.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from jianmu.execution._process import cgroup_support
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available

pytestmark = pytest.mark.anyio

KINDS = [
    pytest.param(False, id="no-bwrap", marks=pytest.mark.skipif(
        cgroup_support() is None or os.geteuid() != 0,
        reason="children wait as root only when the sandbox runs as root with cgroups")),
    pytest.param(True, id="bwrap", marks=pytest.mark.skipif(
        os.geteuid() != 0 or not bwrap_available(network=False) or cgroup_support() is None,
        reason="a warm bubblewrap supervisor needs root, bubblewrap and control groups")),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _box(path: Path, bwrap: bool, **options: Any) -> LocalSandbox:
    box = LocalSandbox(path, use_bwrap=bwrap, network=not bwrap, **options)
    assert box.warm, box.warm_problem
    return box


def _warm(box: LocalSandbox) -> Any:
    assert box._warm is not None
    return box._warm


async def _waiting_child(box: LocalSandbox, not_pid: int | None = None) -> int:
    """The host pid of the child waiting in the next call's control group."""
    with anyio.fail_after(10):
        while True:
            group = _warm(box).upcoming
            pids = group.pids() - {not_pid} if group is not None else set()
            if pids:
                assert len(pids) == 1, pids
                return pids.pop()
            await anyio.sleep(0.01)


def _uids(pid: int) -> list[str]:
    with open(f"/proc/{pid}/status") as fh:
        return next(line for line in fh if line.startswith("Uid:")).split()[1:]


@pytest.mark.parametrize("bwrap", KINDS)
async def test_a_command_cannot_see_or_reuse_the_previous_commands_child(
    tmp_path: Path, bwrap: bool
) -> None:
    async with _box(tmp_path, bwrap) as box:
        for _ in range(3):
            assert (await box.exec("true")).ok
        before = _warm(box).preforked
        first = await box.exec("echo $$; sleep 30 & echo $!")
        pid, background = first.stdout.split()
        second = await box.exec(  # a zombie waiting for init to reap it is no process left
            f"echo $$; for p in {pid} {background}; do "
            f"case $(grep State /proc/$p/status 2>/dev/null) in "
            f"''|*zombie*) echo GONE $p;; *) echo SEEN $p;; esac; done"
        )
        lines = second.stdout.split("\n")
        assert lines[0] != pid and lines[0] != background, second
        assert f"GONE {pid}" in second.stdout and f"GONE {background}" in second.stdout, second
        assert _warm(box).preforked == before + 2  # both ran in a child forked ahead


@pytest.mark.parametrize("bwrap", KINDS)
async def test_the_waiting_child_is_root_and_out_of_the_commands_reach(
    tmp_path: Path, bwrap: bool
) -> None:
    async with _box(tmp_path, bwrap) as box:
        for _ in range(3):
            assert (await box.exec("true")).ok
        waiting = await _waiting_child(box)
        assert _uids(waiting) == ["0", "0", "0", "0"]  # it drops to the user only at its call
        if bwrap:  # in its own pid namespace: kill(-1) and a probe of every pid it can see
            hit = await box.exec(
                "for p in /proc/[0-9]*; do p=${p#/proc/}; "
                "kill -0 $p 2>/dev/null && echo CAN $p; done; echo self $$; "
                "kill -STOP -1; kill -9 -1; echo tried"
            )
            reached = {line.split()[1] for line in hit.stdout.splitlines()
                       if line.startswith("CAN")}
            assert "tried" in hit.stdout and reached <= {hit.stdout.split("self ")[1].split()[0]}
        before = _warm(box).preforked
        after = await box.exec("id -u")
        assert after.stdout.strip() == str(box.user[0] if box.user else os.getuid())
        assert _warm(box).preforked == before + 1 and box.supervisor_starts == 1, after


@pytest.mark.parametrize("bwrap", KINDS)
async def test_limits_changed_between_calls_are_honoured(tmp_path: Path, bwrap: bool) -> None:
    probe = ("import resource as r; print(r.getrlimit(r.RLIMIT_FSIZE)[1], "
             "r.getrlimit(r.RLIMIT_CPU)[1])")
    fork_five = "for i in 1 2 3 4 5 6; do sleep 2 & done 2>&1; wait; echo done"
    async with _box(tmp_path, bwrap, file_size_mb=3, pids=4, cpu_seconds=7) as box:
        for _ in range(2):
            assert (await box.exec("true")).ok
        first = await box.exec([box.python, "-c", probe])
        assert first.stdout.split() == [str(3 * 2**20), "7"], first
        few = await box.exec(fork_five, timeout=20)
        box.file_size_mb, box.cpu_seconds, box.pids = 5, 9, 64
        second = await box.exec([box.python, "-c", probe])
        assert second.stdout.split() == [str(5 * 2**20), "9"], second
        many = await box.exec(fork_five, timeout=20)
        box.file_size_mb = 1
        big = await box.exec("head -c 2000000 /dev/zero > big; echo $?")
        assert big.stdout.strip() != "0" and os.path.getsize(tmp_path / "big") <= 2**20, big
    assert "fork" in (few.stdout + few.stderr).lower() or few.exit_code != 0, few
    assert many.ok and "fork" not in (many.stdout + many.stderr).lower(), many


@pytest.mark.parametrize("bwrap", KINDS)
async def test_a_child_killed_while_idle_is_replaced(tmp_path: Path, bwrap: bool) -> None:
    async with _box(tmp_path, bwrap) as box:
        for _ in range(3):
            assert (await box.exec("true")).ok
        waiting = await _waiting_child(box)
        os.kill(waiting, signal.SIGKILL)
        replacement = await _waiting_child(box, not_pid=waiting)
        assert replacement != waiting
        before = _warm(box).preforked
        result = await box.exec("echo replaced")
        assert result.stdout == "replaced\n" and _warm(box).preforked == before + 1
        assert box.supervisor_starts == 1
