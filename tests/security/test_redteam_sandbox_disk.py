"""Red team: a command fills the host's disk through the sandbox's private ``/tmp``.

A local sandbox's ``/tmp`` (also its commands' ``HOME``) was a folder on the host's disk that
only ``RLIMIT_FSIZE`` bounded, one file at a time: ``fallocate -l 1G`` in a loop filled the disk
the engine saves its runs on within a second (Docker's ``/tmp`` is a tmpfs of ``tmpfs_mb``).
Nor were many small files bounded. As root it is now a tmpfs of ``tmpfs_mb``, with an inode
per 8 KiB. And the folder of a sandbox whose process died (a crash, a sandbox never closed)
stayed on the host for good: the next sandbox sweeps it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from jianmu.execution._process import cgroup_support
from jianmu.execution._scratch import INODES_PER_MB, make_scratch, remove_scratch
from jianmu.execution.docker_sandbox import DockerSandbox
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
from tests.execution._helpers import require_docker

pytestmark = pytest.mark.anyio


def _can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    probe = make_scratch(1, None)
    remove_scratch(probe.path)
    return probe.bounded


_ROOT = pytest.mark.skipif(not _can_mount(), reason="only root with CAP_SYS_ADMIN may mount")
_BWRAP = pytest.mark.skipif(not bwrap_available(network=False), reason="no bubblewrap")
_CGROUPS = pytest.mark.skipif(cgroup_support() is None, reason="no control groups: no warm")
KINDS = [
    pytest.param("cold", id="local-cold", marks=_ROOT),
    pytest.param("warm", id="local-warm", marks=[_ROOT, _CGROUPS]),
    pytest.param("bwrap", id="local-bwrap", marks=[_ROOT, _BWRAP]),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]
TMP_MB = 8


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _box(kind: str, workspace: Path) -> Any:
    workspace.mkdir()
    workspace.chmod(0o777)  # Docker's user writes here too
    if kind == "docker":
        require_docker()
        return DockerSandbox(workspace, timeout=30, tmpfs_mb=TMP_MB)
    bwrap = kind == "bwrap"
    return LocalSandbox(workspace, use_bwrap=bwrap, network=not bwrap, timeout=30,
                        tmpfs_mb=TMP_MB, warm=kind != "cold")


USED = ('echo "$(du -sx --block-size=1 "$TMPDIR" | cut -f1) '
        '$(find "$TMPDIR" -xdev -type f | wc -l)"')
"""What the sandbox's /tmp holds, as its commands see it: bytes, then files."""


@pytest.mark.parametrize("kind", KINDS)
async def test_a_command_cannot_fill_the_disk_through_its_tmp(kind: str, tmp_path: Path) -> None:
    async with _box(kind, tmp_path / "ws") as box:
        fill = await box.exec(
            'for i in 1 2 3 4; do fallocate -l 16M "$TMPDIR/big$i" || '
            'head -c 16777216 /dev/zero > "$TMPDIR/big$i"; done; '
            'head -c 33554432 /dev/zero > "$TMPDIR/stream"; true')
        assert fill.exit_code == 0, fill
        used = await box.exec(USED)
        size = int(used.stdout.split()[0])
        assert size <= (TMP_MB + 1) << 20, f"/tmp holds {size >> 20} MiB past {TMP_MB} MiB"
        if kind != "docker":
            assert box.isolation["tmp"] == "tmpfs"


@pytest.mark.parametrize("kind", KINDS[:3])
async def test_many_small_files_are_bounded_too(kind: str, tmp_path: Path) -> None:
    async with _box(kind, tmp_path / "ws") as box:
        await box.exec('mkdir -p "$TMPDIR/m" && cd "$TMPDIR/m" && '
                       "for i in $(seq 20000); do : > f$i || break; done; true")
        used = await box.exec(USED)
        files = int(used.stdout.split()[1])
        assert files <= TMP_MB * INODES_PER_MB, f"{files} files in an {TMP_MB} MiB /tmp"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _mounted(path: Path) -> bool:
    return any(line.split()[4] == str(path)
               for line in Path("/proc/self/mountinfo").read_text().splitlines())


@_ROOT
async def test_the_tmp_of_a_dead_engine_is_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a temporary folder of this test's own: every engine on the host sweeps the dead ones'
    # under the shared one, and another (an xdist worker) would remove this stale folder
    # between its mkdir and its mount
    root = Path(tempfile.mkdtemp(prefix="jianmu-test-tmp-"))
    root.chmod(0o755)  # the commands' user reaches its HOME in it
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    stale = root / f"jianmu-sandbox-{_dead_pid()}-stale"
    stale.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(stale)],
                       check=True)
        (stale / "left").write_text("what a crashed engine's command left")
        async with _box("cold", tmp_path / "ws") as box:
            await box.exec("true")
            assert not _mounted(stale) and not stale.exists()
            mine = box._tmp
            assert _mounted(mine)  # a live sandbox's own /tmp is left alone
        assert not _mounted(mine) and not mine.exists()
    finally:
        subprocess.run(["umount", "-l", str(stale)], check=False, capture_output=True)
        subprocess.run(["rm", "-rf", str(root)], check=False)
