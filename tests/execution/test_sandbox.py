"""The `Sandbox` contract: `BaseSandbox` checks every call before a sandbox's `run` sees it,
`FakeSandbox` records them, read-only mounts are an optional capability, and the contract
holds for LocalSandbox (with and without bubblewrap) and Docker."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import SandboxUnavailableError
from jianmu.execution import (
    BaseSandbox,
    ExecCall,
    ExecResult,
    FakeSandbox,
    LocalSandbox,
    MountingSandbox,
    Sandbox,
    can_mount_read_only,
)
from jianmu.execution.sandbox import LoopLock
from tests.execution._helpers import MEMORY_MB, OUTPUT_LIMIT, PIDS, processes_with

pytestmark = pytest.mark.anyio


class _EchoSandbox(BaseSandbox):
    """Runs nothing: answers with the checked call it was handed."""

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace)
        self.seen: list[ExecCall] = []

    async def run(self, call: ExecCall) -> ExecResult:
        self.seen.append(call)
        return ExecResult(exit_code=0, stdout=" ".join(call.argv))


async def test_a_subclass_is_a_sandbox_that_gets_checked_calls(tmp_path: Path) -> None:
    async with _EchoSandbox(tmp_path) as box:
        assert isinstance(box, Sandbox) and box.workspace == tmp_path
        result = await box.exec("echo hi", stdin="in", env={"K": "v"}, cwd="sub/")
    assert result.stdout == "/bin/sh -c echo hi"
    assert box.seen == [ExecCall(argv=["/bin/sh", "-c", "echo hi"], stdin=b"in",
                                 env={"K": "v"}, cwd="sub")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"command": []}, "empty list"),
        ({"command": " "}, "empty string"),
        ({"command": ["ls", 1]}, "must be a string"),
        ({"command": "ls", "cwd": "../up"}, "without '..'"),
        ({"command": "ls", "cwd": "/abs"}, "relative to the workspace"),
    ],
)
async def test_bad_calls_never_reach_run(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    box = _EchoSandbox(tmp_path)
    with pytest.raises(ValueError, match=message):
        await box.exec(**kwargs)
    assert box.seen == []


def test_timeout_or_applies_the_default_and_refuses_non_positive() -> None:
    assert ExecCall(argv=["ls"]).timeout_or(7) == 7
    assert ExecCall(argv=["ls"], timeout=2).timeout_or(7) == 2
    with pytest.raises(ValueError, match="timeout must be positive, got 0"):
        ExecCall(argv=["ls"], timeout=0).timeout_or(7)


def test_check_positive_names_the_limit() -> None:
    BaseSandbox.check_positive(memory_mb=None, cpus=0.5)
    with pytest.raises(ValueError, match="pids must be positive, got -1"):
        BaseSandbox.check_positive(memory_mb=1, pids=-1)


async def test_sync_and_async_handlers(tmp_path: Path) -> None:
    def sync_handler(call: ExecCall) -> ExecResult:
        return ExecResult(exit_code=len(call.argv), stdout=call.cwd)

    async def async_handler(call: ExecCall) -> ExecResult:
        return ExecResult(exit_code=0, stdout=(call.stdin or b"").decode())

    box = FakeSandbox(sync_handler, workspace=tmp_path)
    assert isinstance(box, Sandbox) and box.workspace == tmp_path
    result = await box.exec(["a", "b"], cwd="sub", env={"K": "v"}, timeout=3)
    assert (result.exit_code, result.stdout) == (2, "sub")
    assert box.calls == [ExecCall(argv=["a", "b"], env={"K": "v"}, cwd="sub", timeout=3)]
    echo = FakeSandbox(async_handler)
    assert (await echo.exec("cat", stdin="in")).stdout == "in"
    assert echo.calls[0].argv == ["/bin/sh", "-c", "cat"]


async def test_checks_its_input_like_a_real_sandbox() -> None:
    box = FakeSandbox(lambda call: ExecResult(exit_code=0))
    with pytest.raises(ValueError, match="empty list"):
        await box.exec([])
    with pytest.raises(ValueError, match="relative to the workspace"):
        await box.exec("pwd", cwd="/abs")
    assert box.calls == []


async def test_fake_sandbox_records_the_mounts(tmp_path: Path) -> None:
    box = FakeSandbox(lambda call: ExecResult(exit_code=0))
    assert can_mount_read_only(box) and isinstance(box, MountingSandbox)
    await box.exec(["ls"], ro_mounts={tmp_path / "a" / ".": "/skills/a", "/srv/b": "/skills/b"})
    assert box.calls == [ExecCall(
        argv=["ls"], ro_mounts={str(tmp_path / "a"): "/skills/a", "/srv/b": "/skills/b"}
    )]
    with pytest.raises(ValueError, match="given twice"):
        await box.exec(["ls"], ro_mounts={"/srv/a": "/skills/a", "/srv/b": "/skills/a"})


async def test_a_fake_sandbox_can_play_one_without_them() -> None:
    box = FakeSandbox(lambda call: ExecResult(exit_code=0), read_only_mounts=False)
    assert not can_mount_read_only(box) and isinstance(box, Sandbox)
    with pytest.raises(SandboxUnavailableError, match="FakeSandbox cannot mount"):
        await box.exec(["ls"], ro_mounts={"/srv/a": "/skills/a"})
    await box.exec(["ls"])  # plain commands still run
    assert len(box.calls) == 1


def test_a_protocol_only_sandbox_does_not_offer_them() -> None:
    class Minimal:
        workspace = Path()

    assert not can_mount_read_only(Minimal())
    assert not can_mount_read_only(object())


async def test_is_a_sandbox(sandbox: Any) -> None:
    assert isinstance(sandbox, Sandbox)


async def test_output_and_exit_code(sandbox: Any) -> None:
    result = await sandbox.exec("echo out; echo err >&2; exit 3")
    assert isinstance(result, ExecResult)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok and not result.timed_out and not result.truncated
    ok = await sandbox.exec(["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "c"])
    assert ok.ok and ok.stdout == "['a b', 'c']\n"


async def test_stdin_and_env(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JIANMU_TEST_SECRET", "hunter2")
    result = await sandbox.exec(
        'cat; echo "[$GREETING]"; echo "[${JIANMU_TEST_SECRET:-}]"',
        stdin="from stdin\n", env={"GREETING": "hi"},
    )
    # The host's environment (API keys and the like) does not leak in.
    assert result.stdout == "from stdin\n[hi]\n[]\n"


async def test_a_command_may_open_its_own_stdin_stdout_and_stderr(sandbox: Any) -> None:
    # as root, the pipes were root's and the command's user could not reopen them
    result = await sandbox.exec(
        "cat /dev/stdin; echo out > /dev/stdout; echo err | tee /dev/stderr", stdin="fed\n"
    )
    assert (result.exit_code, result.stdout, result.stderr) == (0, "fed\nout\nerr\n", "err\n")


async def test_large_stdin_and_output_together(sandbox: Any) -> None:
    # `cat` writes while it still reads: neither side may block on a full pipe.
    data = "z" * (1024 * 1024)
    result = await sandbox.exec("cat | wc -c", stdin=data)
    assert result.ok and result.stdout.strip() == str(len(data))
    echoed = await sandbox.exec(["cat"], stdin=data)
    assert echoed.ok and echoed.truncated
    assert echoed.stdout.startswith("z" * OUTPUT_LIMIT + "\n")
    assert f"{len(data) - OUTPUT_LIMIT} more bytes" in echoed.stdout


async def test_private_home_and_tmp(sandbox: Any) -> None:
    result = await sandbox.exec(
        'echo data > "$HOME/h.txt" && cat "$HOME/h.txt" && test "$TMPDIR" = "$HOME" && echo ok'
    )
    assert result.stdout == "data\nok\n", result.stderr


async def test_timeout_kills_the_whole_process_group(sandbox: Any, marker: str) -> None:
    # Unique sleep durations let us find these processes in the host's process table.
    digits = _digits(marker)
    result = await sandbox.exec(f"sleep 1000.{digits}1 & sleep 1000.{digits}2; echo x", timeout=1)
    assert result.timed_out and not result.ok
    assert result.stdout == ""
    assert "timeout" in result.stderr
    assert processes_with(f"1000.{digits}") == []
    after = await sandbox.exec("echo next call works")
    assert after.ok and after.stdout == "next call works\n"


async def test_background_leftovers_are_killed_when_the_command_returns(
    sandbox: Any, marker: str
) -> None:
    result = await sandbox.exec(f"(setsid sleep 1000.{_digits(marker)} &) ; echo started")
    assert result.ok and result.stdout == "started\n"
    assert processes_with(f"1000.{_digits(marker)}") == []


async def test_memory_limit_kills_and_says_so(sandbox: Any) -> None:
    code = f"x = b'x' * ({MEMORY_MB * 4} * 1024 * 1024); print('alive')"
    result = await sandbox.exec(["python3", "-c", code])
    assert result.oom_killed, result
    assert "alive" not in result.stdout and not result.ok
    assert "memory limit" in result.stderr
    assert (await sandbox.exec("echo fine")).stdout == "fine\n"


_FORK_LOOP = """
import os, time
made = failed = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    made += 1
print(made, failed)
"""


async def test_fork_bomb_is_contained(sandbox: Any, marker: str) -> None:
    # A bounded fork loop first: proves the limit binds before the real bomb runs.
    bounded = await sandbox.exec(["python3", "-c", _FORK_LOOP], timeout=20)
    made, failed = map(int, bounded.stdout.split())
    assert made < PIDS and failed > 0
    # The real thing, named so that we can look for survivors afterwards.
    bomb = f"{marker}() {{ {marker} | {marker} & }}; {marker}; sleep 2"
    result = await sandbox.exec(bomb, timeout=4)
    assert "fork" in result.stderr.lower() or result.timed_out  # the limit was hit
    assert processes_with(marker) == []
    assert (await sandbox.exec("echo survived")).stdout == "survived\n"


async def test_network_false_blocks_connections(sandbox: Any, listener: int) -> None:
    probe = [
        "python3", "-c",
        "import socket,sys\n"
        "try:\n socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)\n"
        "except OSError as e:\n print('blocked', type(e).__name__)\n"
        "else:\n print('connected')",
        str(listener),
    ]
    if getattr(sandbox, "kind", "") == "local":
        # Without bubblewrap the network stays; asking to cut it is refused, never faked.
        with pytest.raises(SandboxUnavailableError, match="bubblewrap"):
            LocalSandbox(sandbox.workspace, use_bwrap=False, network=False)
        assert (await sandbox.exec(probe)).stdout == "connected\n"
        return
    result = await sandbox.exec(probe)
    assert result.stdout.startswith("blocked"), result
    interfaces = await sandbox.exec("cat /proc/net/dev")
    names = {line.split(":")[0].strip() for line in interfaces.stdout.splitlines()[2:]}
    assert names == {"lo"}


async def test_system_files_are_read_only(sandbox: Any, marker: str) -> None:
    if getattr(sandbox, "kind", "") == "local" and os.geteuid() == 0:
        pytest.skip("without bubblewrap a root child process can write system files")
    result = await sandbox.exec(f"echo x > /etc/{marker} || echo refused; echo y > /usr/{marker}")
    assert "refused" in result.stdout and result.exit_code != 0
    assert not Path(f"/etc/{marker}").exists() and not Path(f"/usr/{marker}").exists()


async def test_workspace_is_shared_with_the_host(sandbox: Any, marker: str) -> None:
    host_side = sandbox.workspace / f"{marker}-in.txt"
    host_side.write_text("from host\n")
    host_side.chmod(0o644)
    result = await sandbox.exec(
        f"cat {marker}-in.txt && mkdir -p {marker} && echo from sandbox > {marker}/out.txt"
    )
    assert result.stdout == "from host\n", result.stderr
    assert (sandbox.workspace / marker / "out.txt").read_text() == "from sandbox\n"
    inside = await sandbox.exec("pwd", cwd=marker)
    assert inside.stdout.strip().endswith(f"/{marker}")


async def test_output_past_the_limit_is_cut_with_a_note(sandbox: Any) -> None:
    result = await sandbox.exec(["python3", "-c", f"print('y' * {OUTPUT_LIMIT * 3})"])
    assert result.ok and result.truncated
    assert result.stdout.startswith("y" * 100)
    assert f"{OUTPUT_LIMIT * 3 + 1 - OUTPUT_LIMIT} more bytes" in result.stdout


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"command": ""}, "empty string"),
        ({"command": []}, "empty list"),
        ({"command": ["echo", 3]}, "must be a string"),
        ({"command": "pwd", "cwd": "/etc"}, "relative to the workspace"),
        ({"command": "pwd", "cwd": "../up"}, "relative to the workspace"),
        ({"command": "pwd", "timeout": 0}, "timeout must be positive"),
    ],
)
async def test_bad_input_is_refused(sandbox: Any, kwargs: dict[str, Any], message: str) -> None:
    kwargs = dict(kwargs)  # the parameter dict is shared between sandboxes
    command = kwargs.pop("command")
    with pytest.raises(ValueError, match=message):
        await sandbox.exec(command, **kwargs)


def _digits(marker: str) -> str:
    """Only digits survive in a sleep duration."""
    return "".join(str(int(c, 16) % 10) for c in marker[2:8])


def test_a_loop_lock_serves_each_event_loop_that_takes_it() -> None:
    lock, order = LoopLock(), []

    async def hold(tag: str) -> None:
        async with lock:
            order.append(tag)
            await asyncio.sleep(0.01)

    async def contend() -> None:  # a waiter: a plain asyncio.Lock would now belong to this loop
        await asyncio.gather(hold("a"), hold("b"))

    asyncio.run(contend())
    asyncio.run(contend())  # a sandbox kept between runs, each run_sync on a new loop
    assert order == ["a", "b", "a", "b"] and not lock.locked()
