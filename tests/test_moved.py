"""Names that moved up a layer stay importable from their old paths for one release, warning."""

from __future__ import annotations

import importlib

import pytest

import jianmu
import jianmu.mcp
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
    ("jianmu.tools", "MCPToolProvider", "jianmu.mcp"),
    ("jianmu.tools", "MCPClient", "jianmu.mcp"),
    ("jianmu.tools", "build_mcp_server", "jianmu.mcp"),
    ("jianmu.tools.mcp", "MCPToolProvider", "jianmu.mcp"),
    ("jianmu.tools.mcp", "MCPTool", "jianmu.mcp"),
    ("jianmu.tools.mcp", "providers_from_config", "jianmu.mcp"),
    ("jianmu.tools.mcp", "serve", "jianmu.mcp"),
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


def test_from_import_of_the_old_mcp_path_warns() -> None:
    with pytest.warns(DeprecationWarning, match=r"jianmu\.tools\.mcp\.MCPToolProvider moved"):
        from jianmu.tools.mcp import MCPToolProvider
    assert MCPToolProvider is jianmu.mcp.MCPToolProvider


def test_the_new_paths_do_not_warn() -> None:
    # pytest turns warnings into errors: a warning here fails the test
    assert jianmu.SkillNode is jianmu.skills.SkillNode
    assert jianmu.FlattenedAgentNode is jianmu.skills.FlattenedAgentNode
    assert jianmu.MCPToolProvider is jianmu.mcp.MCPToolProvider
    assert jianmu.MCPClient is jianmu.mcp.MCPClient


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    nodes = importlib.import_module("jianmu.nodes")
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        nodes.Nothing  # noqa: B018
