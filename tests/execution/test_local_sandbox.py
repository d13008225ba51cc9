"""LocalSandbox beyond the shared contract: refusals, fallbacks, clean-up, cancellation, and
read-only mounts only with bubblewrap."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

import jianmu.execution._bwrap as bwrap_mod
import jianmu.execution.local_sandbox as local_mod
from jianmu.errors import SandboxError, SandboxUnavailableError
from jianmu.execution._bwrap import bwrap_binds_fds
from jianmu.execution._process import cgroup_support, sweep_stale_cgroups
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
from tests.execution._helpers import (
    local_problem,
    pids_with,
    processes_with,
    unique_tag,
    wait_gone,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behave as on a machine without bubblewrap."""
    monkeypatch.setattr(local_mod, "bwrap_problem", lambda network: "bwrap is not installed")


@pytest.fixture
def no_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behave as on a machine without writable control groups."""
    monkeypatch.setattr(local_mod, "cgroup_support", lambda: None)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"memory_mb": 0}, "memory_mb must be positive"),
        ({"cpus": -1}, "cpus must be positive"),
        ({"pids": 0}, "pids must be positive"),
        ({"timeout": 0}, "timeout must be positive"),
        ({"output_limit": 0}, "output_limit must be positive"),
        ({"file_size_mb": -5}, "file_size_mb must be positive"),
    ],
)
def test_bad_limits_are_refused(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LocalSandbox(tmp_path, **kwargs)


@pytest.mark.usefixtures("no_bwrap")
def test_network_false_without_bubblewrap_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailableError, match=r"network: false.* bubblewrap"):
        LocalSandbox(tmp_path, network=False)
    # unset means off too: the secure default is refused, not silently weakened
    with pytest.raises(SandboxUnavailableError, match=r"network is off \(the default"):
        LocalSandbox(tmp_path)
    with pytest.raises(SandboxUnavailableError, match="use_bwrap=True"):
        LocalSandbox(tmp_path, use_bwrap=True, network=True)
    assert LocalSandbox(tmp_path, network=True).isolation["bwrap"] is False


@pytest.mark.usefixtures("no_cgroup")
def test_pids_for_root_without_cgroups_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(SandboxUnavailableError, match="pids=10 cannot be enforced"):
        LocalSandbox(tmp_path, pids=10)


@pytest.mark.usefixtures("no_cgroup")
async def test_memory_limit_falls_back_to_the_address_space_rlimit(tmp_path: Path) -> None:
    box = LocalSandbox(tmp_path, memory_mb=128, use_bwrap=False, network=True)
    assert box.isolation["memory"] == "rlimit_as"
    async with box:
        result = await box.exec(["python3", "-c", "x = b'x' * (512 * 2**20); print('alive')"])
    assert result.oom_killed and "MemoryError" in result.stderr
    assert "memory limit of 128 MiB" in result.stderr and "alive" not in result.stdout


@pytest.mark.usefixtures("no_cgroup")
async def test_timeout_kills_the_group_without_cgroups(tmp_path: Path) -> None:
    tag = unique_tag()
    async with LocalSandbox(tmp_path, use_bwrap=False, network=True) as box:
        result = await box.exec(f"sleep 1000.{tag}1 & sleep 1000.{tag}2", timeout=0.5)
    assert result.timed_out and result.exit_code == -signal.SIGKILL
    assert await wait_gone(f"1000.{tag}")


@pytest.mark.usefixtures("no_cgroup")
@pytest.mark.parametrize(("bwrap", "leftovers"),
                         [(False, "process group"), (True, "pid namespace")])
async def test_isolation_says_what_kills_leftovers_without_cgroups(
    tmp_path: Path, bwrap: bool, leftovers: str
) -> None:
    if bwrap and local_problem("local-bwrap") is not None:
        pytest.skip("bubblewrap is not usable here")
    tag = unique_tag()
    async with LocalSandbox(tmp_path, use_bwrap=bwrap, network=True) as box:
        assert box.isolation["leftovers"] == leftovers
        # returns once the sleep runs, so in a session of its own (setsid execs it in place)
        await box.exec(f"setsid sleep 1000.{tag} </dev/null >/dev/null 2>&1 & "
                       'until [ "$(cat /proc/$!/comm)" = sleep ]; do :; done')
    if leftovers == "pid namespace":
        assert await wait_gone(f"1000.{tag}")
        return
    # only the process group was killed: the sleep that left it lives on (the test ends it)
    [line] = processes_with(f"1000.{tag}")
    assert line.startswith("sleep")
    for pid in pids_with(f"1000.{tag}"):  # (another process may end as the table is read)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert await wait_gone(f"1000.{tag}")


async def test_cancelling_exec_kills_the_command(tmp_path: Path) -> None:
    tag = unique_tag()
    async with LocalSandbox(tmp_path, use_bwrap=False, network=True) as box:
        with anyio.move_on_after(0.5) as scope:
            await box.exec(f"sleep 1000.{tag}1 & sleep 1000.{tag}2", timeout=60)
        assert scope.cancelled_caught
        assert await wait_gone(f"1000.{tag}")
        assert (await box.exec("echo after")).stdout == "after\n"


@pytest.mark.parametrize("bwrap", [False, True])
async def test_a_cold_command_may_open_its_own_stdio(tmp_path: Path, bwrap: bool) -> None:
    if bwrap and local_problem("local-bwrap") is not None:
        pytest.skip("bubblewrap is not usable here")
    async with LocalSandbox(tmp_path, use_bwrap=bwrap, network=True, warm=False) as box:
        result = await box.exec("cat /dev/stdin; echo out > /dev/stdout; echo err > /dev/stderr",
                                stdin="fed\n")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "fed\nout\n", "err\n")


async def test_cpu_seconds_limit(tmp_path: Path) -> None:
    async with LocalSandbox(tmp_path, cpu_seconds=1, use_bwrap=False, network=True) as box:
        result = await box.exec(["python3", "-c", "while True: pass"], timeout=60)
    assert not result.timed_out
    assert result.exit_code in (-signal.SIGXCPU, -signal.SIGKILL)


async def test_file_size_limit(tmp_path: Path) -> None:
    async with LocalSandbox(tmp_path, file_size_mb=1, use_bwrap=False, network=True) as box:
        result = await box.exec("head -c 3000000 /dev/zero > big.bin")
    assert not result.ok
    assert (tmp_path / "big.bin").stat().st_size <= 1024 * 1024


async def test_missing_cwd_and_private_tmp_lifecycle(tmp_path: Path) -> None:
    box = LocalSandbox(tmp_path / "new-ws", use_bwrap=False, network=True)
    with pytest.raises(ValueError, match="'nope' is not a folder"):
        await box.exec("pwd", cwd="nope")
    assert (tmp_path / "new-ws").is_dir()  # start() made the workspace
    home = (await box.exec('printf %s "$HOME"')).stdout
    assert Path(home).is_dir() and Path(home) != tmp_path
    await box.start()  # idempotent: same private folder
    assert (await box.exec('printf %s "$HOME"')).stdout == home
    await box.close()
    await box.close()
    assert not Path(home).exists()


@pytest.mark.skipif(cgroup_support() is None, reason="no writable control groups here")
async def test_cgroups_are_removed_and_stale_ones_swept(tmp_path: Path) -> None:
    support = cgroup_support()
    assert support is not None
    parent = next(iter(support.parents.values()))
    # a sandbox of an earlier test in this process may still be closing: only this box's
    # own cgroup is this test's to see gone
    before = set(parent.glob(f"jianmu-{os.getpid()}-*"))
    async with LocalSandbox(tmp_path, pids=20, use_bwrap=False, network=True) as box:
        await box.exec("true")
        made = set(parent.glob(f"jianmu-{os.getpid()}-*")) - before
        assert made  # the box ran in a cgroup of its own...
    assert not made & set(parent.glob(f"jianmu-{os.getpid()}-*"))  # ...removed when it closed
    stale = parent / "jianmu-999999999-deadbeef"  # no such pid: its owner crashed
    stale.mkdir()
    try:
        sweep_stale_cgroups()
        assert not stale.exists()
    finally:
        if stale.exists():
            stale.rmdir()


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
async def test_bwrap_sees_its_own_pid_namespace(tmp_path: Path) -> None:
    async with LocalSandbox(tmp_path, use_bwrap=True) as box:
        result = await box.exec("ls /proc | grep -c '^[0-9]'")
    # Only the sandbox's own few processes are visible, not the host's.
    assert int(result.stdout) < 10


@pytest.mark.parametrize("use_bwrap", [False, pytest.param(True, marks=pytest.mark.skipif(
    not bwrap_available(), reason="bubblewrap cannot run here"))])
async def test_cancelling_while_the_command_starts_still_kills_it(
    tmp_path: Path, use_bwrap: bool
) -> None:
    # Cancel at many points of the start-up: before, during and after the process exists.
    tag = unique_tag()
    async with LocalSandbox(tmp_path, use_bwrap=use_bwrap, network=True) as box:
        for step in range(15):
            with anyio.move_on_after(step * 0.003):
                await box.exec(f"sleep 1000.{tag}", timeout=60)
    assert await wait_gone(f"1000.{tag}")


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
async def test_a_call_cancelled_while_its_thread_starts_bwrap_keeps_its_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The descriptors bwrap mounts (``.git`` read-only, the seccomp filter) stay open until
    the thread that passes them on is done: a cancelled call closed them while the thread was
    still starting bwrap, which then got closed (or reused: another file) numbers."""
    (tmp_path / ".git").mkdir()  # a protected path: bwrap mounts it from a descriptor
    entered, go = threading.Event(), threading.Event()
    seen: list[list[tuple[int, int] | None]] = []
    start = local_mod.run_child

    def ident(fd: int) -> tuple[int, int] | None:
        try:
            st = os.fstat(fd)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def slow_start(spec: Any, *args: Any) -> Any:
        seen.append([ident(fd) for fd in spec.pass_fds])
        entered.set()
        go.wait(30)  # the caller is cancelled meanwhile
        seen.append([ident(fd) for fd in spec.pass_fds])
        return start(spec, *args)

    monkeypatch.setattr(local_mod, "run_child", slow_start)
    tag = unique_tag()
    async with LocalSandbox(tmp_path, warm=False) as box:
        async with anyio.create_task_group() as tg:
            tg.start_soon(box.exec, f"sleep 1000.{tag}")
            with anyio.fail_after(30):
                while not entered.is_set():
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        go.set()
        after = await box.exec("echo after")
    assert after.stdout == "after\n", after
    # the cancelled call's thread, as it began and once it went on (the next call's follow)
    assert seen[0] and None not in seen[0], seen
    assert seen[1] == seen[0], seen
    assert await wait_gone(f"1000.{tag}")


async def test_close_kills_running_commands(tmp_path: Path) -> None:
    box = LocalSandbox(tmp_path, use_bwrap=False, network=True)
    results = []
    tag = unique_tag()

    async def call() -> None:
        results.append(await box.exec(f"sleep 1000.{tag}", timeout=60))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(10):
            while not processes_with(f"1000.{tag}"):
                await anyio.sleep(0.01)
        await box.close()
    assert await wait_gone(f"1000.{tag}")
    assert results and results[0].exit_code == -signal.SIGKILL


def _socket_dir(root: str) -> str | None:
    """A fresh folder under ``root`` we may create sockets in, or None (skip)."""
    if not os.path.isdir(root) or not os.access(root, os.W_OK | os.X_OK):
        return None
    import tempfile

    return tempfile.mkdtemp(prefix="jianmu-sock-", dir=root)


_CONNECT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "try:\n"
    "    s.connect(sys.argv[1]); print('CONNECTED')\n"
    "except OSError as exc:\n"
    "    print('BLOCKED', exc.errno)\n"
)


@pytest.mark.skipif(not bwrap_available(network=False), reason="bubblewrap cannot run here")
@pytest.mark.parametrize("root", ["/var/tmp", "/run", "/dev/shm"])
async def test_network_false_hides_host_unix_sockets(tmp_path: Path, root: str) -> None:
    import shutil
    import socket
    import sys

    folder = _socket_dir(root)
    if folder is None:
        pytest.skip(f"cannot create a socket under {root} here")
    path = os.path.join(folder, "host.sock")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(path)
        server.listen(4)  # a pending connect succeeds without accept(): no thread needed
        argv = [sys.executable, "-c", _CONNECT, path]
        async with LocalSandbox(tmp_path, use_bwrap=True, network=False) as box:
            cut = await box.exec(argv, timeout=30)
        async with LocalSandbox(tmp_path, use_bwrap=True, network=True) as box:
            open_ = await box.exec(argv, timeout=30)
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert cut.stdout.split()[0] == "BLOCKED", cut
    # the minimal root never mounts these folders, network or not
    assert open_.stdout.split()[0] == "BLOCKED", open_


@pytest.mark.skipif(not bwrap_available(network=False), reason="bubblewrap cannot run here")
async def test_network_false_keeps_a_workspace_under_a_hidden_root() -> None:
    import shutil
    import sys
    import tempfile

    if not os.access("/var/tmp", os.W_OK):
        pytest.skip("/var/tmp is not writable here")
    ws = Path(tempfile.mkdtemp(prefix="jianmu-ws-", dir="/var/tmp"))
    try:
        (ws / "seen.txt").write_text("host\n")
        async with LocalSandbox(ws, use_bwrap=True, network=False) as box:
            result = await box.exec(
                [sys.executable, "-c", "import pathlib; p = pathlib.Path('seen.txt'); "
                 "print(p.read_text().strip()); pathlib.Path('made.txt').write_text('box')"],
                timeout=30,
            )
            listing = await box.exec("ls -A /var/tmp /run /dev/shm", timeout=30)
        assert result.exit_code == 0, result
        assert result.stdout.strip() == "host"
        assert (ws / "made.txt").read_text() == "box"
        # only the workspace's own path shows through the private /var/tmp
        assert ws.name in listing.stdout
        assert "jianmu-sock-" not in listing.stdout
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_minimal_root_binds_python_and_path_but_no_secrets(tmp_path: Path) -> None:
    import sys

    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    search = os.pathsep.join([str(venv_bin), "/usr/bin", str(tmp_path / "missing"), "/etc"])
    kept = bwrap_mod.python_paths(search)
    assert str(venv_bin) in kept and "/usr/bin" not in kept and "/etc" not in kept
    assert str(tmp_path / "missing") not in kept
    assert os.path.realpath(sys.base_prefix) in kept or sys.base_prefix.startswith("/usr")
    args = bwrap_mod.minimal_root(search)
    bound = {args[i + 2] for i, a in enumerate(args) if a == "--ro-bind"}
    assert "/etc/passwd" in bound and "/" not in bound
    assert not any(p.startswith(("/etc/shadow", "/etc/ssl/private", "/run", "/var", "/root/."))
                   and p not in kept for p in bound)


async def test_a_sandbox_group_that_cannot_be_made_fails_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if cgroup_support() is None:
        pytest.skip("no control groups here")

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise SandboxError("could not create a control group for the command: no room")

    monkeypatch.setattr(local_mod, "CgroupNest", refuse)
    box = LocalSandbox(tmp_path, use_bwrap=False, network=True)
    with pytest.raises(SandboxError, match="control group"):
        await box.exec("true")  # never without the limits it promises
    monkeypatch.undo()
    async with box:
        assert (await box.exec("echo ok")).stdout == "ok\n"


async def test_local_sandbox_offers_them_only_with_bubblewrap(tmp_path: Path) -> None:
    plain = LocalSandbox(tmp_path, network=True, use_bwrap=False)
    assert plain.read_only_mounts is False
    with pytest.raises(SandboxUnavailableError, match="cannot mount"):
        await plain.exec(["true"], ro_mounts={str(tmp_path): "/skills/x"})
    if local_problem("local-bwrap") is None:
        boxed = LocalSandbox(tmp_path, use_bwrap=True)
        assert boxed.read_only_mounts is bwrap_binds_fds()
