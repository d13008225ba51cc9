"""LocalSandbox's warm supervisor: reuse, restart, clean-up, limits, the cold fallback, and the
children it forks ahead.

The warm supervisor forks the next command's child ahead of its call (its `Prefork`). That child
must be a fresh process for each command, take each call's limits, wait as root while idle (so
the commands' user cannot reach it), and be replaced when it dies idle."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

import jianmu.execution.local_sandbox as local_mod
from jianmu.execution._process import cgroup_support
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
from tests.execution._helpers import processes_with, wait_gone

pytestmark = pytest.mark.anyio

_ROOT_BWRAP = os.geteuid() == 0 and bwrap_available(network=False)
KINDS = [
    pytest.param(False, id="no-bwrap", marks=pytest.mark.skipif(
        cgroup_support() is None, reason="no writable control groups: no warm supervisor")),
    pytest.param(True, id="bwrap", marks=pytest.mark.skipif(
        not _ROOT_BWRAP or cgroup_support() is None,
        reason="a warm bubblewrap supervisor needs root, bubblewrap and control groups")),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _box(path: Path, bwrap: bool, **options: Any) -> LocalSandbox:
    box = LocalSandbox(path, use_bwrap=bwrap, network=not bwrap, pids=48, memory_mb=96,
                       **options)
    assert box.warm, box.warm_problem
    return box


def _supervisors(box: LocalSandbox) -> int | None:
    warm = box._warm
    sup = warm.supervisor if warm is not None else None
    return sup.pid if sup is not None and sup.alive else None


@pytest.mark.parametrize("bwrap", KINDS)
async def test_two_calls_share_one_supervisor(tmp_path: Path, bwrap: bool) -> None:
    async with _box(tmp_path, bwrap) as box:
        first = await box.exec("echo one")
        pid = _supervisors(box)
        second = await box.exec(["sh", "-c", "echo two; exit 4"])
        assert (first.stdout, second.stdout, second.exit_code) == ("one\n", "two\n", 4)
        assert pid is not None and _supervisors(box) == pid
        assert box.supervisor_starts == 1 and box.isolation["warm"] is True


@pytest.mark.parametrize("bwrap", KINDS)
async def test_a_killed_supervisor_is_restarted(tmp_path: Path, bwrap: bool) -> None:
    async with _box(tmp_path, bwrap) as box:
        assert (await box.exec("echo before")).ok
        warm = box._warm
        assert warm is not None and warm.supervisor is not None
        channel: Any = warm.supervisor._channel
        os.killpg(channel.proc.pid, signal.SIGKILL)  # bwrap and the supervisor in it
        with anyio.fail_after(10):
            while warm.supervisor.alive:
                await anyio.sleep(0.01)
        after = await box.exec("echo after")
        assert after.stdout == "after\n" and box.supervisor_starts == 2


@pytest.mark.parametrize("bwrap", KINDS)
async def test_supervisor_dying_mid_command_reports_it_and_leaves_nothing(
    tmp_path: Path, bwrap: bool
) -> None:
    tag = f"{uuid.uuid4().int % 10**6}"
    async with _box(tmp_path, bwrap) as box:
        await box.exec("true")
        warm = box._warm
        assert warm is not None and warm.supervisor is not None
        channel: Any = warm.supervisor._channel
        results = []

        async def call() -> None:
            results.append(await box.exec(f"sleep 4000.{tag}", timeout=60))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(10):
                while not processes_with(f"4000.{tag}"):
                    await anyio.sleep(0.01)
            os.killpg(channel.proc.pid, signal.SIGKILL)
        assert results[0].exit_code != 0 and "supervisor died" in results[0].stderr
        assert await wait_gone(f"4000.{tag}")
        assert (await box.exec("echo next")).stdout == "next\n"


@pytest.mark.skipif(not _ROOT_BWRAP or cgroup_support() is None,
                    reason="fork bombs run only inside a warm bubblewrap sandbox")
async def test_fork_bomb_in_a_warm_sandbox_leaves_nothing(tmp_path: Path) -> None:
    tag = f"bomb{uuid.uuid4().int % 10**6}"
    bomb = (
        "import os, signal, time\n"
        "try:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"
        "while True:\n"
        "    try:\n"
        "        if os.fork() == 0:\n            os.setsid()\n"
        "    except OSError:\n        time.sleep(0.01)\n"
    )
    async with _box(tmp_path, True) as box:
        await box.exec("true")
        pid = _supervisors(box)
        result = await box.exec([box.python, "-c", bomb, tag], timeout=2)
        assert result.exit_code != 0
        assert await wait_gone(tag), len(processes_with(tag))
        assert (await box.exec("echo alive")).stdout == "alive\n"
        assert _supervisors(box) == pid  # kill(-1) as the commands' user cannot reach it


@pytest.mark.parametrize("bwrap", KINDS)
async def test_timeout_kills_the_whole_group_and_setsid_leftovers(
    tmp_path: Path, bwrap: bool
) -> None:
    tag = f"{uuid.uuid4().int % 10**6}"
    async with _box(tmp_path, bwrap) as box:
        result = await box.exec(
            f"setsid sleep 5000.{tag} & sleep 5001.{tag} & sleep 5002.{tag}", timeout=0.5
        )
        assert result.timed_out and result.exit_code == -signal.SIGKILL
        assert processes_with(f".{tag}") == []
        left = await box.exec(f"(setsid sleep 5003.{tag} &); echo back")
        assert left.stdout == "back\n" and processes_with(f".{tag}") == []


@pytest.mark.parametrize("bwrap", KINDS)
async def test_output_caps_and_stdin(tmp_path: Path, bwrap: bool) -> None:
    async with _box(tmp_path, bwrap, output_limit=1000) as box:
        result = await box.exec(["sh", "-c", "head -c 5000 /dev/zero | tr '\\0' y; "
                                 "head -c 3000 /dev/zero | tr '\\0' z >&2"])
        assert result.truncated and result.stdout.startswith("y" * 1000 + "\n")
        assert "4000 more bytes" in result.stdout and "2000 more bytes" in result.stderr
        echoed = await box.exec("wc -c", stdin="q" * 300_000)
        assert echoed.stdout.strip() == "300000"


@pytest.mark.parametrize("bwrap", KINDS)
async def test_concurrent_calls_and_cancel(tmp_path: Path, bwrap: bool) -> None:
    tag = f"{uuid.uuid4().int % 10**6}"
    async with _box(tmp_path, bwrap) as box:
        outs: dict[int, str] = {}

        async def call(i: int) -> None:
            outs[i] = (await box.exec(f"sleep 0.2; echo {i}")).stdout

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(call, i)
        assert outs == {i: f"{i}\n" for i in range(4)}

        async def hung() -> None:
            await box.exec(f"sleep 6000.{tag} & sleep 6001.{tag}", timeout=60)

        async with anyio.create_task_group() as tg:  # cancelled once both sleeps run
            tg.start_soon(hung)
            with anyio.fail_after(10):
                while len([c for c in processes_with(f".{tag}") if c.startswith("sleep")]) < 2:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        assert await wait_gone(f".{tag}")
        assert box.supervisor_starts == 1


@pytest.mark.parametrize("bwrap", KINDS)
async def test_memory_limit_per_command(tmp_path: Path, bwrap: bool) -> None:
    async with _box(tmp_path, bwrap) as box:
        big = await box.exec([box.python, "-c", "x = b'x' * (400 * 2**20); print('alive')"])
        assert big.oom_killed and "alive" not in big.stdout, big
        assert (await box.exec("echo fine")).stdout == "fine\n"


async def test_no_cgroups_falls_back_to_cold_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(local_mod, "cgroup_support", lambda: None)
    box = LocalSandbox(tmp_path, use_bwrap=False, network=True)
    assert not box.warm and "control groups" in (box.warm_problem or "")
    assert box.isolation["warm"] is False
    with caplog.at_level("INFO", logger="jianmu.execution.local_sandbox"):
        async with box:
            assert (await box.exec("echo cold")).stdout == "cold\n"
    assert "starts cold" in caplog.text and box.supervisor_starts == 0


def test_bwrap_as_a_user_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not bwrap_available(network=False) or cgroup_support() is None:
        pytest.skip("needs bubblewrap and control groups to reach the check")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    box = LocalSandbox(tmp_path, use_bwrap=True)
    assert not box.warm and "share the commands' uid" in (box.warm_problem or "")
    assert LocalSandbox(tmp_path, warm=False, network=True, use_bwrap=False).warm is False


@pytest.mark.parametrize("bwrap", KINDS)
async def test_a_kernel_without_message_queues_keeps_one_supervisor(
    tmp_path: Path, bwrap: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jianmu.execution._bwrap as bwrap_mod
    import jianmu.execution._warm as warm_mod

    for module in (bwrap_mod, warm_mod):  # no /dev/mqueue to list: nothing to empty there
        monkeypatch.setattr(module, "mqueue_available", lambda: False)
    async with _box(tmp_path, bwrap) as box:
        for _ in range(3):
            assert (await box.exec("echo again")).stdout == "again\n"
        assert box.supervisor_starts == 1


pytestmark = pytest.mark.anyio

PREFORK_KINDS = [
    pytest.param(False, id="no-bwrap", marks=pytest.mark.skipif(
        cgroup_support() is None or os.geteuid() != 0,
        reason="children wait as root only when the sandbox runs as root with cgroups")),
    pytest.param(True, id="bwrap", marks=pytest.mark.skipif(
        os.geteuid() != 0 or not bwrap_available(network=False) or cgroup_support() is None,
        reason="a warm bubblewrap supervisor needs root, bubblewrap and control groups")),
]


def _prefork_box(path: Path, bwrap: bool, **options: Any) -> LocalSandbox:
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


async def _child_ahead(box: LocalSandbox) -> int:
    """The host pid of a child forked ahead for the next call: one call is made once the
    next call's group is ready (`_groups_ahead`), so that it forks that call's child."""
    await _groups_ahead(box, 2)
    assert (await box.exec("true")).ok
    return await _waiting_child(box)


async def _groups_ahead(box: LocalSandbox, calls: int) -> None:
    """Wait until the groups of the next ``calls`` calls are made: a call forks the next one's
    child ahead only when that call's group is ready as it starts (made on the owner thread,
    which a busy machine may delay)."""
    with anyio.fail_after(10):
        while True:
            pool = list(_warm(box)._pool)[:calls]
            if len(pool) == calls and all(made.done() for _, made in pool):
                return
            await anyio.sleep(0.01)


def _uids(pid: int) -> list[str]:
    with open(f"/proc/{pid}/status") as fh:
        return next(line for line in fh if line.startswith("Uid:")).split()[1:]


@pytest.mark.parametrize("bwrap", PREFORK_KINDS)
async def test_a_command_cannot_see_or_reuse_the_previous_commands_child(
    tmp_path: Path, bwrap: bool
) -> None:
    async with _prefork_box(tmp_path, bwrap) as box:
        for _ in range(3):
            assert (await box.exec("true")).ok
        # the child of the call below, forked ahead by a call made once its group was ready (a
        # busy machine may make it only after the last call above has started: none then)
        await _child_ahead(box)
        await _groups_ahead(box, 2)  # this call's group, and the next one's for its spare
        before = _warm(box).preforked
        first = await box.exec("echo $$; sleep 30 & echo $!")
        pid, background = first.stdout.split()
        await _waiting_child(box)
        second = await box.exec(  # a zombie waiting for init to reap it is no process left
            f"echo $$; for p in {pid} {background}; do "
            f"case $(grep State /proc/$p/status 2>/dev/null) in "
            f"''|*zombie*) echo GONE $p;; *) echo SEEN $p;; esac; done"
        )
        lines = second.stdout.split("\n")
        assert lines[0] != pid and lines[0] != background, second
        assert f"GONE {pid}" in second.stdout and f"GONE {background}" in second.stdout, second
        assert _warm(box).preforked == before + 2  # both ran in a child forked ahead


@pytest.mark.parametrize("bwrap", PREFORK_KINDS)
async def test_the_waiting_child_is_root_and_out_of_the_commands_reach(
    tmp_path: Path, bwrap: bool
) -> None:
    async with _prefork_box(tmp_path, bwrap) as box:
        for _ in range(3):
            assert (await box.exec("true")).ok
        waiting = await _child_ahead(box)
        assert _uids(waiting) == ["0", "0", "0", "0"]  # it drops to the user only at its call
        if bwrap:  # in its own pid namespace: kill(-1) and a probe of every pid it can see
            await _groups_ahead(box, 2)  # so that this call forks the next one's child too
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


@pytest.mark.parametrize("bwrap", PREFORK_KINDS)
async def test_limits_changed_between_calls_are_honoured(tmp_path: Path, bwrap: bool) -> None:
    probe = ("import resource as r; print(r.getrlimit(r.RLIMIT_FSIZE)[1], "
             "r.getrlimit(r.RLIMIT_CPU)[1])")
    # six children alive at once: each waits to read its line from a fifo that is written
    # only once all are forked (they slept 2 s each, for a wait only the forks needed)
    fork_five = ("mkfifo gate; exec 3<>gate; rm gate; "
                 "for i in 1 2 3 4 5 6; do { read x <&3; } & done 2>&1; "
                 "printf '1\\n2\\n3\\n4\\n5\\n6\\n' >&3; wait; echo done")
    async with _prefork_box(tmp_path, bwrap, file_size_mb=3, pids=4, cpu_seconds=7) as box:
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


@pytest.mark.parametrize("bwrap", PREFORK_KINDS)
async def test_a_child_killed_while_idle_is_replaced(tmp_path: Path, bwrap: bool) -> None:
    async with _prefork_box(tmp_path, bwrap) as box:
        for _ in range(3):
            assert (await box.exec("true")).ok
        waiting = await _child_ahead(box)
        os.kill(waiting, signal.SIGKILL)
        replacement = await _waiting_child(box, not_pid=waiting)
        assert replacement != waiting
        before = _warm(box).preforked
        result = await box.exec("echo replaced")
        assert result.stdout == "replaced\n" and _warm(box).preforked == before + 1
        assert box.supervisor_starts == 1


@pytest.mark.parametrize("bwrap", KINDS)
async def test_a_closed_supervisors_pipes_are_closed_not_left_to_the_collector(
    tmp_path: Path, bwrap: bool
) -> None:
    # its stdout was left open: a ResourceWarning ("unclosed file") once the Popen was collected
    async with _box(tmp_path, bwrap) as box:
        assert (await box.exec("echo hello")).ok
        warm = box._warm
        assert warm is not None and warm.supervisor is not None
        sup = warm.supervisor
        channel: Any = sup._channel
    sup._reader.join(10)
    assert channel.proc.stdin.closed and channel.proc.stdout.closed
