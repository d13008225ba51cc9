"""Read-only mounts, the optional sandbox capability: who offers it, and what it checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.errors import SandboxUnavailableError
from jianmu.execution import (
    ExecCall,
    ExecResult,
    FakeSandbox,
    LocalSandbox,
    MountingSandbox,
    Sandbox,
    can_mount_read_only,
)
from jianmu.execution._bwrap import bwrap_binds_fds
from tests.execution._helpers import local_problem

pytestmark = pytest.mark.anyio


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


async def test_local_sandbox_offers_them_only_with_bubblewrap(tmp_path: Path) -> None:
    plain = LocalSandbox(tmp_path, network=True, use_bwrap=False)
    assert plain.read_only_mounts is False
    with pytest.raises(SandboxUnavailableError, match="cannot mount"):
        await plain.exec(["true"], ro_mounts={str(tmp_path): "/skills/x"})
    if local_problem("local-bwrap") is None:
        boxed = LocalSandbox(tmp_path, use_bwrap=True)
        assert boxed.read_only_mounts is bwrap_binds_fds()
