"""DockerSandbox's warm supervisor: reuse, restart, the host-side deadline, mounts, fallback."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

import jianmu.execution._docker as warm_mod
import jianmu.execution.docker_sandbox as docker_mod
from jianmu.execution.docker_sandbox import DockerSandbox
from tests.execution._helpers import processes_with, require_docker, wait_gone

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    require_docker()
    path = tmp_path / "ws"
    path.mkdir()
    path.chmod(0o777)
    return path


@pytest.fixture
async def box(workspace: Path) -> AsyncIterator[DockerSandbox]:
    async with DockerSandbox(workspace, pids=48, memory_mb=96, timeout=30) as sandbox:
        assert (await sandbox.exec("true")).ok  # the supervisor runs from here on
        assert sandbox.warm_problem is None and sandbox.supervisor_starts == 1
        yield sandbox


def _kill_supervisor(box: DockerSandbox) -> None:
    """SIGKILL the supervisor from outside (an exec as the commands' user)."""
    sup = box._warm.supervisor
    assert sup is not None and sup.pid is not None
    container = box._connect().containers.get(box.container_id)
    done = container.exec_run(["sh", "-c", f"kill -9 {sup.pid}"], user=box.user)  # builtin
    assert done.exit_code == 0, done


def _tag() -> str:
    return f"{uuid.uuid4().int % 10**6}"


async def test_calls_share_one_supervisor(box: DockerSandbox) -> None:
    sup = box._warm.supervisor
    first = await box.exec("echo one")
    second = await box.exec(["sh", "-c", "echo two >&2; exit 4"])
    assert (first.stdout, second.stderr, second.exit_code) == ("one\n", "two\n", 4)
    assert box._warm.supervisor is sup and box.supervisor_starts == 1


async def test_missing_command_reads_like_a_shell(box: DockerSandbox) -> None:
    result = await box.exec(["no-such-command-here"])
    assert result.exit_code == 127 and "No such file" in result.stderr


async def test_a_killed_supervisor_is_restarted(box: DockerSandbox) -> None:
    sup = box._warm.supervisor
    assert sup is not None
    _kill_supervisor(box)
    with anyio.fail_after(10):
        while sup.alive:
            await anyio.sleep(0.01)
    assert (await box.exec("echo after")).stdout == "after\n"
    assert box.supervisor_starts == 2


async def test_supervisor_dying_mid_command_reports_it_and_leaves_nothing(
    box: DockerSandbox,
) -> None:
    tag = _tag()
    results = []

    async def call() -> None:
        results.append(await box.exec(f"(setsid sleep 4001.{tag} &); sleep 4000.{tag}"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(10):
            while len(processes_with(f".{tag}")) < 2:
                await anyio.sleep(0.01)
        _kill_supervisor(box)
    assert results[0].exit_code != 0 and "supervisor died" in results[0].stderr
    assert await wait_gone(f".{tag}")
    assert (await box.exec("echo next")).stdout == "next\n"


async def test_host_deadline_steps_in_when_the_supervisor_is_stopped(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docker_mod, "_GRACE", 0.5)
    tag = _tag()
    async with DockerSandbox(workspace) as box:
        # the command stops its supervisor: nothing inside can end the call any more
        result = await box.exec(f"kill -STOP $PPID; sleep 5000.{tag}", timeout=1)
        assert result.timed_out and "timeout" in result.stderr, result
        assert await wait_gone(f"5000.{tag}")
        after = await box.exec("echo after")
        assert after.stdout == "after\n" and box.supervisor_starts == 2, (after, box.warm_problem)


async def test_cancel_kills_before_the_next_command_starts(box: DockerSandbox) -> None:
    tag = _tag()
    with anyio.move_on_after(0.5) as scope:
        await box.exec(f"sleep 6000.{tag} & sleep 6001.{tag}", timeout=60)
    assert scope.cancelled_caught
    # the next command waits for the cancelled one's sweep, which cannot reach it
    assert (await box.exec("sleep 0.2; echo next")).stdout == "next\n"
    assert await wait_gone(f".{tag}")
    assert box.supervisor_starts == 1


async def test_read_only_mounts_are_copied_once(box: DockerSandbox, tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "run.sh").write_text("echo from skill\n")
    mounts = {str(skill): "/skills/demo"}
    first = await box.exec("sh /skills/demo/run.sh", ro_mounts=mounts)
    unpacked = box._warm._unpacked
    again = await box.exec("sh /skills/demo/run.sh; touch /skills/demo/x || echo refused",
                           ro_mounts=mounts)
    assert first.stdout == "from skill\n" and again.stdout == "from skill\nrefused\n"
    assert unpacked is not None and box._warm._unpacked is unpacked
    (skill / "run.sh").write_text("echo changed\n")
    assert (await box.exec("sh /skills/demo/run.sh", ro_mounts=mounts)).stdout == "changed\n"
    assert box.supervisor_starts == 1


async def test_no_python_in_the_image_falls_back_to_cold_and_says_so(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(warm_mod, "_PYTHON", "/no/python3")
    with caplog.at_level("WARNING", logger="jianmu.execution.docker_sandbox"):
        async with DockerSandbox(workspace) as box:
            assert (await box.exec("echo cold")).stdout == "cold\n"
            assert (await box.exec("echo again")).stdout == "again\n"
            assert "did not start" in (box.warm_problem or "")
    assert "starts cold" in caplog.text and box.supervisor_starts == 0


async def test_warm_false_starts_every_command_cold(workspace: Path) -> None:
    async with DockerSandbox(workspace, warm=False) as box:
        assert (await box.exec("echo cold")).stdout == "cold\n"
        assert box.warm_problem == "warm=False" and box.supervisor_starts == 0




async def test_a_start_lost_once_is_tried_again_before_going_cold(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a busy daemon can lose one `docker exec` of the supervisor: that alone made every later
    # command of the sandbox start cold for its whole life
    real, lost = warm_mod.Supervisor, []

    def once_lost(channel: object, name: str) -> object:
        if not lost:
            lost.append(name)
            channel.close()  # type: ignore[attr-defined]
            raise warm_mod.SandboxError("the warm supervisor did not start")
        return real(channel, name)  # type: ignore[arg-type]

    monkeypatch.setattr(warm_mod, "Supervisor", once_lost)
    async with DockerSandbox(workspace) as box:
        assert (await box.exec("echo warm")).stdout == "warm\n"
        assert lost and box.warm_problem is None and box.supervisor_starts == 1
