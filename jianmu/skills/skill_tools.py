"""The tools that reach a loaded skill's own folder: `read_skill_file`, `run_skill_script`, and
the `bash` of a skill node, which sees the loaded skills' folders read-only.

A skill's body names its files relative to its folder ("see `references/checklist.md`", "run
`python scripts/with_server.py --help`"); the workspace tools cannot reach them. These tools
take the skill's name and such a path. Only skills that the lookup returns (those loaded
right now) are reachable, and every path is confined to the skill's folder (`SkillFiles`).

``run_skill_script`` runs the file inside the run's sandbox with the skill's folder (the one
pinned when the skill was loaded, by its descriptor) mounted read-only at ``/skills/<name>``
(`jianmu.execution.MountingSandbox`) and the workspace as its working folder; a sandbox
without read-only mounts cannot run skill scripts.

A `SkillNode`'s ``bash`` (`SkillBashTool`) is the built-in ``bash``, under the same name and the
same guard, whose commands also see every loaded skill's folder read-only at the same
``/skills/<name>``: a skill whose instructions say "run ``python scripts/x.py``" works when the
model runs ``python /skills/<name>/scripts/x.py``, as `load_skill` tells it to.

A skill's folder, as these tools reach it (`SkillFiles`), is pinned, confined and read-only.
It was pinned when the skill was loaded (`Skill.pinned`, a `PinnedFolder`: one
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
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import anyio.to_thread
from pydantic import Field

from jianmu.errors import PathEscapeError, ToolExecutionError, ToolInputError
from jianmu.execution.sandbox import can_mount_read_only
from jianmu.skills.skill import Skill, find_named, first_undecodable
from jianmu.tools.base import FunctionTool
from jianmu.tools.builtin.bash import BashTool, SandboxedTool, exec_output, is_local_sandbox
from jianmu.tools.builtin.files import read_lines

if TYPE_CHECKING:
    from jianmu.execution.sandbox import Sandbox

__all__ = (
    "ReadSkillFileTool",
    "RunSkillScriptTool",
    "SkillBashTool",
    "SkillFile",
    "SkillFiles",
    "SkillLookup",
    "skill_env",
)


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
        found = find_named(loaded, name)  # 'PDF' or ' pdf' as a model may write it
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
            inside = path.removeprefix(f"{skill.base_dir}/")
            # where load_skill says the folder is (bash sees it there): say what to give instead
            example = inside if inside != path and ".." not in parts else "scripts/run.py"
            raise PathEscapeError(
                f"path {path!r} leads outside the folder of skill {name!r}; give a path "
                f"relative to the skill's folder without '..' (for example {example!r})"
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


_SNIFF = 8192


class ReadSkillFileTool(FunctionTool):
    """``read_skill_file``: read a file of a loaded skill's folder (category ``read``).

    Args:
        skills: The skills loaded right now, by name; only their folders can be read.
    """

    def __init__(self, skills: SkillLookup) -> None:
        self.files = SkillFiles(skills)
        super().__init__(
            self._read, name="read_skill_file", category="read", effect_tags=("file_read",),
            timeout_seconds=30.0, max_result_length=50_000,
        )

    def _read(
        self,
        skill: str,
        path: str,
        offset: Annotated[int, Field(ge=1)] | None = None,
        limit: Annotated[int, Field(ge=1, le=5000)] | None = None,
    ) -> str:
        """Read a file of a loaded skill's folder, such as a reference its instructions name.

        Use it when a skill's instructions point to one of its own files (for example
        'references/checklist.md' or 'examples/report.md'); read_file reads the workspace,
        not the skill. Returns the lines' text; when the file has more lines, a final note
        says which lines were shown and the offset to continue from. A binary file is
        answered with its size only.

        Args:
            skill: The name of a loaded skill.
            path: Path relative to the skill's folder, e.g. 'references/guide.md'.
            offset: First line to read, counting from 1 (default 1).
            limit: Maximum number of lines to return (default 500).

        Returns:
            The requested lines of the file.
        """
        found = self.files.locate(skill, path)
        fd, st = found.open()
        try:
            head = os.pread(fd, _SNIFF, 0)
        except BaseException:
            os.close(fd)
            raise
        if _is_binary(head, complete=st.st_size <= _SNIFF):
            os.close(fd)
            if b"\x00" not in head:  # text in another encoding (Latin-1, say), not data
                line, byte = first_undecodable(head, final=st.st_size <= _SNIFF) or (1, 0)
                return (
                    f"[{found.rel} in skill {skill!r} is not UTF-8 text (byte 0x{byte:02x} on "
                    f"line {line}); its content is not shown: the skill's author should save "
                    "it as UTF-8]"
                )
            return (
                f"[{found.rel} in skill {skill!r} is a binary file of {st.st_size:,} bytes; "
                "its content is not shown]"
            )
        return read_lines(fd, found.rel, offset or 1, limit or 500)


def _is_binary(head: bytes, *, complete: bool) -> bool:
    """NUL bytes, or bytes that are not UTF-8 (a character cut at the sample's end is)."""
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return complete or exc.start < len(head) - 3
    return False


def skill_env(skill: Skill) -> dict[str, str]:
    """What a skill's script finds in its environment: where its folder is, no bytecode
    written (the folder is read-only)."""
    return {"PYTHONDONTWRITEBYTECODE": "1", "JIANMU_SKILL_DIR": skill.base_dir}


class RunSkillScriptTool(SandboxedTool):
    """``run_skill_script``: run a file of a loaded skill's folder in the run's sandbox.

    Category ``execute``, permission ``user_confirm`` (it asks first unless the operator's
    policy allows it). The limits, network and timeout are the sandbox's, which the runner
    builds from the merged constraints.

    Args:
        skills: The skills loaded right now, by name; only their scripts can run.
    """

    name = "run_skill_script"
    effect_tags = ("code_exec",)
    # the sandbox's timeout (the merged constraints') kills the script; none of our own
    timeout_seconds = None
    max_result_length = 30_000

    def __init__(self, skills: SkillLookup) -> None:
        self.files = SkillFiles(skills)

    async def run(
        self, skill: str, path: str, args: Sequence[str] = (), stdin: str | None = None
    ) -> str:
        """Run a script of a loaded skill's folder in the sandbox, in the workspace.

        Use it when a skill's instructions say to run one of its own scripts (for example
        'python scripts/check.py --help'): give the skill, the script's path in its folder
        and the arguments. A .py file runs with Python, a .sh file with the interpreter its
        #! line names (else sh), an executable file with a #! line directly. The skill's
        folder is read-only (the script sees it at /skills/<skill>); the working folder is
        the workspace. Returns stdout, then stderr under a [stderr] heading; a non-zero exit
        code is an error showing the code and the output.

        Args:
            skill: The name of a loaded skill.
            path: The script's path relative to the skill's folder, e.g. 'scripts/run.py'.
            args: Arguments passed to the script, e.g. ['--help'].
            stdin: Text fed to the script's standard input.

        Returns:
            The script's stdout and stderr.
        """
        return await self.run_in_default_sandbox(skill=skill, path=path, args=args, stdin=stdin)

    async def run_sandboxed(  # type: ignore[override]
        self, sandbox: Sandbox, skill: str, path: str, args: Sequence[str] = (),
        stdin: str | None = None,
    ) -> str:
        """Check the script, then run it through ``sandbox.exec`` with the folder mounted.

        Raises:
            ToolInputError: unknown skill, a bad path or argument.
            PathEscapeError: the path leads outside the skill's folder.
            ToolExecutionError: the file cannot be run, the sandbox cannot mount the folder
                read-only, or the script failed.
            ToolTimeoutError: the script ran past the sandbox's timeout.
        """
        found, head, executable = await anyio.to_thread.run_sync(self._inspect, skill, path)
        arguments = list(args)
        if any(not isinstance(a, str) or "\x00" in a for a in arguments):
            raise ToolInputError("args must be strings without NUL characters")
        if not can_mount_read_only(sandbox):
            raise ToolExecutionError(
                f"this sandbox ({type(sandbox).__name__}) cannot run skill scripts: it cannot "
                "show the skill's folder read-only; use LocalSandbox with bubblewrap 0.8+ or "
                "DockerSandbox (execution.mode: docker)"
            )
        mount = found.skill.base_dir
        script = f"{mount}/{found.rel}"
        result = await sandbox.exec(
            [*_interpreter(found, head, executable, sandbox), script, *arguments],
            stdin=stdin, env=skill_env(found.skill),
            # the folder pinned when the skill was loaded, by its descriptor: never its path
            ro_mounts={found.skill.pinned.fileno(): mount},
        )
        return exec_output(
            result, max(self.max_result_length // 2, 1000), what="script",
            timed_out="the script ran past the sandbox's timeout and was killed with every "
            "process it started; run something shorter, or ask for a longer "
            "execution.timeout_s",
        )

    def _inspect(self, skill: str, path: str) -> tuple[SkillFile, bytes, bool]:
        """The checked file, its first bytes and whether it is executable."""
        found = self.files.locate(skill, path)
        fd, st = found.open()
        try:
            head = os.pread(fd, 256, 0)
        finally:
            os.close(fd)
        return found, head, bool(st.st_mode & 0o111)


def _interpreter(
    found: SkillFile, head: bytes, executable: bool, sandbox: Sandbox
) -> list[str]:
    """What runs the script: Python, sh (or the .sh file's #! line), or nothing (it runs itself).

    Raises:
        ToolExecutionError: none of the three fits.
    """
    suffix = os.path.splitext(found.rel)[1].lower()
    if suffix == ".py":
        # this host's Python where the sandbox runs on it (bound read-only by bubblewrap)
        local = is_local_sandbox(sandbox)
        return [getattr(sandbox, "python", sys.executable) if local else "python3"]
    if suffix == ".sh":
        # as the kernel reads a #! line (the interpreter, then one argument): a #!/bin/bash
        # script's arrays and [[ ]] fail under /bin/sh, which is dash on Debian
        named = head[2:].split(b"\n", 1)[0].decode(errors="replace").split(None, 1)
        return named if head.startswith(b"#!") and named else ["/bin/sh"]
    if head.startswith(b"#!") and executable:
        return []
    what = "has a #! line but is not executable" if head.startswith(b"#!") else (
        "is not a .py or .sh file, nor an executable file with a #! line"
    )
    raise ToolExecutionError(
        f"cannot run {found.rel!r} of skill {found.skill.name!r}: it {what}; read it with "
        "read_skill_file to see how it is meant to be used"
    )


class SkillBashTool(BashTool):
    """``bash`` in a skill node: the built-in, whose commands also see each loaded skill's
    folder read-only at ``/skills/<name>`` (the folder pinned at load, by descriptor).

    Same name, schema and guard as ``bash`` (``allowed-tools: Bash(python:*)`` governs it
    alike). A sandbox that cannot mount read-only runs the command without the folders.

    Args:
        skills: The skills loaded right now, by name.
    """

    def __init__(self, skills: SkillLookup) -> None:
        self.skills = skills

    def read_only_mounts(self, sandbox: Sandbox) -> Mapping[str | int, str]:
        """Every loaded skill's pinned folder at its base directory, where the sandbox can."""
        if not can_mount_read_only(sandbox):
            return {}
        return {s.pinned.fileno(): s.base_dir for s in self.skills().values()}
