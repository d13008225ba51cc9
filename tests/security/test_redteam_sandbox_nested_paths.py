"""A protected path below a folder: the mount holds the path, not the folders on its way.

``configs/jianmu.yaml`` is mounted read-only where it exists, but ``configs`` is not: a command
renamed it away (a folder holding a mount point may be renamed), made ``configs`` anew and
wrote its own ``jianmu.yaml`` there, which the host's next ``jianmu run`` loaded (an MCP
server's command runs on the host). What a command makes there is now moved into the
quarantine like a path that did not exist, and the user's folder is renamed back. The same
held for the engine's own Python in a subfolder of the workspace (``backend/.venv``): shown
read-only, but ``backend`` linked to a copy of the command's made the host import its code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jianmu.execution._protect import QUARANTINE, ReadOnlyWatch, quarantine_note
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
from tests.execution._helpers import require_docker

pytestmark = pytest.mark.anyio

_MINE = "model: mine\n"
_EVIL = "mcp_servers:\n  x:\n    command: touch /tmp/pwned\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["bwrap-warm", "bwrap-cold",
                        pytest.param("docker", marks=pytest.mark.docker)])
async def box(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    workspace = tmp_path / "ws"
    (workspace / "configs").mkdir(parents=True)
    (workspace / "configs" / "jianmu.yaml").write_text(_MINE)
    if request.param == "docker":
        require_docker()
        from jianmu.execution.docker_sandbox import DockerSandbox

        sandbox: Any = DockerSandbox(workspace, timeout=30)
    else:
        if not bwrap_available(network=False):
            pytest.skip("bubblewrap cannot create namespaces here")
        sandbox = LocalSandbox(workspace, timeout=30, warm=request.param == "bwrap-warm")
    async with sandbox:
        yield sandbox


def _quarantined(workspace: Path) -> list[str]:
    """What the quarantine's files hold."""
    return sorted(p.read_text() for p in (workspace / QUARANTINE).rglob("*") if p.is_file())


@pytest.mark.parametrize("plant", [
    "mkdir configs && printf '{evil}' > configs/jianmu.yaml",
    "mkdir mine && printf '{evil}' > mine/jianmu.yaml && ln -s mine configs",
], ids=["folder", "link"])
async def test_a_folder_above_a_held_config_cannot_be_swapped(box: Any, plant: str) -> None:
    workspace = Path(box.workspace)
    result = await box.exec(
        "echo x > configs/jianmu.yaml || echo HELD; mv configs old && "
        + plant.format(evil=_EVIL) + " && echo SWAPPED")
    assert "HELD" in result.stdout and "SWAPPED" in result.stdout, result
    # the user's folder is put back once what the command made there is moved
    assert (workspace / "configs" / "jianmu.yaml").read_text() == _MINE, result
    assert not (workspace / "old").exists(), result
    # a folder made there is moved with what it holds; a link, as a link
    assert _EVIL in _quarantined(workspace) or "ln -s" in plant
    assert "'configs" in result.stderr and "moved to" in result.stderr, result
    assert "'configs' put back (it had been renamed 'old')" in result.stderr, result


@pytest.mark.parametrize("away", ["mv configs .hidden", "mkdir -p src && mv configs src/c"],
                         ids=["next-to-it", "elsewhere"])
async def test_a_folder_above_a_held_config_renamed_away_is_put_back_or_said(
    box: Any, away: str
) -> None:
    """Nothing made in its place: the next run would silently start without the operator's
    config. Found next to where it was, it is renamed back; elsewhere, the result says so."""
    workspace = Path(box.workspace)
    result = await box.exec(f"{away} && echo RENAMED")
    assert "RENAMED" in result.stdout, result
    if away.startswith("mv configs .hidden"):
        assert (workspace / "configs" / "jianmu.yaml").read_text() == _MINE, result
        assert not (workspace / ".hidden").exists()
        assert "'configs' put back (it had been renamed '.hidden')" in result.stderr, result
    else:
        assert (workspace / "src" / "c" / "jianmu.yaml").read_text() == _MINE, result
        assert ("'configs' NOT put back (not found in the workspace): the next run does not "
                "find what it held") in result.stderr, result
    assert not (workspace / QUARANTINE).exists(), result
    follow = await box.exec("true")  # said once, by the command that did it
    assert "renamed" not in follow.stderr, follow


async def test_the_same_folders_on_the_way_move_nothing(box: Any) -> None:
    workspace = Path(box.workspace)
    result = await box.exec("echo notes > configs/notes.txt; ls configs")
    assert "jianmu.yaml" in result.stdout, result
    assert (workspace / "configs" / "jianmu.yaml").read_text() == _MINE
    assert not (workspace / QUARANTINE).exists()
    assert "moved" not in result.stderr


_SITE = "sub/.venv/lib/site-packages"


@pytest.fixture
def engine_in_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The engine's ``site-packages`` in a subfolder of the workspace (a project's
    ``backend/.venv`` the engine runs from): shown read-only, imported by the host later."""
    site_packages = tmp_path / "ws" / _SITE
    site_packages.mkdir(parents=True)
    (site_packages / "mod.py").write_text("GOOD = 1\n")
    monkeypatch.setattr("site.getsitepackages", lambda: [str(site_packages)])
    return site_packages


async def test_a_folder_above_the_engines_python_cannot_be_swapped(
    engine_in_workspace: Path, box: Any,
) -> None:
    workspace = Path(box.workspace)
    result = await box.exec(
        f"echo BAD=1 > {_SITE}/mod.py || echo HELD; mv sub old && "
        f"mkdir -p evil/.venv/lib/site-packages && echo BAD=1 > evil/{_SITE[4:]}/mod.py && "
        "ln -s evil sub && echo SWAPPED")
    assert "HELD" in result.stdout and "SWAPPED" in result.stdout, result
    # what the engine would import next is not the command's: the user's folder, put back
    assert (workspace / _SITE / "mod.py").read_text() == "GOOD = 1\n", result
    assert not (workspace / "old").exists(), result
    assert "'sub' moved to" in result.stderr and "'sub' put back" in result.stderr, result


def test_what_a_watch_moved_next_to_itself_is_never_put_back(tmp_path: Path) -> None:
    """Another sandbox's watch renames what its command made next to itself when the
    quarantine folder cannot be made: that is no folder of the user's to put back."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "jianmu.yaml").write_text(_MINE)
    watch = ReadOnlyWatch.take(tmp_path, ["configs/jianmu.yaml"])
    (tmp_path / "configs").rename(tmp_path / "configs.quarantined-0a1b2c")
    [(rel, where)] = watch.quarantine()
    assert rel == "configs" and "not found" in where
    assert (tmp_path / "configs.quarantined-0a1b2c" / "jianmu.yaml").exists()
    assert "'configs' NOT put back" in quarantine_note([(rel, where)])
    (tmp_path / "configs.quarantined-0a1b2c").rename(tmp_path / "configs")
    watch = ReadOnlyWatch.take(tmp_path, ["configs/jianmu.yaml"])
    (tmp_path / "configs").rename(tmp_path / "c2")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "notes.txt").write_text("kept")  # not empty: never replaced
    [(rel, where)] = watch.quarantine()
    assert "another 'configs' stands there" in where
    assert (tmp_path / "c2" / "jianmu.yaml").read_text() == _MINE
