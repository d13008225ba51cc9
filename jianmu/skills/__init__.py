"""Skills: SKILL.md folders, the catalog, `SkillNode` and behaviour-tree skills.

Its names load on first use (module ``__getattr__``): importing one imports only the module
that holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu._lazy import lazy_names

if TYPE_CHECKING:
    from jianmu.skills.bt import (
        BTSkillContext,
        GuardedToolNode,
        RunBTSkillTool,
        SkillTreeLoader,
        resolve_inputs,
        run_bt_skill,
        validate_result,
    )
    from jianmu.skills.catalog import SkillCatalog, find_skill_folders
    from jianmu.skills.loader import SKILL_FILE, known_tool_checker, load_skill
    from jianmu.skills.node import (
        FlattenedAgentNode,
        SkillNode,
        SkillNodeConfig,
        merge_skill_constraints,
    )
    from jianmu.skills.skill import (
        CLAUDE_TOOL_NAMES,
        DEFAULT_PROMPT_TOOLS,
        READ_SKILL_FILE,
        AllowedTool,
        Skill,
        SkillFrontMatter,
        map_allowed_tool,
        map_allowed_tools,
        skill_name_problem,
    )

__all__ = (
    "CLAUDE_TOOL_NAMES",
    "DEFAULT_PROMPT_TOOLS",
    "READ_SKILL_FILE",
    "SKILL_FILE",
    "AllowedTool",
    "BTSkillContext",
    "FlattenedAgentNode",
    "GuardedToolNode",
    "RunBTSkillTool",
    "Skill",
    "SkillCatalog",
    "SkillFrontMatter",
    "SkillNode",
    "SkillNodeConfig",
    "SkillTreeLoader",
    "find_skill_folders",
    "known_tool_checker",
    "load_skill",
    "map_allowed_tool",
    "map_allowed_tools",
    "merge_skill_constraints",
    "resolve_inputs",
    "run_bt_skill",
    "skill_name_problem",
    "validate_result",
)

_HOLDERS = {
    "jianmu.skills.bt": (
        "BTSkillContext",
        "GuardedToolNode",
        "RunBTSkillTool",
        "SkillTreeLoader",
        "resolve_inputs",
        "run_bt_skill",
        "validate_result",
    ),
    "jianmu.skills.catalog": ("SkillCatalog", "find_skill_folders"),
    "jianmu.skills.loader": ("SKILL_FILE", "known_tool_checker", "load_skill"),
    "jianmu.skills.node": (
        "FlattenedAgentNode",
        "SkillNode",
        "SkillNodeConfig",
        "merge_skill_constraints",
    ),
    "jianmu.skills.skill": (
        "CLAUDE_TOOL_NAMES",
        "DEFAULT_PROMPT_TOOLS",
        "READ_SKILL_FILE",
        "AllowedTool",
        "Skill",
        "SkillFrontMatter",
        "map_allowed_tool",
        "map_allowed_tools",
        "skill_name_problem",
    ),
}
__getattr__, __dir__ = lazy_names(__name__, _HOLDERS, __all__)
