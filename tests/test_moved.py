"""Names that moved up a layer stay importable from their old paths for one release, warning."""

from __future__ import annotations

import importlib

import pytest

import jianmu
import jianmu.skills

# (old module, name, new module)
MOVED = [
    ("jianmu.nodes", "SkillNode", "jianmu.skills.node"),
    ("jianmu.nodes", "FlattenedAgentNode", "jianmu.skills.node"),
    ("jianmu.nodes", "SkillNodeConfig", "jianmu.skills.node"),
    ("jianmu.nodes", "merge_skill_constraints", "jianmu.skills.node"),
    ("jianmu.nodes.skill_node", "SkillNode", "jianmu.skills.node"),
    ("jianmu.nodes.skill_node", "FlattenedAgentNode", "jianmu.skills.node"),
    ("jianmu.nodes.skill_node", "PrepareSkillContext", "jianmu.skills.node"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED)
def test_an_old_path_still_works_and_warns(old: str, name: str, new: str) -> None:
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}"):
        found = getattr(module, name)
    assert found is getattr(importlib.import_module(new), name)


def test_from_import_of_an_old_path_warns() -> None:
    with pytest.warns(DeprecationWarning, match="jianmu.skills.node"):
        from jianmu.nodes.skill_node import SkillNode
    assert SkillNode is jianmu.skills.SkillNode


def test_the_new_paths_do_not_warn() -> None:
    # pytest turns warnings into errors: a warning here fails the test
    assert jianmu.SkillNode is jianmu.skills.SkillNode
    assert jianmu.FlattenedAgentNode is jianmu.skills.FlattenedAgentNode


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    nodes = importlib.import_module("jianmu.nodes")
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        nodes.Nothing  # noqa: B018
