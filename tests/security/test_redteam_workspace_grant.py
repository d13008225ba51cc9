"""The workspace grant (root only) never reaches outside the workspace, whatever races it.

As root, a sandbox's start grants its unprivileged user the workspace with ACLs, walking the
whole tree. Code of another run on the same workspace (another agent, another `mcp serve`
client) may be running meanwhile and swap a folder of the workspace for a symlink to a
folder outside: the walk must never grant the sandbox user anything there (``/etc``, say).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jianmu.execution.local_sandbox import LocalSandbox
from tests.execution._helpers import local_problem
from tests.support.swapper import Swapper

pytestmark = pytest.mark.anyio

ROUNDS = 60
ACL = "system.posix_acl_access"


def _acl(path: Path) -> bytes | None:
    try:
        return os.getxattr(path, ACL, follow_symlinks=False)
    except OSError:
        return None


@pytest.fixture
def racing(tmp_path: Path) -> Iterator[tuple[Path, Path, Swapper]]:
    """(workspace, outside, swapper) with the swapper running until ``stop`` exists."""
    if os.geteuid() != 0:
        pytest.skip("the workspace is granted with ACLs only when Jianmu runs as root")
    problem = local_problem("local-bwrap")
    if problem is not None:
        pytest.skip(problem)
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir(mode=0o700)
    for i in range(20):
        (outside / f"secret{i}").write_text("root only")
        (outside / f"secret{i}").chmod(0o600)
    (ws / "A").mkdir()
    (ws / "A" / "inside.txt").write_text("inside\n")
    (ws / "A.lnk").symlink_to(outside, target_is_directory=True)
    with Swapper(ws / "A", ws / "A.lnk", tmp_path / "stop") as swapper:
        yield ws, outside, swapper


async def test_a_folder_swapped_for_a_link_during_the_grant_grants_nothing_outside(
    racing: tuple[Path, Path, Swapper],
) -> None:
    ws, outside, swapper = racing
    before = {p: _acl(p) for p in [outside, *outside.iterdir()]}
    assert not any(before.values())
    for _ in range(ROUNDS):
        box = LocalSandbox(ws)
        await box.start()  # grants the workspace to the sandbox's user
        await box.close()
        after = {p: _acl(p) for p in before}
        assert after == before, "the grant reached a folder outside the workspace"
    swapper.stop()  # A is the folder again
    async with LocalSandbox(ws):
        pass
    assert _acl(ws / "A" / "inside.txt") is not None  # the grant does work inside


@pytest.mark.parametrize("protected", [False, True], ids=["links-unprotected", "protected"])
def test_a_hard_link_to_a_file_outside_is_not_granted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protected: bool
) -> None:
    """Where ``fs.protected_hardlinks`` is off, a command may hard-link any file it can see
    into the workspace (``/etc/shadow``); the next sandbox's grant, walking the workspace as
    root, then gave the commands' user that file outside."""
    if os.geteuid() != 0:
        pytest.skip("the workspace is granted with ACLs only when Jianmu runs as root")
    from jianmu.execution import _process

    monkeypatch.setattr(_process, "hardlinks_protected", lambda: protected)
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir(mode=0o700)
    (outside / "shadow").write_text("root only")
    (outside / "shadow").chmod(0o600)
    os.link(outside / "shadow", ws / "shadow")
    (ws / "own.txt").write_text("the workspace's")
    _process.grant_tree(ws, 65534)
    assert _acl(ws / "own.txt") is not None  # an ordinary file is granted
    if protected:  # only files a user could read and write were linkable: granted as before
        assert _acl(outside / "shadow") is not None
    else:
        assert _acl(outside / "shadow") is None
