"""A loaded skill's own folder, as the skill tools reach it: pinned, confined, read-only.

The folder was pinned when the skill was loaded (`Skill.pinned`, a `PinnedFolder`: one
descriptor, opened without following a link), and every path is reached from it: relative to
the folder, without ``..`` or ``~``; a symbolic link inside is followed only while it stays
inside; each component is opened with ``O_NOFOLLOW``, so a folder on the way swapped for a
link after the check makes the open fail instead of leaving the folder.

The folder itself may sit in the workspace, where sandboxed code can replace it with a link
(to ``/``, say), before or after a tool first sees it: the descriptor still holds the folder
the skill was loaded from, so a swap changes nothing.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jianmu.errors import PathEscapeError, ToolExecutionError, ToolInputError
from jianmu.skills.skill import Skill

__all__ = ("SkillFile", "SkillFiles", "SkillLookup")

SkillLookup = Callable[[], Mapping[str, Skill]]
"""The skills loaded right now, by name."""

_SHOWN_FILES = 40


@dataclass(frozen=True, kw_only=True)
class SkillFile:
    """A file of a skill's folder, checked: where it really is and how it is named."""

    skill: Skill
    rel: str
    """The file's real path relative to the skill's folder (links inside followed),
    ``/``-separated."""

    @property
    def root(self) -> str:
        """The real path of the skill's folder when it was pinned (for messages)."""
        return self.skill.pinned.path

    def open(self) -> tuple[int, os.stat_result]:
        """Open the file for reading from the pinned folder; a regular file only.

        Raises:
            PathEscapeError: a folder on the way became a symbolic link meanwhile.
            ToolExecutionError: missing, a folder, not a regular file, or unreadable.
        """
        try:
            # O_NONBLOCK: a FIFO must not block the open; it is refused just below
            fd = self.skill.pinned.open(self.rel, os.O_RDONLY | os.O_NONBLOCK)
        except PathEscapeError:
            raise PathEscapeError(
                f"{self.rel!r} in skill {self.skill.name!r} became a symbolic link while "
                "being opened"
            ) from None
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
    """The folders of the skills a lookup gives, each reached through its pinned descriptor.

    Args:
        skills: The skills loaded right now, by name; only these are reachable.
    """

    def __init__(self, skills: SkillLookup) -> None:
        self._skills = skills

    def skill(self, name: str) -> Skill:
        """The loaded skill called ``name``.

        Raises:
            ToolInputError: no skill of that name is loaded; the message names the loaded ones.
        """
        loaded = self._skills()
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
            ToolExecutionError: ``path`` leads to the folder itself, or does not exist.
        """
        skill = self.skill(name)
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
        try:
            rel = skill.pinned.resolve(path)
        except PathEscapeError:
            raise PathEscapeError(
                f"path {path!r} leads through a symbolic link outside the folder of skill "
                f"{name!r}; only files inside the skill's folder can be reached"
            ) from None
        except OSError:
            rel = path  # missing: `SkillFile.open` says so, with the skill's files
        if not rel:
            raise ToolExecutionError(f"{path!r} is the folder of skill {name!r}; {_listing(skill)}")
        return SkillFile(skill=skill, rel=rel)


def _listing(skill: Skill) -> str:
    """The skill's files, for an error the model can act on."""
    try:
        files = skill.resources()
    except OSError:
        files = []
    shown = ", ".join(["SKILL.md", *files[:_SHOWN_FILES]])
    more = f" and {len(files) - _SHOWN_FILES} more" if len(files) > _SHOWN_FILES else ""
    return f"the files of skill {skill.name!r}: {shown}{more}"
