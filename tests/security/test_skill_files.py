"""Attacks on the skill tools: a loaded skill's folder is all that they reach, read-only.

`read_skill_file` reads on the host with the engine's rights, and the skills folder often sits
in the workspace, which sandboxed code can change: `..`, absolute paths, `~`, symlinks out (a
file, a parent folder, the skill's folder itself), folders swapped for links between the check
and the open, unloaded skills and FIFOs are each refused. `run_skill_script` refuses the same
paths before anything runs; the folder it mounts is reached without following a link, and the
script cannot change it (bubblewrap and Docker for real).
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import (
    PathEscapeError,
    SandboxError,
    SandboxUnavailableError,
    ToolExecutionError,
    ToolInputError,
)
from jianmu.execution import BaseSandbox, ExecCall, ExecResult, FakeSandbox
from jianmu.execution._docker import tar_folders
from jianmu.execution.sandbox import open_real_dir
from jianmu.skills import Skill
from jianmu.skills.skill_tools import ReadSkillFileTool, RunSkillScriptTool, SkillFiles
from tests.skills import _skill_folder
from tests.skills._skill_folder import make_skill

pytestmark = pytest.mark.anyio

SECRET = "HOST-SECRET-NEVER-SHOWN"

skill_workspace = _skill_folder.skill_workspace
mounting_sandbox = _skill_folder.mounting_sandbox
anyio_backend = _skill_folder.anyio_backend  # module scope: one container per module


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Skill, Path, dict[str, Skill]]]:
    """(the ``demo`` skill, a secret folder outside it, the loaded skills: ``demo`` only)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (outside / "evil.py").write_text(f"print({SECRET!r})\n")
    skills_dir = tmp_path / "ws" / "skills"
    demo = make_skill(skills_dir)
    make_skill(skills_dir, "unloaded")  # on disk, next to it, but not loaded
    yield demo, outside, {"demo": demo}


def tools(loaded: dict[str, Skill]) -> tuple[ReadSkillFileTool, RunSkillScriptTool]:
    return ReadSkillFileTool(lambda: loaded), RunSkillScriptTool(lambda: loaded)


async def refused_everywhere(
    loaded: dict[str, Skill], path: str, error: type[Exception], match: str | None = None
) -> None:
    """``path`` is refused by both tools, and no command ever reaches the sandbox."""
    reader, runner = tools(loaded)
    box = FakeSandbox(lambda call: ExecResult(exit_code=0, stdout=SECRET))
    with pytest.raises(error, match=match) as read:
        await reader.execute({"skill": "demo", "path": path})
    with pytest.raises(error, match=match) as ran:
        await runner.run_sandboxed(box, skill="demo", path=path)
    assert SECRET not in str(read.value) + str(ran.value)
    assert box.calls == []


@pytest.mark.parametrize(
    "path",
    ["../unloaded/SKILL.md", "references/../../unloaded/SKILL.md", "..", "scripts/..\\..\\x",
     "~/.bashrc", "~root/.profile"],
)
async def test_dot_dot_and_home_are_refused(setup: Any, path: str) -> None:
    _demo, _outside, loaded = setup
    await refused_everywhere(loaded, path, PathEscapeError, "outside the folder")


async def test_absolute_paths_are_refused_even_inside_the_skill(setup: Any) -> None:
    demo, outside, loaded = setup
    for path in ("/etc/passwd", str(outside / "secret.txt"), str(demo.folder / "forms.md"),
                 "/skills/demo/forms.md"):
        await refused_everywhere(loaded, path, PathEscapeError, "outside the folder")


async def test_nul_and_empty_paths_are_refused(setup: Any) -> None:
    _demo, _outside, loaded = setup
    await refused_everywhere(loaded, "forms.md\x00../../x", ToolInputError)
    await refused_everywhere(loaded, "", ToolInputError)


async def test_a_symlinked_file_out_is_refused(setup: Any) -> None:
    demo, outside, loaded = setup
    (demo.folder / "references" / "leak.md").symlink_to(outside / "secret.txt")
    (demo.folder / "scripts" / "evil.py").symlink_to(outside / "evil.py")
    (demo.folder / "scripts" / "sibling.py").symlink_to(demo.folder.parent / "unloaded" / "x")
    for path in ("references/leak.md", "scripts/evil.py", "scripts/sibling.py"):
        await refused_everywhere(loaded, path, PathEscapeError, "through a symbolic link")


async def test_a_symlinked_parent_folder_is_refused(setup: Any) -> None:
    demo, outside, loaded = setup
    (demo.folder / "reference").symlink_to(outside, target_is_directory=True)
    (demo.folder / "lib").symlink_to(demo.folder.parent / "unloaded")
    for path in ("reference/secret.txt", "reference/evil.py", "lib/scripts/echo.py"):
        await refused_everywhere(loaded, path, PathEscapeError, "through a symbolic link")


async def test_a_symlink_that_stays_inside_is_followed(setup: Any) -> None:
    demo, _outside, loaded = setup
    (demo.folder / "guide.md").symlink_to("references/guide.md")
    reader, runner = tools(loaded)
    text = await reader.execute({"skill": "demo", "path": "guide.md", "limit": 1})
    assert text.startswith("guide line 1\n")
    (demo.folder / "echo.py").symlink_to("scripts/echo.py")
    box = FakeSandbox(lambda call: ExecResult(exit_code=0))
    await runner.run_sandboxed(box, skill="demo", path="echo.py")
    assert box.calls[0].argv[1] == "/skills/demo/scripts/echo.py"  # the real file, resolved


async def test_a_skill_that_is_not_loaded_is_refused(setup: Any) -> None:
    _demo, _outside, loaded = setup
    reader, runner = tools(loaded)
    box = FakeSandbox(lambda call: ExecResult(exit_code=0))
    with pytest.raises(ToolInputError, match="loaded skills: 'demo'"):
        await reader.execute({"skill": "unloaded", "path": "SKILL.md"})
    with pytest.raises(ToolInputError, match="loaded skills: 'demo'"):
        await runner.run_sandboxed(box, skill="unloaded", path="scripts/echo.py")
    with pytest.raises(ToolInputError, match="loaded skills"):
        await reader.execute({"skill": "../outside", "path": "secret.txt"})
    assert box.calls == []


async def test_a_fifo_does_not_block_the_reader(setup: Any) -> None:
    demo, _outside, loaded = setup
    os.mkfifo(demo.folder / "references" / "pipe.md")
    reader, _ = tools(loaded)
    with pytest.raises(ToolExecutionError, match="not a regular file"):
        await reader.execute({"skill": "demo", "path": "references/pipe.md"})


async def test_a_folder_swapped_for_a_link_after_the_check_is_not_followed(setup: Any) -> None:
    demo, outside, loaded = setup
    files = SkillFiles(lambda: loaded)
    found = files.locate("demo", "references/guide.md")
    # the race, made deterministic: sandboxed code swaps the folder in between
    (demo.folder / "references").rename(demo.folder / "references.bak")
    (demo.folder / "references").symlink_to(outside, target_is_directory=True)
    (outside / "guide.md").write_text(SECRET)
    with pytest.raises(PathEscapeError, match="symbolic link"):
        found.open()


async def test_the_skill_folder_swapped_for_a_link_stays_pinned(setup: Any) -> None:
    demo, outside, loaded = setup
    (outside / "SKILL.md").write_text("---\nname: demo\ndescription: fake\n---\n")
    reader, runner = tools(loaded)
    shutil.move(demo.folder, demo.folder.parent / "demo.moved")
    demo.folder.symlink_to(outside, target_is_directory=True)
    box = FakeSandbox(lambda call: ExecResult(exit_code=0, stdout="ran"))
    with pytest.raises(ToolExecutionError, match="does not exist") as read:
        await reader.execute({"skill": "demo", "path": "secret.txt"})
    assert SECRET not in str(read.value)
    # the folder the skill was loaded from, wherever it went: not the link's target
    assert "A demo skill" in await reader.execute({"skill": "demo", "path": "SKILL.md"})
    with pytest.raises(ToolExecutionError, match="does not exist"):
        await runner.run_sandboxed(box, skill="demo", path="evil.py")
    await runner.run_sandboxed(box, skill="demo", path="scripts/echo.py")
    assert box.calls[0].ro_mounts == {demo.pinned.fileno(): "/skills/demo"}


async def test_a_folder_swapped_for_a_link_to_root_before_use_changes_nothing(
    setup: Any,
) -> None:
    demo, _outside, loaded = setup
    shutil.move(demo.folder, demo.folder.parent / "demo.moved")
    demo.folder.symlink_to("/", target_is_directory=True)  # before the tools ever saw it
    reader, _ = tools(loaded)
    with pytest.raises(ToolExecutionError, match="does not exist"):
        await reader.execute({"skill": "demo", "path": "etc/passwd"})
    assert (await reader.execute({"skill": "demo", "path": "forms.md"})) == "top-level file\n"


# -- the mount: its source, its target, sandboxes that cannot ----------------------------------


def test_a_mount_source_is_reached_without_following_links(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.close(open_real_dir(str(tmp_path / "real")))
    for path in (tmp_path / "link", tmp_path / "link" / "..", tmp_path / "missing"):
        with pytest.raises(SandboxError, match="cannot mount"):
            open_real_dir(str(path))


async def test_the_local_sandbox_refuses_a_swapped_mount_source(
    setup: Any, skill_workspace: Path
) -> None:
    from jianmu.execution.local_sandbox import LocalSandbox

    demo, outside, _loaded = setup
    box = LocalSandbox(skill_workspace, network=True)
    if not box.read_only_mounts:
        pytest.skip("bubblewrap 0.8+ is not usable here")
    swapped = demo.folder.parent / "swapped"
    swapped.symlink_to(outside, target_is_directory=True)
    async with box:
        with pytest.raises(SandboxError, match="symbolic link"):
            await box.exec(["cat", "/skills/x/secret.txt"], ro_mounts={str(swapped): "/skills/x"})


def test_the_docker_copy_leaves_links_and_devices_out(setup: Any) -> None:
    demo, outside, _loaded = setup
    (demo.folder / "leak").symlink_to(outside / "secret.txt")
    (demo.folder / "dir-leak").symlink_to(outside, target_is_directory=True)
    os.mkfifo(demo.folder / "fifo")
    data = tar_folders({"demo": str(demo.folder)})
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert SECRET.encode() not in data
    assert {"demo/leak", "demo/dir-leak", "demo/fifo"}.isdisjoint(members)
    assert all(m.isfile() or m.isdir() for m in members.values())
    assert members["demo"].mode == members["demo/scripts/run"].mode == 0o555
    assert members["demo/forms.md"].mode == 0o444
    with pytest.raises(SandboxError, match="more than 10 bytes"):
        tar_folders({"demo": str(demo.folder)}, limit=10)
    swapped = demo.folder.parent / "swapped"
    swapped.symlink_to(outside, target_is_directory=True)
    with pytest.raises(SandboxError, match="symbolic link"):
        tar_folders({"x": str(swapped)})


@pytest.mark.parametrize(
    "target", ["/skills/../etc", "/etc", "/skills", "/skills/", "/skills/a/b", "skills/a",
               "/skills/..", "/skills/.hidden", "/tmp/a"],
)
async def test_mount_targets_outside_skills_are_refused(target: str) -> None:
    box = FakeSandbox(lambda call: ExecResult(exit_code=0))
    with pytest.raises(ValueError, match="mount target"):
        await box.exec(["true"], ro_mounts={"/srv/skill": target})
    assert box.calls == []


async def test_mount_sources_must_be_absolute_without_dot_dot() -> None:
    box = FakeSandbox(lambda call: ExecResult(exit_code=0))
    for source in ("relative/skill", "/srv/../etc"):
        with pytest.raises(ValueError, match="mount source"):
            await box.exec(["true"], ro_mounts={source: "/skills/a"})
    assert box.calls == []


class _ThirdParty(BaseSandbox):
    """A sandbox that knows nothing of mounts: its `run` would ignore them."""

    async def run(self, call: ExecCall) -> ExecResult:
        raise AssertionError("must not run: the mount would be silently missing")


async def test_a_sandbox_without_the_capability_never_runs_without_the_mount(
    setup: Any,
) -> None:
    _demo, _outside, loaded = setup
    with pytest.raises(SandboxUnavailableError, match="cannot mount folders read-only"):
        await _ThirdParty().exec(["true"], ro_mounts={"/srv/skill": "/skills/a"})
    _, runner = tools(loaded)
    with pytest.raises(ToolExecutionError, match="cannot run skill scripts"):
        await runner.run_sandboxed(_ThirdParty(), skill="demo", path="scripts/echo.py")


# -- for real: the script cannot change its folder, nor see through a link ----------------------


async def test_a_script_cannot_change_its_skill_folder(mounting_sandbox: Any, setup: Any) -> None:
    demo, _outside, loaded = setup
    before = {p: p.read_bytes() for p in demo.folder.rglob("*") if p.is_file()}
    _, runner = tools(loaded)
    out = await runner.run_sandboxed(mounting_sandbox, skill="demo", path="scripts/write_here.py")
    assert "SUCCEEDED" not in out and out.count("refused") == 4
    assert {p: p.read_bytes() for p in demo.folder.rglob("*") if p.is_file()} == before
    # nor can any command write there, or (in the long-lived container) plant a folder where
    # a later copy goes
    probe = await mounting_sandbox.exec(
        "touch /skills/other/x 2>/dev/null || echo refused; "
        "mkdir /skills/planted 2>/dev/null || echo refused",
        ro_mounts={str(demo.folder.resolve()): "/skills/other"},
    )
    assert probe.stdout == "refused\nrefused\n", probe


async def test_a_link_in_the_skill_folder_shows_nothing_of_the_host(
    mounting_sandbox: Any, setup: Any
) -> None:
    demo, outside, loaded = setup
    outside.chmod(0o755)
    (outside / "secret.txt").chmod(0o644)  # readable, were it reachable
    (demo.folder / "leak.txt").symlink_to(outside / "secret.txt")
    (demo.folder / "scripts" / "cat.sh").write_text('cat "$JIANMU_SKILL_DIR/leak.txt" 2>&1\n')
    (demo.folder / "scripts" / "cat.sh").chmod(0o644)
    _, runner = tools(loaded)
    with pytest.raises(ToolExecutionError) as failed:
        await runner.run_sandboxed(mounting_sandbox, skill="demo", path="scripts/cat.sh")
    assert SECRET not in str(failed.value)
