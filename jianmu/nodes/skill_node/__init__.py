"""Deprecated: `SkillNode` and its kin moved to `jianmu.skills.node`; this path goes next release.

A package rather than a ``skill_node.py`` file, so that git sees the old file renamed.
"""

from __future__ import annotations

from jianmu._moved import moved

__all__: tuple[str, ...] = ()  # an old path offers nothing to star-import

_NAMES = ("FlattenedAgentNode", "PrepareSkillContext", "SkillNode", "SkillNodeConfig",
          "merge_skill_constraints")
# nodes sits below skills: the names are looked up by module name on first use, not imported
__getattr__ = moved(__name__, dict.fromkeys(_NAMES, "jianmu.skills.node"))
