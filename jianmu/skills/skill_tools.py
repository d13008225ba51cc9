"""PLACEHOLDER (issue 14, branch i14-disclosure): `read_skill_file` and `run_skill_script`.

The real tools come from the skill-files branch, which replaces this whole module on merge.
Only the pinned surface is here — the class names, ``__init__(skills)`` with ``skills`` a
callable returning the loaded skills by name, the tool names, categories and arguments — so
that `SkillNode` can offer both tools now; calling either fails with NotImplementedError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jianmu.skills.skill import Skill
from jianmu.tools.base import Tool

__all__ = ("ReadSkillFileTool", "RunSkillScriptTool")

LoadedSkills = Callable[[], Mapping[str, Skill]]
"""Returns the skills loaded so far in the run, by name."""


class _Placeholder(Tool):
    """The shared body of both placeholders: keeps ``skills``, refuses to run."""

    def __init__(self, skills: LoadedSkills) -> None:
        self.skills = skills

    async def run(self, **kwargs: Any) -> Any:
        """Not implemented in this branch (the skill-files branch replaces this module)."""
        raise NotImplementedError(f"{self.name} is a placeholder in this build")


def _schema(**properties: dict[str, Any]) -> dict[str, Any]:
    skill = {"type": "string", "description": "The loaded skill's name."}
    return {
        "type": "object",
        "properties": {"skill": skill, **properties},
        "required": ["skill", "path"],
    }


_READ_ARGS: dict[str, dict[str, Any]] = {
    "path": {"type": "string", "description": "The file, relative to the skill."},
    "offset": {"type": "integer", "description": "First line to read (1-based)."},
    "limit": {"type": "integer", "description": "Lines to read."},
}
_RUN_ARGS: dict[str, dict[str, Any]] = {
    "path": {"type": "string", "description": "The script, relative to the skill."},
    "args": {"type": "array", "items": {"type": "string"}, "description": "Arguments."},
    "stdin": {"type": "string", "description": "Text fed to the script's input."},
}


class ReadSkillFileTool(_Placeholder):
    """Read a file inside a loaded skill's folder (a path relative to the folder)."""

    name = "read_skill_file"
    category = "read"
    input_schema = _schema(**_READ_ARGS)


class RunSkillScriptTool(_Placeholder):
    """Run a script inside a loaded skill's folder, in the run's sandbox."""

    name = "run_skill_script"
    category = "execute"
    input_schema = _schema(**_RUN_ARGS)
