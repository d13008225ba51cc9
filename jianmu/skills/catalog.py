"""`SkillCatalog`: the skills found in ``skills/`` and the config's ``skills.paths``."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from jianmu.config import AppConfig
from jianmu.errors import SkillLoadError, SkillNotFoundError
from jianmu.skills.bt import SkillTreeLoader
from jianmu.skills.loader import SKILL_FILE, known_tool_checker, load_skill
from jianmu.skills.skill import SKIPPED_FOLDERS, Skill

__all__ = ("DEFAULT_SKILLS_PATH", "SkillCatalog", "find_skill_folders")

DEFAULT_SKILLS_PATH = "skills"
"""The folder scanned first (relative to the current folder)."""


_SEARCHED_HIDDEN = frozenset({".claude"})
"""Hidden folders that do hold skills: Claude Code's project folder."""


def find_skill_folders(path: str | os.PathLike[str]) -> list[Path]:
    """The skill folders at or under ``path``, at any depth, sorted.

    ``path`` may be a SKILL.md, a skill folder, or any folder (a repository, a ``skills/``
    folder of folders). ``.git``, ``node_modules``, ``__pycache__`` and hidden folders are not
    searched, except ``.claude`` (where Claude Code keeps a project's ``.claude/skills/``);
    nor is a skill folder's inside (its sub-folders are its files). A path
    that does not exist has none.
    """
    base = Path(path)
    if base.is_file():
        return [base.parent] if base.name == SKILL_FILE else []
    if _has_skill_file(base):
        return [base]
    found: list[Path] = []
    for here, folders, _ in os.walk(base):
        folders[:] = sorted(
            f for f in folders
            if f not in SKIPPED_FOLDERS and (not f.startswith(".") or f in _SEARCHED_HIDDEN)
        )
        for name in list(folders):
            if _has_skill_file(Path(here) / name):
                found.append(Path(here) / name)
                folders.remove(name)
    return sorted(found)


def _has_skill_file(folder: Path) -> bool:
    """Whether ``folder`` holds an entry named SKILL.md: a file, or a link or folder that
    `load_skill` then names as the problem (skipping them hid the skill without a word); a
    folder that may not be looked into counts too, for `load_skill` to say so."""
    try:
        os.lstat(folder / SKILL_FILE)
    except PermissionError:
        return True
    except (OSError, ValueError):
        return False
    return True


def _try_build(skill: Skill, loader: SkillTreeLoader, custom_tools: list[Any]) -> None:
    """Build a bt skill's tree as a run would, when that needs no one's inputs and every
    tool it names can be made here (not an MCP tool, nor a custom tool known by name only).

    Raises:
        SkillLoadError: ``build_tree`` raised, returned no behaviour, or placed a tool the
            skill does not declare.
    """
    from jianmu.errors import SkillRunError
    from jianmu.skills.bt import BTSkillContext
    from jianmu.skills.skill import READ_SKILL_FILE
    from jianmu.state import StateManager

    tools = skill.toolset(custom_tools)
    if any(n not in tools for n in skill.tool_names if n != READ_SKILL_FILE):
        return
    try:
        ctx = BTSkillContext.create(skill, state_manager=StateManager(), tools=tools)
    except SkillRunError:  # an input without a default: the tree is built when it runs
        return
    loader.build(skill, ctx)


class SkillCatalog:
    """Scans folders of SKILL.md folders (at any depth, as `find_skill_folders`, and every
    folder right inside); loads front matter only; keeps broken skills apart.

    Args:
        paths: Folders to scan; default ``skills/`` then the config's ``skills.paths``. A
            folder may also be a single skill (it holds a SKILL.md itself).
        config: The configuration (its ``skills.paths`` and MCP server names).
        custom_tools: Tools (or tool names) besides the built-ins that skills may name.

    A broken skill does not stop the others: its `SkillLoadError` is kept in ``errors``. A
    name that two folders hold names no skill: each folder after the first is an error, and
    `get` refuses the name, naming every folder (``skills/`` is scanned first, and a cloned
    repository's must not stand in for the operator's skill of that name unseen).
    """

    def __init__(
        self,
        paths: Iterable[str | os.PathLike[str]] | None = None,
        *,
        config: AppConfig | None = None,
        custom_tools: Iterable[Any] = (),
    ) -> None:
        self.config = config
        if paths is None:
            configured = config.skills.paths if config is not None else []
            self.paths = [Path(DEFAULT_SKILLS_PATH), *(Path(p) for p in configured)]
            self._required = {Path(p) for p in configured}
        else:
            self.paths = [Path(p) for p in paths]
            self._required = set(self.paths)
        custom_tools = list(custom_tools)
        self._custom_tools = [t for t in custom_tools if not isinstance(t, str)]
        self._is_known = known_tool_checker(config, custom_tools)
        self._skills: dict[str, Skill] = {}
        self._ambiguous: dict[str, list[Path]] = {}
        """Names more than one folder holds, with those folders: none of them is used."""
        self.errors: list[SkillLoadError] = []
        """Skills that failed to load, one error each."""
        self.reload()

    def reload(self) -> None:
        """Scan the folders again."""
        self._skills = {}
        self._ambiguous = {}
        self.errors = []
        for base in self.paths:
            if base.name == SKILL_FILE and base.is_file():  # one skill, named by its file
                base = base.parent
            if not base.is_dir():
                if base in self._required:
                    # a relative path is read from the current folder, not the config's:
                    # say where it was looked for, for a command run from another folder
                    where = ("" if base.is_absolute() else
                             f" (looked for in {str(Path.cwd())!r}: a relative path is read "
                             "from the folder the command runs in)")
                    problem = ("is a file, not a folder of skills; name its folder" if
                               base.exists() else f"skills folder not found{where}; fix "
                               "skills.paths or create it")
                    self.errors.append(SkillLoadError(problem, path=str(base)))
                continue
            try:
                # at any depth, as `jianmu skills validate` finds them: skills/team/x/SKILL.md
                # was valid there and missing here
                candidates = [base] if _has_skill_file(base) else sorted({
                    *(p for p in base.iterdir() if p.is_dir() and _has_skill_file(p)),
                    *find_skill_folders(base),
                })
            except OSError as exc:  # an unreadable folder must not hide the other paths
                self.errors.append(SkillLoadError(
                    f"cannot list the skills folder: {exc.strerror or exc}", path=str(base)))
                continue
            for folder in candidates:
                self._add(folder)

    def _add(self, folder: Path) -> None:
        try:
            skill = load_skill(folder, is_known_tool=self._is_known)
        except SkillLoadError as exc:
            self.errors.append(exc)
            return
        folders = self._ambiguous.get(skill.name)
        existing = self._skills.pop(skill.name, None)
        if existing is not None:  # the second folder of a name: neither is used
            folders = self._ambiguous[skill.name] = [existing.folder]
        if folders is not None:
            others = ", ".join(repr(str(f)) for f in folders)
            folders.append(skill.folder)
            self.errors.append(SkillLoadError(
                f"duplicate skill {skill.name!r}: also in {others}; none of them is used until "
                "all but one are renamed",
                path=str(skill.file), field="name",
            ))
            return
        self._skills[skill.name] = skill

    def validate(self, path: str | os.PathLike[str], *, run_tree: bool = False) -> Skill:
        """Load one skill folder (or SKILL.md) with this catalog's tool names, strictly.

        A bt skill's tree module is parsed, never run, unless ``run_tree``: then it is imported
        and, when every input has a default, its tree built as a run would (the skill's Python
        runs here, outside any sandbox: the operator's say, not a look's).

        Raises:
            SkillLoadError: naming the file, the line and the field that is wrong.
        """
        skill = load_skill(Path(path), is_known_tool=self._is_known)
        if skill.is_bt and run_tree:
            loader = SkillTreeLoader()
            loader.load_module(skill)
            _try_build(skill, loader, self._custom_tools)
        return skill

    def get(self, name: str) -> Skill:
        """The skill called ``name``.

        Raises:
            SkillNotFoundError: no such skill, or more than one folder holds it; the message
                lists the known ones and any load error of a folder of that name.
        """
        found = self._skills.get(name)
        if found is not None:
            return found
        folders = self._ambiguous.get(name)
        if folders is not None:
            raise SkillNotFoundError(
                f"skill {name!r} is in more than one folder: "
                f"{', '.join(repr(str(f)) for f in folders)}; rename all but one (or leave "
                "their folders out of the skills paths) to choose which runs")
        broken = [e for e in self.errors if e.path and Path(e.path).parent.name == name]
        if broken:
            raise SkillNotFoundError(f"skill {name!r} failed to load: {broken[0]}")
        close = difflib.get_close_matches(name, list(self._skills), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        known = ", ".join(self._skills) or "none"
        raise SkillNotFoundError(f"no skill named {name!r}{hint} (known skills: {known})")

    def names(self) -> list[str]:
        """Names of the loaded skills, in scan order."""
        return list(self._skills)

    def skills(self) -> list[Skill]:
        """The loaded skills, in scan order."""
        return list(self._skills.values())

    def __iter__(self) -> Iterator[Skill]:
        return iter(list(self._skills.values()))

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._skills

    def __repr__(self) -> str:
        return f"SkillCatalog({self.names()!r}, errors={len(self.errors)})"
