"""A skill folder is pinned once, by descriptor, when the catalog loads (issue 27, item 7).

The skills folder often sits in the workspace, where sandboxed code can replace a skill's
folder with a symbolic link. It was trusted by its path: a link swapped in before
``load_skill`` exposed files outside, a swap after load worked too because
``run_skill_script`` pinned separately, and ``mcp serve --skills-dir`` served folders that were
never pinned. Now the folder is opened once (``openat`` with ``O_NOFOLLOW`` from ``/``) when
the skill is loaded, and every tool reads and runs from that one descriptor: ``load_skill``,
``read_skill_file``, ``run_skill_script``, a bt skill's tree, MCP resources and prompts. A
swap, before or after the tools first see the skill, changes nothing.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError as SDKError

from jianmu.errors import ToolExecutionError
from jianmu.mcp import build_mcp_server, skill_resource_uri
from jianmu.skills import SkillCatalog, run_bt_skill
from jianmu.skills.disclosure import LoadSkillTool
from jianmu.skills.skill_tools import ReadSkillFileTool, RunSkillScriptTool
from jianmu.tools.base import tool
from jianmu.tools.registry import ToolSet
from tests.skills import _skill_folder

pytestmark = pytest.mark.anyio

SECRET = "HOST-SECRET-NEVER-SHOWN"

skill_workspace = _skill_folder.skill_workspace
mounting_sandbox = _skill_folder.mounting_sandbox
anyio_backend = _skill_folder.anyio_backend  # module scope: one container per module


@tool
def echo(text: str) -> str:
    """Say it back.

    Args:
        text: What to say.
    """
    return text


def write_skill(folder: Path, marker: str) -> None:
    """A prompt skill whose body, reference and script all carry ``marker``."""
    (folder / "references").mkdir(parents=True)
    (folder / "scripts").mkdir()
    (folder / "SKILL.md").write_text(textwrap.dedent(f"""\
        ---
        name: notes
        description: Take notes. Use it in tests.
        allowed-tools: Read
        ---
        Body {marker}: read references/guide.md.
        """))
    (folder / "references" / "guide.md").write_text(f"guide {marker}\n")
    (folder / "scripts" / "show.py").write_text(f"print('script {marker}')\n")
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.fixture
def swap(tmp_path: Path) -> Any:
    """The ``notes`` skill under ``skills/``, and a function that swaps its folder for a link
    to an impostor outside (same name, its own body, files and a secret)."""
    skills = tmp_path / "skills"
    folder = skills / "notes"
    write_skill(folder, "ORIGINAL")
    impostor = tmp_path / "outside" / "notes"
    write_skill(impostor, SECRET)
    (impostor / "secret.txt").write_text(SECRET)

    def do_swap() -> None:
        shutil.move(folder, skills / "notes.moved")
        folder.symlink_to(impostor, target_is_directory=True)

    return skills, do_swap


async def test_load_and_read_after_a_swap_see_the_pinned_folder(swap: Any) -> None:
    skills, do_swap = swap
    skill = SkillCatalog([skills]).get("notes")  # pinned here
    do_swap()  # before any tool ever saw the skill
    loaded: list[str] = []
    text = await LoadSkillTool({"notes": skill}, lambda s: loaded.append(s.name)).run("notes")
    assert "Body ORIGINAL" in text and SECRET not in text
    assert "- references/guide.md (" in text and "secret.txt" not in text
    reader = ReadSkillFileTool(lambda: {"notes": skill})
    read = await reader.execute({"skill": "notes", "path": "references/guide.md"})
    assert read == "guide ORIGINAL\n"
    with pytest.raises(ToolExecutionError, match="does not exist") as missing:
        await reader.execute({"skill": "notes", "path": "secret.txt"})
    assert SECRET not in str(missing.value)
    assert skill.read_resource("references/guide.md") == "guide ORIGINAL\n"


async def test_a_script_runs_from_the_pinned_folder_after_a_swap(
    swap: Any, mounting_sandbox: Any
) -> None:
    skills, do_swap = swap
    skill = SkillCatalog([skills]).get("notes")
    runner = RunSkillScriptTool(lambda: {"notes": skill})
    before = await runner.run_sandboxed(mounting_sandbox, skill="notes", path="scripts/show.py")
    do_swap()  # after a first run, too
    after = await runner.run_sandboxed(mounting_sandbox, skill="notes", path="scripts/show.py")
    assert before == after == "script ORIGINAL"
    probe = await mounting_sandbox.exec(
        "cat /skills/notes/references/guide.md; ls /skills/notes",
        ro_mounts={skill.pinned.fileno(): "/skills/notes"},
    )
    assert probe.stdout == "guide ORIGINAL\nSKILL.md\nreferences\nscripts\n", probe


async def test_mcp_resources_and_prompts_come_from_the_pinned_folder(swap: Any) -> None:
    skills, do_swap = swap
    catalog = SkillCatalog([skills])  # what `jianmu mcp serve --skills-dir` loads
    server = build_mcp_server(ToolSet.from_tools([echo]), prompts=catalog.skills(),
                              files=catalog.skills())
    do_swap()
    async with Client(server) as client:
        listed = sorted(r.name for r in (await client.list_resources()).resources)
        assert listed == ["notes/references/guide.md", "notes/scripts/show.py"]
        read = await client.read_resource(skill_resource_uri("notes", "references/guide.md"))
        assert read.contents[0].text == "guide ORIGINAL\n"  # type: ignore[union-attr]
        with pytest.raises(SDKError, match="has no file") as caught:
            await client.read_resource(skill_resource_uri("notes", "secret.txt"))
        assert SECRET not in str(caught.value)
        prompt = await client.get_prompt("notes")
        body = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert "Body ORIGINAL" in body and SECRET not in body


async def test_a_plain_folder_served_over_mcp_is_pinned_when_the_server_is_built(
    swap: Any,
) -> None:
    skills, do_swap = swap

    class Folder:  # not a loaded skill: just a name and a folder
        name = "notes"
        folder = skills / "notes"

    server = build_mcp_server(ToolSet.from_tools([echo]), files=[Folder()])
    do_swap()
    async with Client(server) as client:
        read = await client.read_resource(skill_resource_uri("notes", "scripts/show.py"))
        assert read.contents[0].text == "print('script ORIGINAL')\n"  # type: ignore[union-attr]


async def test_a_bt_skill_runs_the_tree_it_was_loaded_with(tmp_path: Path) -> None:
    tree = textwrap.dedent('''\
        from py_trees.common import Status
        from jianmu.runtime import AsyncNode

        class Emit(AsyncNode):
            def __init__(self, key):
                super().__init__("emit")
                self.key = key

            async def update_async(self):
                self.state.write_port(self.key, {{"who": "{who}"}})
                return Status.SUCCESS

        def build_tree(ctx):
            return Emit(ctx.skill_result_key)
        ''')
    for where, who in ((tmp_path / "skills" / "tally", "original"),
                       (tmp_path / "outside" / "tally", SECRET)):
        where.mkdir(parents=True)
        (where / "SKILL.md").write_text("---\nname: tally\ndescription: d\nexecution: bt\n---\n")
        (where / "tree.py").write_text(tree.format(who=who))
    skill = SkillCatalog([tmp_path / "skills"]).get("tally")
    shutil.move(tmp_path / "skills" / "tally", tmp_path / "skills" / "moved")
    (tmp_path / "skills" / "tally").symlink_to(tmp_path / "outside" / "tally")
    assert await run_bt_skill(skill) == {"who": "original"}
