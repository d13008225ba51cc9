"""Deprecated: `SkillNode` and `FlattenedAgentNode` moved to `jianmu.skills.node`.

A package rather than a ``skill_node.py`` file, so that git sees the old file renamed.
"""

from __future__ import annotations

from jianmu._moved import moved

__all__ = (
    "FlattenedAgentNode",
    "PrepareSkillContext",
    "SkillNode",
    "SkillNodeConfig",
    "merge_skill_constraints",
)

# nodes sits below skills: the names are looked up by module name, not imported
__getattr__ = moved(__name__, dict.fromkeys(__all__, "jianmu.skills.node"))
