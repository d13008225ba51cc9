"""Red team, skills: two skills of one name in one `SkillNode`.

A catalog keeps the first of two folders with one skill name and reports the second; a
`SkillNode` given `Skill` objects took both: the model was shown both descriptions under one
name, and ``load_skill`` (a dict by name) loaded whichever came last, with its tools, and both
folders were to be shown at ``/skills/<name>``. The node now refuses to run, naming both
folders; nothing runs, no tool is called.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.skills.loader import load_skill
from jianmu.skills.node import SkillNode

pytestmark = pytest.mark.anyio


def _skill(root: Path, description: str, tools: str) -> Path:
    folder = root / "same"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: same\ndescription: {description}\n{tools}---\nDo it.\n", encoding="utf-8"
    )
    return folder


async def test_two_skills_of_one_name_in_a_node_are_refused(tmp_path: Path) -> None:
    first = load_skill(_skill(tmp_path / "a", "Read a file.", ""))
    second = load_skill(_skill(tmp_path / "b", "Read a file, too.", "tools: [bash]\n"))
    llm = ScriptedLLM([[{"name": "load_skill", "arguments": {"name": "same"}}], "done"])
    node = SkillNode("Pair", [first, second], llm)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    result = await ReactiveRunner(node, state, interactive=False).run(timeout=30)
    assert result.status is RunStatus.FAILURE
    error = f"{result.error} {node.feedback_message}"
    assert "same" in error and str(tmp_path / "a") in error and str(tmp_path / "b") in error
    assert llm.requests == []
