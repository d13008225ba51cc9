"""Red team, YAML keys: a key written twice in one mapping of a config or of a SKILL.md's front
matter silently replaced the first, so a second ``guard:`` (or ``constraints:``) dropped a
``bash: deny`` rule written above it. Both are refused now, naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.config import load_config, parse_config
from jianmu.errors import ConfigError, SkillLoadError
from jianmu.skills import load_skill


def test_a_config_key_written_twice_is_refused_not_silently_dropped(tmp_path: Path) -> None:
    path = tmp_path / "jianmu.yaml"
    path.write_text("guard:\n  tool_policy:\n    bash: deny\n"
                    "runtime:\n  max_iterations: 3\nguard:\n  max_tool_calls: 5\n")
    with pytest.raises(ConfigError, match=rf"{path}:6: the key 'guard' is written twice"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"<config>:4: the key 'bash' is written twice"):
        parse_config("guard:\n  tool_policy:\n    bash: deny\n    bash: allow\n")


def test_a_front_matter_key_written_twice_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "twice"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: twice\ndescription: d\n"
        "constraints:\n  guard:\n    tool_policy:\n      bash: deny\n"
        "constraints:\n  max_iterations: 3\n---\nBody.\n", encoding="utf-8")
    with pytest.raises(SkillLoadError, match=r"SKILL.md:8: the key 'constraints' is written twice"):
        load_skill(folder)
