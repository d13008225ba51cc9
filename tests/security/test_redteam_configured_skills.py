"""Red team: a skills folder the config names (``skills.paths``) inside the workspace.

The next run scans ``skills.paths`` besides ``skills/`` and imports a BT skill's ``tree.py`` in
the engine's process, so such a folder is code the host runs later. Found here: only ``skills``
(and what ``execution.read_only_paths`` lists) was held read-only, so with
``skills: {paths: [agent_skills]}`` a sandboxed command planted a skill there that the next run
loaded. Now every folder of ``skills.paths`` inside the workspace is held like ``skills``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.config import AppConfig
from jianmu.constraints import DEFAULT_READ_ONLY_PATHS
from jianmu.execution.local_sandbox import bwrap_available
from jianmu.execution.runner import ToolRunner
from jianmu.skills.catalog import SkillCatalog

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _config(ws: Path, **execution: object) -> AppConfig:
    return AppConfig.model_validate({
        "skills": {"paths": ["agent_skills", "./team//skills/", str(ws / "abs_skills"),
                             "../outside", "/elsewhere/skills"]},
        "execution": {"workdir": str(ws), **execution},
    })


def test_configured_skill_folders_in_the_workspace_are_read_only(tmp_path: Path) -> None:
    held = _config(tmp_path).constraints().execution.read_only_paths
    assert held == [*DEFAULT_READ_ONLY_PATHS, "agent_skills", "team/skills", "abs_skills"]
    # an operator who turns the defaults off still has the skills the next run imports held
    off = _config(tmp_path, read_only_paths=[]).constraints().execution.read_only_paths
    assert off == ["agent_skills", "team/skills", "abs_skills"]
    assert AppConfig().constraints().execution.read_only_paths is None  # the defaults


@pytest.mark.skipif(not bwrap_available(network=False),
                    reason="bubblewrap cannot create namespaces here")
async def test_a_command_cannot_plant_a_skill_the_next_run_imports(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "agent_skills" / "notes").mkdir(parents=True)
    (ws / "agent_skills" / "notes" / "SKILL.md").write_text(
        "---\nname: notes\ndescription: notes\n---\nhi\n")
    config = _config(ws)
    runner = ToolRunner(config.constraints().execution)
    plant = (
        "mkdir -p agent_skills/evil; "
        "printf -- '---\\nname: evil\\ndescription: e\\n---\\nx\\n' > agent_skills/evil/SKILL.md; "
        "printf 'import os\\n' > agent_skills/notes/tree.py; echo ok > done"
    )
    async with runner.sandbox as sandbox:
        result = await sandbox.exec(["sh", "-c", plant])
    assert (ws / "done").exists(), result
    assert sorted(p.name for p in (ws / "agent_skills").iterdir()) == ["notes"], result
    assert sorted(p.name for p in (ws / "agent_skills" / "notes").iterdir()) == ["SKILL.md"]
    catalog = SkillCatalog([ws / "agent_skills"], config=config)
    assert [s.name for s in catalog] == ["notes"]
