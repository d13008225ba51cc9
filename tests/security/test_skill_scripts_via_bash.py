"""A skill's scripts run the way its author wrote them, and only read-only (issue 26, item 7).

A real SKILL.md says "run `python scripts/count_words.py FILE`" and offers bash through
``allowed-tools: Bash(python:*)``. `load_skill` tells the model the skill's base directory
(``/skills/<name>``) and how its scripts run; the skill node's ``bash`` sees the folder there,
read-only, so ``python /skills/count-words/scripts/count_words.py notes.txt`` works under the
same guard (``bash(python *)``), in the local sandbox and in Docker. The folder mounted is the
one pinned when the skill was loaded: a swap afterwards changes nothing, and no command can
write into it.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.config import parse_config
from jianmu.errors import ToolExecutionError
from jianmu.execution import FakeSandbox
from jianmu.execution.sandbox import ExecResult
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog, SkillNode, SkillNodeConfig
from jianmu.skills.skill_tools import SkillBashTool
from tests.execution._helpers import local_problem, require_docker
from tests.skills import _skill_folder

pytestmark = pytest.mark.anyio

SECRET = "SWAPPED-IN-NEVER-RUN"
BASE = "/skills/count-words"
COMMAND = f"python {BASE}/scripts/count_words.py notes.txt"

SKILL_MD = textwrap.dedent("""\
    ---
    name: count-words
    description: Count the words of a text file. Use it when asked how many words a file has.
    allowed-tools: Bash(python:*)
    ---

    # Counting words

    To count the words of a file, run `python scripts/count_words.py FILE` and report the
    number it prints.
    """)

COUNT_WORDS = textwrap.dedent("""\
    import sys
    with open(sys.argv[1], encoding="utf-8") as fh:
        print(f"{len(fh.read().split())} words")
    """)

skill_workspace = _skill_folder.skill_workspace
mounting_sandbox = _skill_folder.mounting_sandbox
anyio_backend = _skill_folder.anyio_backend  # module scope: one container per module


def write_skill(root: Path, body: str = SKILL_MD, script: str = COUNT_WORDS) -> Path:
    folder = root / "count-words"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(body, encoding="utf-8")
    (folder / "scripts" / "count_words.py").write_text(script, encoding="utf-8")
    for path in [root, folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def project(tmp_path: Path, mode: str) -> tuple[Path, Any]:
    """A workspace with notes.txt (seven words) and a config in that execution mode."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    workspace.chmod(0o777)
    for parent in workspace.parents:  # pytest's folders are 0700: let the sandbox user through
        if parent == Path("/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o011)
    (workspace / "notes.txt").write_text("one two three four five six seven\n")
    (workspace / "notes.txt").chmod(0o644)
    config = parse_config(textwrap.dedent(f"""\
        runtime:
          debug_dir: {tmp_path / 'debug'}
        execution:
          mode: {mode}
          workdir: {workspace}
          timeout_s: 60
        """))
    return workspace, config


SCRIPT = [
    [{"name": "load_skill", "arguments": {"name": "count-words"}, "id": "load"}],
    [{"name": "bash", "arguments": {"command": COMMAND}, "id": "count"}],
    "notes.txt has 7 words.",
]


async def run_skill(tmp_path: Path, mode: str, *, swap_after_load: bool = False) -> list[Any]:
    """Run the skill through a SkillNode with the scripted model; the tool observations."""
    skills = tmp_path / "skills"
    folder = write_skill(skills)
    _workspace, config = project(tmp_path, mode)
    catalog = SkillCatalog([skills])  # the folder is pinned here, when the catalog loads
    if swap_after_load:
        outside = write_skill(tmp_path / "outside", body=SKILL_MD.replace("Counting", "Evil"),
                              script=f"print({SECRET!r})\n")
        shutil.move(folder, skills / "moved-away")
        folder.symlink_to(outside, target_is_directory=True)
    llm = ScriptedLLM(SCRIPT)
    node = SkillNode("Count", ["count-words"], llm, catalog=catalog,
                     config=SkillNodeConfig(disclosure="progressive"))
    state = StateManager(AgentState, {"messages": [
        {"role": "user", "content": "How many words does notes.txt have?"}]})
    runner = ReactiveRunner(node, state, config=config)
    try:
        result = await runner.run(timeout=120)
        # the same guard as any bash command: python runs code it cannot read, so it asks
        assert result.status is RunStatus.SUSPENDED, result.error
        [request] = result.pending
        assert request.payload["tool"] == "bash"
        assert request.payload["arguments"] == {"command": COMMAND}
        runner.approve(request.id)
        result = await runner.run(timeout=120)
    finally:
        await runner.aclose()
    assert result.status is RunStatus.SUCCESS, result.error
    assert state.get("final_answer") == SCRIPT[-1]
    return [m for m in llm.requests[-1].messages if m.role == "tool"]


def local_ready() -> None:
    problem = local_problem("local-bwrap")
    if problem is not None:
        pytest.skip(problem)


@pytest.mark.parametrize("mode", ["local", pytest.param("docker", marks=pytest.mark.docker)])
async def test_the_script_runs_as_the_skill_says(tmp_path: Path, mode: str) -> None:
    require_docker() if mode == "docker" else local_ready()
    loaded, counted = await run_skill(tmp_path, mode)
    assert f"Base directory for this skill: {BASE}" in (loaded.content or "")
    assert f"python {BASE}/scripts/x.py" in (loaded.content or "")  # how its scripts run
    assert "run `python scripts/count_words.py FILE`" in (loaded.content or "")
    assert counted.content == "7 words", counted.content


@pytest.mark.parametrize("mode", ["local", pytest.param("docker", marks=pytest.mark.docker)])
async def test_a_folder_swapped_after_load_changes_nothing(tmp_path: Path, mode: str) -> None:
    require_docker() if mode == "docker" else local_ready()
    loaded, counted = await run_skill(tmp_path, mode, swap_after_load=True)
    assert "# Counting words" in (loaded.content or "") and "Evil" not in (loaded.content or "")
    assert counted.content == "7 words" and SECRET not in (counted.content or "")


async def test_no_command_can_write_into_the_skill_folder(
    tmp_path: Path, mounting_sandbox: Any
) -> None:
    folder = write_skill(tmp_path / "skills")
    skill = SkillCatalog([tmp_path / "skills"]).get("count-words")
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    bash = SkillBashTool(lambda: {"count-words": skill})
    attempts = [f"touch {BASE}/planted", f"echo x >> {BASE}/scripts/count_words.py",
                f"rm {BASE}/SKILL.md", f"mkdir {BASE}/new", f"chmod 777 {BASE}/scripts"]
    for command in attempts:
        with pytest.raises(ToolExecutionError, match="exited with code"):
            await bash.run_sandboxed(mounting_sandbox, command=command)
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert not (folder / "planted").exists() and not (folder / "new").exists()
    out = await bash.run_sandboxed(mounting_sandbox, command=f"ls {BASE}/scripts")
    assert out == "count_words.py"


async def test_bash_mounts_the_pinned_folder_of_every_loaded_skill(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "skills")
    skill = SkillCatalog([tmp_path / "skills"]).get("count-words")
    loaded: dict[str, Any] = {}
    bash = SkillBashTool(lambda: loaded)
    box = FakeSandbox(lambda call: ExecResult(exit_code=0, stdout="ok"))
    await bash.run_sandboxed(box, command="ls")
    assert box.calls[-1].ro_mounts == {}  # nothing loaded: nothing mounted
    loaded["count-words"] = skill
    shutil.move(folder, folder.parent / "moved")
    await bash.run_sandboxed(box, command=COMMAND)
    assert box.calls[-1].ro_mounts == {skill.pinned.fileno(): BASE}
    assert bash.name == "bash" and bash.input_schema["required"] == ["command"]
