"""A loaded skill's own folder, as the skill tools reach it: confined, symlinks refused.

The checks are the workspace tools' (`jianmu.tools.builtin._paths`), with the skill's folder as
the root: a path is relative to the folder, without ``..`` or ``~``; its real location (every
symlink followed) must be inside the folder; the file is then opened from ``/`` one component
at a time with ``O_NOFOLLOW``, so a folder on the way swapped for a link after the check makes
the open fail instead of leaving the folder.

The folder itself may sit in the workspace, where sandboxed code can replace it with a link
(to ``/``, say). So its real path is fixed the first time these tools see the skill loaded
(when the tools are made, and at every call for every skill loaded then) and never resolved
again, and it must hold a SKILL.md: a swap after that point cannot move the root.
"""

from __future__ import annotations

import errno
import os
import stat
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jianmu.errors import PathEscapeError, ToolExecutionError, ToolInputError
from jianmu.execution.workspace import is_inside
from jianmu.skills.loader import SKILL_FILE
from jianmu.skills.skill import Skill
from jianmu.tools.builtin._paths import open_beneath

__all__ = ("SkillFile", "SkillFiles", "SkillLookup")

SkillLookup = Callable[[], Mapping[str, Skill]]
"""The skills loaded right now, by name."""

_SHOWN_FILES = 40


@dataclass(frozen=True, kw_only=True)
class SkillFile:
    """A file of a skill's folder, checked: where it really is and how it is named."""

    skill: Skill
    root: str
    """The real path of the skill's folder, as first seen."""
    real: str
    """The file's real path, inside `root`."""
    rel: str
    """The file's path relative to `root`, ``/``-separated."""

    def open(self) -> tuple[int, os.stat_result]:
        """Open the file for reading without following any symlink; a regular file only.

        Raises:
            PathEscapeError: a folder on the way became a symbolic link meanwhile.
            ToolExecutionError: missing, a folder, not a regular file, or unreadable.
        """
        try:
            # O_NONBLOCK: a FIFO must not block the open; it is refused just below
            fd = open_beneath(self.real, "/", os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise self._error(exc) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise ToolExecutionError(f"{self.rel!r} in skill {self.skill.name!r} is {kind}")
        return fd, st

    def _error(self, exc: OSError) -> Exception:
        where = f"{self.rel!r} in skill {self.skill.name!r}"
        if exc.errno == errno.ELOOP:
            return PathEscapeError(f"{where} became a symbolic link while being opened")
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return ToolExecutionError(f"{where} does not exist; {_listing(self.skill)}")
        if exc.errno == errno.EISDIR:
            return ToolExecutionError(f"{where} is a folder; {_listing(self.skill)}")
        return ToolExecutionError(f"cannot open {where}: {exc.strerror or exc}")


class SkillFiles:
    """The folders of the skills a lookup gives, each pinned to its real path when first seen.

    Args:
        skills: The skills loaded right now, by name; only these are reachable.
    """

    def __init__(self, skills: SkillLookup) -> None:
        self._skills = skills
        self._roots: weakref.WeakKeyDictionary[Skill, str] = weakref.WeakKeyDictionary()
        self.pin()

    def pin(self) -> None:
        """Fix the real folder of every skill loaded now that has none yet (each call does)."""
        for skill in self._skills().values():
            self._pinned(skill)

    def skill(self, name: str) -> Skill:
        """The loaded skill called ``name``.

        Raises:
            ToolInputError: no skill of that name is loaded; the message names the loaded ones.
        """
        loaded = self._skills()
        for skill in loaded.values():  # every skill loaded now is pinned as soon as possible
            self._pinned(skill)
        found = loaded.get(name) if isinstance(name, str) else None
        if found is None:
            names = ", ".join(repr(n) for n in sorted(loaded)) or "none"
            raise ToolInputError(
                f"no loaded skill is called {name!r}; loaded skills: {names} "
                "(load a skill before reaching its files)"
            )
        return found

    def locate(self, name: str, path: str) -> SkillFile:
        """Check ``path`` (relative to the folder of skill ``name``) and say where it leads.

        Raises:
            ToolInputError: unknown skill, or ``path`` empty or not a string.
            PathEscapeError: ``path`` is absolute, uses ``~`` or ``..``, or its real location
                (through a symlink) is outside the skill's folder.
        """
        skill = self.skill(name)
        root = self._root(skill)
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise ToolInputError(
                f"path {path!r} must name a file of skill {name!r}, relative to its folder "
                "(for example 'references/guide.md')"
            )
        parts = path.replace("\\", "/").split("/")
        if os.path.isabs(path) or path.startswith("~") or ".." in parts:
            raise PathEscapeError(
                f"path {path!r} leads outside the folder of skill {name!r}; give a path "
                "relative to the skill's folder without '..' (for example 'scripts/run.py')"
            )
        real = os.path.realpath(os.path.join(root, path))
        if real == root:
            raise ToolExecutionError(f"{path!r} is the folder of skill {name!r}; {_listing(skill)}")
        if not is_inside(real, root):
            raise PathEscapeError(
                f"path {path!r} leads through a symbolic link outside the folder of skill "
                f"{name!r}; only files inside the skill's folder can be reached"
            )
        rel = os.path.relpath(real, root).replace(os.sep, "/")
        return SkillFile(skill=skill, root=root, real=real, rel=rel)

    def _pinned(self, skill: Skill) -> str:
        root = self._roots.get(skill)
        if root is None:
            root = self._roots[skill] = os.path.realpath(skill.folder)
        return root

    def _root(self, skill: Skill) -> str:
        root = self._pinned(skill)
        if not os.path.isfile(os.path.join(root, SKILL_FILE)):
            # the folder was replaced (by a link, say) before we first saw it
            raise ToolExecutionError(
                f"the folder of skill {skill.name!r} ({root!r}) no longer holds its "
                f"{SKILL_FILE}; its files cannot be reached"
            )
        return root


def _listing(skill: Skill) -> str:
    """The skill's files, for an error the model can act on."""
    try:
        files = skill.resources()
    except OSError:
        files = []
    shown = ", ".join([SKILL_FILE, *files[:_SHOWN_FILES]])
    more = f" and {len(files) - _SHOWN_FILES} more" if len(files) > _SHOWN_FILES else ""
    return f"the files of skill {skill.name!r}: {shown}{more}"
