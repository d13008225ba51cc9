"""DockerSandbox beyond the shared contract: container settings, clean-up, recovery, errors."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import jianmu.execution.docker_sandbox as docker_mod
from jianmu.errors import MissingExtraError, SandboxUnavailableError
from jianmu.execution.docker_sandbox import DEFAULT_IMAGE, DockerSandbox
from tests.execution._helpers import require_docker, unique_tag, wait_gone

pytestmark = pytest.mark.anyio


@pytest.fixture
def docker_client() -> Any:
    require_docker()
    import docker

    client = docker.from_env(timeout=30)
    yield client
    client.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    path.chmod(0o777)
    return path


def test_missing_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'jianmu\[docker\]'"):
        DockerSandbox(tmp_path)


async def test_stopped_daemon_says_how_to_start_it(tmp_path: Path) -> None:
    pytest.importorskip("docker")
    box = DockerSandbox(tmp_path, base_url=f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(SandboxUnavailableError, match="dockerd"):
        await box.start()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"memory_mb": 0}, "memory_mb must be positive"),
        ({"pids": -1}, "pids must be positive"),
        ({"cpus": 0}, "cpus must be positive"),
        ({"image": ""}, "image must be a non-empty"),
    ],
)
def test_bad_options_are_refused(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    pytest.importorskip("docker")
    with pytest.raises(ValueError, match=message):
        DockerSandbox(tmp_path, **kwargs)


@pytest.mark.docker
async def test_missing_image_names_the_build_command(docker_client: Any, workspace: Path) -> None:
    box = DockerSandbox(workspace, image="jianmu-sandbox:does-not-exist")
    with pytest.raises(SandboxUnavailableError, match="make sandbox-image"):
        await box.start()


@pytest.mark.docker
async def test_container_is_locked_down_and_removed_on_close(
    docker_client: Any, workspace: Path
) -> None:
    box = DockerSandbox(workspace, memory_mb=128, cpus=0.5, pids=64)
    await box.start()
    container_id = box.container_id
    try:
        attrs = docker_client.containers.get(container_id).attrs
        host = attrs["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["Memory"] == host["MemorySwap"] == 128 * 1024 * 1024
        assert host["NanoCpus"] == 500_000_000 and host["PidsLimit"] == 64
        assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"]
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert "/tmp" in host["Tmpfs"]
        assert f"{workspace}:/workspace:rw" in host["Binds"]
        expected_user = "65534:65534" if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}"
        assert box.user == expected_user  # the commands' user; the container's own: keeper
        assert attrs["Config"]["User"] == box.keeper != expected_user
        labels = attrs["Config"]["Labels"]
        assert labels["jianmu.sandbox"] == "1" and labels["jianmu.owner_pid"] == str(os.getpid())
        result = await box.exec("id -u; cat /proc/self/status | grep CapEff")
        assert result.stdout.split()[0] != "0" or os.geteuid() != 0
        assert "0000000000000000" in result.stdout
    finally:
        await box.close()
    import docker

    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(container_id)
    await box.close()  # idempotent


@pytest.mark.docker
async def test_network_true_gets_the_bridge(docker_client: Any, workspace: Path) -> None:
    async with DockerSandbox(workspace, network=True) as box:
        attrs = docker_client.containers.get(box.container_id).attrs
        assert attrs["HostConfig"]["NetworkMode"] == "bridge"


@pytest.mark.docker
async def test_stale_containers_of_dead_owners_are_removed(
    docker_client: Any, workspace: Path
) -> None:
    stale = docker_client.containers.create(
        DEFAULT_IMAGE, ["sleep", "infinity"],
        labels={"jianmu.sandbox": "1", "jianmu.owner_pid": "999999999",
                "jianmu.owner_host": socket.gethostname()},
    )
    try:
        async with DockerSandbox(workspace):
            import docker

            with pytest.raises(docker.errors.NotFound):
                docker_client.containers.get(stale.id)
    finally:
        import docker

        try:
            stale.remove(force=True)
        except docker.errors.NotFound:
            pass


@pytest.mark.docker
async def test_dead_container_is_replaced(docker_client: Any, workspace: Path) -> None:
    async with DockerSandbox(workspace) as box:
        first = box.container_id
        docker_client.containers.get(first).remove(force=True)
        result = await box.exec("echo back")
        assert result.stdout == "back\n"
        assert box.container_id not in (None, first)


@pytest.mark.docker
async def test_cancelling_exec_kills_the_command(docker_client: Any, workspace: Path) -> None:
    tag = unique_tag()
    async with DockerSandbox(workspace) as box:
        with anyio.move_on_after(1) as scope:
            await box.exec(f"sleep 1000.{tag}1 & sleep 1000.{tag}2", timeout=60)
        assert scope.cancelled_caught
        assert await wait_gone(f"1000.{tag}")
        assert (await box.exec("echo after")).stdout == "after\n"


@pytest.mark.docker
async def test_host_side_deadline_backs_up_the_container_timeout(
    docker_client: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Drop the in-container `timeout`, so that only the host-side deadline can stop it.
    monkeypatch.setattr(docker_mod, "_WRAPPER", '"$@"')
    monkeypatch.setattr(docker_mod, "_GRACE", 0.5)
    async with DockerSandbox(workspace, warm=False) as box:  # the cold path's wrapper
        tag = unique_tag()
        result = await box.exec(f"sleep 1000.{tag}", timeout=0.5)
        assert result.timed_out and "timeout" in result.stderr
        assert await wait_gone(f"1000.{tag}")
        assert (await box.exec("echo after")).stdout == "after\n"


@pytest.mark.docker
async def test_root_grants_the_workspace_without_opening_it(
    docker_client: Any, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("as a user, commands run as you")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    (locked / "old.txt").write_text("old\n")
    async with DockerSandbox(locked, user="65534:65534") as box:
        result = await box.exec("cat old.txt && echo more >> old.txt && echo new > new.txt")
    assert result.ok, result
    assert (locked / "new.txt").read_text() == "new\n"
    assert (locked / "old.txt").read_text() == "old\nmore\n"
    assert locked.stat().st_mode & 0o007 == 0  # not opened to everyone (group bits: the mask)


async def test_unwritable_workspace_is_refused_for_a_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o755)
    box = DockerSandbox(locked, user="65534:65534")
    with pytest.raises(SandboxUnavailableError, match="cannot write to the workspace"):
        box._grant_workspace()


def test_require_docker_turns_skips_into_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.execution._helpers import skip_or_fail

    monkeypatch.setenv("JIANMU_REQUIRE_DOCKER", "1")
    with pytest.raises(pytest.fail.Exception, match="JIANMU_REQUIRE_DOCKER=1 but no daemon"):
        skip_or_fail("no daemon")
    monkeypatch.delenv("JIANMU_REQUIRE_DOCKER")
    with pytest.raises(pytest.skip.Exception, match="no daemon"):
        skip_or_fail("no daemon")


@pytest.mark.docker
@pytest.mark.parametrize("warm", [True, False])
async def test_a_command_leaves_no_docker_socket_open(
    docker_client: Any, workspace: Path, warm: bool
) -> None:
    """Each exec's attached socket is closed, not left to the collector (an unclosed socket's
    ResourceWarning then lands in whatever runs next)."""
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with DockerSandbox(workspace, warm=warm) as box:
            assert (await box.exec("echo one")).stdout == "one\n"
            assert (await box.exec("echo two")).stdout == "two\n"
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert not [w for w in unclosed if "docker.sock" in w], unclosed
