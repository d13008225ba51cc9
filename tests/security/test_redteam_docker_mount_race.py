"""Red team: a read-only path swapped for a link while a Docker sandbox's container starts.

Docker binds a folder by path, and follows a link in it. The sandbox checks that each of the
workspace's read-only paths (``.git``, ``.vscode``...) is a real folder before it starts the
container, and mounts them by path: code of another sandbox on the same workspace (a sibling
agent's ``bash``, another run) that swaps ``.vscode`` for a link to a host folder between the
check and the mount had that host folder shown inside the container, read with the commands'
uid (as root: the workspace owner's, who may read their whole home). Each mount is now checked
once the container runs: what it shows must be the folder that was checked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import SandboxError
from jianmu.execution._mount_check import mount_problem
from jianmu.execution.docker_sandbox import DockerSandbox
from tests.execution._helpers import require_docker

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_read_only_path_swapped_for_a_link_at_the_start_shows_no_host_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_docker()
    secret = tmp_path / "home"
    secret.mkdir()
    (secret / "id_rsa").write_text("TOPSECRET")
    secret.chmod(0o755)
    (secret / "id_rsa").chmod(0o644)
    ws = tmp_path / "ws"
    (ws / ".vscode").mkdir(parents=True)
    ws.chmod(0o777)
    box = DockerSandbox(ws, timeout=30)
    from docker.models.containers import ContainerCollection

    run = ContainerCollection.run

    def swapped_then_run(self: ContainerCollection, *args: Any, **kwargs: Any) -> Any:
        # what a racing command does between the check and the mount
        (ws / ".vscode").rename(ws / "checked")
        (ws / ".vscode").symlink_to(secret)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(ContainerCollection, "run", swapped_then_run)
    try:
        with pytest.raises(SandboxError, match=r"\.vscode is not a mount point") as refused:
            await box.exec("cat /workspace/.vscode/id_rsa")
        assert "TOPSECRET" not in str(refused.value)
        assert box._container is None  # the container that showed it is gone
        mine = box._connect().api.containers(
            all=True, filters={"label": f"jianmu.owner_pid={os.getpid()}"})
        assert mine == []
    finally:
        await box.close()


async def test_unchanged_read_only_paths_still_start(tmp_path: Path) -> None:
    require_docker()
    ws = tmp_path / "ws"
    (ws / ".vscode").mkdir(parents=True)
    (ws / ".git").mkdir()
    ws.chmod(0o777)
    async with DockerSandbox(ws, timeout=30) as box:
        result = await box.exec("touch .vscode/x; ls -a .git")
    assert "Read-only file system" in result.stderr, result
    assert not os.path.exists(ws / ".vscode" / "x")


_TABLE = (
    "901 900 254:0 /srv/ws /workspace rw,relatime - ext4 /dev/vda rw\n"
    "902 901 254:0 /srv/ws/.git /workspace/.git ro,relatime - ext4 /dev/vda rw\n"
    "903 901 254:0 /home/me /workspace/my\\040tools ro,relatime - ext4 /dev/vda rw\n"
)


def test_a_target_holding_another_folder_is_refused() -> None:
    """The source swapped, the target not: the mount point is there but holds the host
    folder the link led to (found by its identity)."""
    expected = {"/workspace/.git": (64768, 11), "/workspace/my tools": (64768, 12)}
    ws, probe = (64768, 2), "\n@@jianmu-stat@@\n64768 2\n"
    assert mount_problem(_TABLE + probe + "64768 11\n64768 12\n", expected, ws) is None
    assert mount_problem(_TABLE + probe + "64768 11\n64768 99\n", expected, ws) == (
        "/workspace/my tools does not hold the folder that was checked")
    assert mount_problem(_TABLE + probe + "- -\n64768 12\n", expected, ws) == (
        "/workspace/.git does not hold the folder that was checked")
    assert mount_problem(_TABLE, expected, ws) == "the container's mount table could not be read"


def test_where_docker_numbers_files_anew_only_the_mount_points_are_checked() -> None:
    """Docker on another machine (a file-sharing layer): the workspace's own identity differs,
    so none can be compared, but a target that is no mount point is still refused."""
    expected = {"/workspace/.git": (64768, 11), "/workspace/my tools": (64768, 12)}
    shared = "\n@@jianmu-stat@@\n41 2\n41 11\n41 12\n"
    assert mount_problem(_TABLE + shared, expected, (64768, 2)) is None
    assert mount_problem(_TABLE + shared, {**expected, "/workspace/.vscode": (64768, 13)},
                         (64768, 2)) == "/workspace/.vscode is not a mount point in the container"
