"""The fixture skills in the public Agent Skills format (tests/fixtures/public_skills) load."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from jianmu.skills.loader import known_tool_checker, load_skill

PUBLIC_SKILLS = Path(__file__).resolve().parents[1] / "fixtures" / "public_skills"
FOLDERS = sorted(p for p in PUBLIC_SKILLS.iterdir() if (p / "SKILL.md").is_file())

def _param(folder: Path) -> object:
    return pytest.param(folder, id=folder.name)


def test_the_fixture_folder_holds_several_skills() -> None:
    assert len(FOLDERS) >= 4
    assert any((f / "themes").is_dir() for f in FOLDERS)
    assert any((f / "forms.md").is_file() for f in FOLDERS)


@pytest.mark.parametrize("folder", [_param(f) for f in FOLDERS])
def test_every_public_format_skill_loads(folder: Path) -> None:
    skill = load_skill(folder, is_known_tool=known_tool_checker())
    assert skill.name == folder.name and skill.execution == "prompt"
    assert skill.license and skill.metadata.get("author") == "jianmu-fixtures"
    assert skill.allowed_tools and "read_file" in skill.tools


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_files_named_in_a_body_exist_in_the_skill_folder(folder: Path) -> None:
    text = (folder / "SKILL.md").read_text(encoding="utf-8")
    # lower-case names only: NOTES.md and the like are the user's files, not the skill's
    named = set(re.findall(r"`((?:[a-z][\w.-]*/)*[a-z][\w-]*\.(?:md|json|png|py))`", text))
    named |= set(re.findall(r"python (scripts/[\w.-]+\.py)", text))
    assert named, f"{folder.name}: its body should point to files of its folder"
    missing = sorted(n for n in named if not (folder / n).is_file())
    assert not missing, f"{folder.name}: the body names files that do not exist: {missing}"


@pytest.mark.parametrize("script", sorted(PUBLIC_SKILLS.glob("*/scripts/*.py")),
                         ids=lambda p: f"{p.parents[1].name}/{p.name}")
def test_helper_scripts_answer_help(script: Path) -> None:
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.startswith(f"usage: {script.name}")
