"""The `Sandbox` protocol: where code and commands from tools run, and what every sandbox shares.

`BaseSandbox` checks each call once (`ExecCall`); the built-in sandboxes build their
`ExecResult` from capped output (`CappedBuffer`, `exec_result`) and give every command git's
safe environment (`safe_git_env`). `FakeSandbox` answers calls from a handler, for tests.

One capability is optional: mounting host folders read-only for one command
(`MountingSandbox`, ``exec(..., ro_mounts={host_folder: "/skills/name"})``). A sandbox that
offers it sets ``read_only_mounts = True``; `can_mount_read_only` tells a caller whether it may
ask. Third-party sandboxes need not implement it. A mount's host folder is reached without
following symlinks (`open_real_dir`): it may sit in the workspace, which sandboxed code can
change, and a folder swapped for a link to ``/root`` between the caller's check and the mount
must not show ``/root`` to the command. So the folder is reached from ``/`` one component at a
time, each opened with ``O_NOFOLLOW`` (a real path has no link on its way: a link found there
was swapped in), and what a sandbox mounts or copies is that descriptor, never the path again.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import os
import re
import shlex
import site
import stat
import sys
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol, Self, TypeGuard, runtime_checkable

from jianmu.errors import SandboxError, SandboxUnavailableError

__all__ = (
    "DEFAULT_OUTPUT_LIMIT",
    "GIT_OVERRIDES",
    "MOUNT_ROOT",
    "BaseSandbox",
    "CappedBuffer",
    "ExecCall",
    "ExecResult",
    "FakeSandbox",
    "LoopLock",
    "MountingSandbox",
    "Sandbox",
    "can_mount_read_only",
    "engine_paths_in",
    "exec_result",
    "open_mount_source",
    "open_real_dir",
    "safe_git_env",
)

MOUNT_ROOT = "/skills"
"""The sandbox folder under which read-only mounts appear, one level deep: ``/skills/<name>``."""
_MOUNT_NAME = re.compile(r"^\w[\w.-]{0,127}$")

MountSource = str | int
"""A read-only mount's host side: a folder's absolute path (reached without following a link),
or an open descriptor of a folder pinned earlier (used as it is, whatever its path is now)."""


@dataclass(frozen=True, kw_only=True)
class ExecResult:
    """The outcome of one command in a sandbox."""

    exit_code: int
    """The process's exit status; negative for a signal, as `subprocess` reports it."""
    stdout: str = ""
    """Standard output, decoded as UTF-8 with replacement and cut to the sandbox's limit."""
    stderr: str = ""
    """Standard error, likewise."""
    timed_out: bool = False
    """Whether the command was killed at its timeout."""
    duration: float = 0.0
    """Wall time in seconds."""
    oom_killed: bool = False
    """Whether the command was killed for going past its memory limit."""
    truncated: bool = False
    """Whether stdout or stderr was cut."""

    @property
    def ok(self) -> bool:
        """Exit code zero and no timeout."""
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True, kw_only=True)
class ExecCall:
    """One `Sandbox.exec` call, checked: what a `BaseSandbox` hands to `run`."""

    argv: list[str]
    """The command as argv (a shell string becomes ``/bin/sh -c``)."""
    stdin: bytes | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "."
    """The working folder, relative to the workspace, without ``..``."""
    timeout: float | None = None
    """As the caller gave it; `timeout_or` applies the sandbox's default."""
    ro_mounts: dict[MountSource, str] = field(default_factory=dict)
    """Host folder (absolute, no symlink on the way, or a folder's descriptor) -> where the
    command sees it read-only (``/skills/<name>``); empty unless the sandbox offers
    `MountingSandbox`."""

    def timeout_or(self, default: float) -> float:
        """The call's timeout, or ``default`` when it set none.

        Raises:
            ValueError: the timeout is not positive.
        """
        timeout = default if self.timeout is None else self.timeout
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        return timeout


@runtime_checkable
class Sandbox(Protocol):
    """Runs commands in isolation. ``exec`` is the one working method."""

    workspace: Path
    """The host folder that the sandboxed code sees as its working directory."""

    async def start(self) -> None:
        """Prepare the sandbox (a container, a folder); idempotent."""
        ...

    async def exec(
        self,
        command: Sequence[str] | str,  # an argv list, or a shell string for /bin/sh -c
        *,
        stdin: str | bytes | None = None,  # fed to the command, then closed
        env: Mapping[str, str] | None = None,  # added to the sandbox's own variables
        cwd: str | None = None,  # relative to the workspace, without ".."
        timeout: float | None = None,  # seconds; None: the sandbox's default
    ) -> ExecResult:
        """Run ``command`` (an argv list, or a shell string) and wait for it.

        ``cwd`` is relative to the workspace. On timeout the whole process group is killed
        and ``timed_out`` is set; the call returns, it does not raise. When the command's main
        process exits, whatever it left running in the background is killed too. Cancelling
        the call kills the command.
        """
        ...

    async def close(self) -> None:
        """Release everything the sandbox holds; idempotent."""
        ...


@runtime_checkable
class MountingSandbox(Sandbox, Protocol):
    """A `Sandbox` that can show host folders to one command, read-only (optional)."""

    read_only_mounts: bool
    """Whether ``exec`` accepts ``ro_mounts`` here (it may depend on the machine)."""

    async def exec(
        self,
        command: Sequence[str] | str,  # as in Sandbox.exec
        *,
        stdin: str | bytes | None = None,  # as in Sandbox.exec
        env: Mapping[str, str] | None = None,  # as in Sandbox.exec
        cwd: str | None = None,  # as in Sandbox.exec
        timeout: float | None = None,  # as in Sandbox.exec
        ro_mounts: Mapping[str | os.PathLike[str] | int, str] | None = None,  # host -> /skills/x
    ) -> ExecResult:
        """`Sandbox.exec`, with each host folder of ``ro_mounts`` visible read-only at its
        value (``/skills/<name>``) while the command runs.

        A host folder given by path is reached without following any symlink on its way
        (give its real path): a folder swapped for a link after the caller checked it is
        refused. One given by descriptor (an ``int``, a folder pinned earlier) is the folder
        that descriptor holds.
        """
        ...


def can_mount_read_only(sandbox: object) -> TypeGuard[MountingSandbox]:
    """Whether ``sandbox`` offers read-only mounts (`MountingSandbox`) on this machine."""
    return getattr(sandbox, "read_only_mounts", False) is True


class BaseSandbox(ABC):
    """A `Sandbox` whose `exec` checks the call once and hands it to `run`.

    Subclasses implement `run`; `start` and `close` do nothing unless overridden, and the
    sandbox is an async context manager that starts and closes it. A subclass whose `run`
    honours `ExecCall.ro_mounts` sets `read_only_mounts` (then it is a `MountingSandbox`).

    Args:
        workspace: The host folder commands work in; default: cwd.
    """

    def __init__(self, workspace: str | os.PathLike[str] | None = None) -> None:
        self.workspace = Path(workspace if workspace is not None else Path.cwd()).absolute()

    read_only_mounts: bool = False
    """Whether `run` honours `ExecCall.ro_mounts`; `exec` refuses them otherwise."""

    @staticmethod
    def check_positive(**limits: float | None) -> None:
        """Refuse a limit that is set but not positive.

        Raises:
            ValueError: naming the first such limit.
        """
        for label, value in limits.items():
            if value is not None and value <= 0:
                raise ValueError(f"{label} must be positive, got {value!r}")

    async def start(self) -> None:
        """Prepare the sandbox; idempotent. Does nothing here."""
        return None

    async def close(self) -> None:
        """Release what the sandbox holds; idempotent. Does nothing here."""
        return None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        stdin: str | bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        ro_mounts: Mapping[str | os.PathLike[str] | int, str] | None = None,
    ) -> ExecResult:
        """Run ``command`` and wait for it; see `Sandbox.exec` and `MountingSandbox.exec`.

        Raises:
            ValueError: an empty command, a bad argv item, ``cwd`` absolute or with ``..``,
                or a mount that is not ``absolute host folder -> /skills/<name>``.
            SandboxUnavailableError: ``ro_mounts`` given to a sandbox without
                `read_only_mounts`.
        """
        mounts = _checked_mounts(ro_mounts or {})
        if mounts and not self.read_only_mounts:
            raise SandboxUnavailableError(
                f"{type(self).__name__} cannot mount folders read-only here; use a sandbox "
                "that can (LocalSandbox with bubblewrap, DockerSandbox)"
            )
        call = ExecCall(
            argv=_normalise_argv(command),
            stdin=stdin.encode() if isinstance(stdin, str) else stdin,
            env=dict(env or {}), cwd=str(_relative_cwd(cwd)), timeout=timeout,
            ro_mounts=mounts,
        )
        return await self.run(call)

    @abstractmethod
    async def run(self, call: ExecCall) -> ExecResult:
        """Run one checked call; called by `exec`, never with an unchecked command."""


class LoopLock:
    """An `asyncio.Lock` for an object that outlives event loops (a sandbox kept between runs,
    each ``run_sync`` on a loop of its own): a fresh lock for each loop that takes it.

    An `asyncio.Lock` belongs to the first loop that waits for it and refuses any other.
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _current(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._lock.locked():
                raise RuntimeError("the lock is held by a task of another event loop")
            self._lock, self._loop = asyncio.Lock(), loop
        return self._lock

    def locked(self) -> bool:
        """Whether a task holds it."""
        return self._lock.locked()

    async def __aenter__(self) -> None:
        await self._current().acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()


def _normalise_argv(command: Sequence[str] | str) -> list[str]:
    """Turn a shell string into ``/bin/sh -c`` argv; check an argv list.

    Raises:
        ValueError: the command is empty or an argv item is not a string.
    """
    if isinstance(command, str):
        if not command.strip():
            raise ValueError("command is an empty string; pass a shell command or an argv list")
        return ["/bin/sh", "-c", command]
    argv = list(command)
    if not argv:
        raise ValueError("command is an empty list; pass at least the program to run")
    bad = [a for a in argv if not isinstance(a, str)]
    if bad:
        raise ValueError(f"every argv item must be a string, got {bad[0]!r} in {argv!r}")
    return argv


def _relative_cwd(cwd: str | None) -> PurePosixPath:
    """Check that ``cwd`` stays inside the workspace and return it as a relative path.

    Raises:
        ValueError: ``cwd`` is absolute or climbs out with ``..``.
    """
    if cwd is None or cwd in ("", "."):
        return PurePosixPath(".")
    path = PurePosixPath(cwd)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(
            f"cwd {cwd!r} must be a path relative to the workspace without '..' "
            f"(for example 'src' or {shlex.quote('sub dir')})"
        )
    return path


def _checked_mounts(
    mounts: Mapping[str | os.PathLike[str] | int, str],
) -> dict[MountSource, str]:
    """``{host: target}``, each host an absolute path (a string) or a folder's descriptor,
    each target ``/skills/<name>``.

    Raises:
        ValueError: naming the first mount that breaks the rule.
    """
    checked: dict[MountSource, str] = {}
    for host, target in mounts.items():
        source: MountSource
        if isinstance(host, int) and not isinstance(host, bool):
            source = host
            try:
                is_dir = stat.S_ISDIR(os.fstat(host).st_mode)
            except OSError:
                is_dir = False
            if not is_dir:
                raise ValueError(f"mount source {host!r} is not a descriptor of a folder")
        else:
            source = os.fspath(host)  # type: ignore[arg-type]
            if not os.path.isabs(source) or "\x00" in source or ".." in source.split("/"):
                raise ValueError(
                    f"mount source {source!r} must be an absolute host folder without '..'"
                )
            source = os.path.normpath(source)
        parent, _, name = str(target).rpartition("/")
        if parent != MOUNT_ROOT or not _MOUNT_NAME.match(name):
            raise ValueError(
                f"mount target {target!r} must be {MOUNT_ROOT}/<name> (letters, digits, "
                "'.', '_', '-'), for example '/skills/pdf'"
            )
        if target in checked.values():
            raise ValueError(f"mount target {target!r} is given twice")
        checked[source] = target
    return checked


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_real_dir(path: str) -> int:
    """A descriptor of the folder ``path``, reached from ``/`` without following a symlink.

    Raises:
        SandboxError: a component is a symbolic link, missing, or not a folder.
    """
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    name = "/"
    try:
        for name in (part for part in path.split("/") if part and part != "."):
            child = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError as exc:
        os.close(fd)
        raise SandboxError(
            f"cannot mount {path!r}: {name!r} on the way is {_why(exc)}; give the real path "
            "of an existing folder (a symbolic link on the way is refused)"
        ) from None
    return fd


def open_mount_source(source: str | int) -> int:
    """A new descriptor of a mount's host folder: a duplicate of a given descriptor (a folder
    pinned earlier), or the path reached with `open_real_dir`.

    Raises:
        SandboxError: see `open_real_dir`.
    """
    return os.dup(source) if isinstance(source, int) else open_real_dir(source)


def _why(exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW | O_DIRECTORY on a link
        return "a symbolic link or not a folder"
    return exc.strerror or str(exc)


DEFAULT_OUTPUT_LIMIT = 256 * 1024
"""Bytes kept of each of stdout and stderr; the rest is counted and dropped."""


class CappedBuffer:
    """Keeps the first ``limit`` bytes written to it and counts the rest."""

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"output limit must be a positive number of bytes, got {limit!r}")
        self.limit = limit
        self._chunks: list[bytes] = []
        self._kept = 0
        self.dropped = 0

    def write(self, data: bytes) -> None:
        """Append ``data``, keeping what fits under the limit."""
        room = self.limit - self._kept
        if room > 0:
            head = data[:room]
            self._chunks.append(head)
            self._kept += len(head)
        self.dropped += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        """The kept bytes decoded as UTF-8, with a note of how much was cut."""
        text = b"".join(self._chunks).decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n…[truncated by the sandbox: {self.dropped} more bytes]"
        return text


def exec_result(
    *, exit_code: int, out: CappedBuffer, err: CappedBuffer, duration: float,
    timed_out: bool, timeout: float, oom: bool, memory_mb: int | None,
) -> ExecResult:
    """The result of one command, with a note on stderr of why the sandbox killed it."""
    stderr = err.text()
    notes = []
    if timed_out:
        notes.append(f"killed at its timeout of {timeout:g} s")
    if oom:
        notes.append(f"killed for going past its memory limit of {memory_mb} MiB")
    if notes:
        stderr += ("\n" if stderr and not stderr.endswith("\n") else "") + "".join(
            f"[jianmu sandbox: {n}]\n" for n in notes
        )
    return ExecResult(
        exit_code=exit_code, stdout=out.text(), stderr=stderr, timed_out=timed_out,
        duration=duration, oom_killed=oom, truncated=bool(out.dropped or err.dropped),
    )


# A plain unified diff from diff(1), called the way git calls an external diff
# (path old-file old-hex old-mode new-file new-hex new-mode): it replaces any diff.external.
_PLAIN_DIFF = (
    'f() { echo "diff --git a/$1 b/$1"; diff -u --label "a/$1" --label "b/$1" "$2" "$5"; '
    '[ $? -le 1 ]; }; f'
)

GIT_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("safe.bareRepository", "explicit"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.sshCommand", "ssh"),
    ("core.askPass", ""),
    ("credential.helper", ""),  # an empty value resets the list of helpers
    ("diff.external", _PLAIN_DIFF),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gpg.program", "gpg"),
    ("gpg.ssh.program", "ssh-keygen"),
    ("gpg.x509.program", "gpgsm"),
    ("protocol.ext.allow", "never"),
    ("core.attributesFile", "/dev/null"),
)
"""``(key, value)`` pairs given to git with command-line precedence."""


def engine_paths_in(workspace: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """This engine's Python install inside ``workspace``: ``(host folder, path relative to the
    workspace)`` for each of its prefixes and ``site-packages`` folders found there.

    A project's ``.venv`` is often both the workspace's and the one Jianmu runs from: writable
    inside the sandbox, a command could rewrite a module the engine imports later (or drop a
    ``.pth`` file its next start runs), code run outside the sandbox. Sandboxes show these
    folders read-only.
    """
    root = os.path.realpath(workspace)
    folders = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
               *getattr(site, "getsitepackages", list)()]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    found: list[str] = []
    for folder in sorted({os.path.realpath(f) for f in folders if f}):
        if folder == root or not folder.startswith(root + os.sep) or not os.path.isdir(folder):
            continue
        if not any(folder.startswith(kept + os.sep) for kept in found):  # one bind covers it
            found.append(folder)
    return [(folder, os.path.relpath(folder, root)) for folder in found]


def safe_git_env() -> dict[str, str]:
    """The variables that make git ignore the code-running settings of any config file.

    Every sandboxed command gets them, last (no caller turns them back on). An allow rule such
    as ``bash(git status*): allow`` is not a code-execution boundary (the sandbox is), but git
    should not run code that a workspace file chose. A repository config the model wrote (a
    bare repository outside ``.git/``, or ``.git/config``) can name commands that git runs:
    ``core.fsmonitor``, hooks, pagers, editors, ``core.sshCommand``, ``diff.external``, signing
    programs, credential helpers. Settings passed through ``GIT_CONFIG_COUNT`` have command-line
    scope and win over every config file, and ``safe.bareRepository=explicit`` makes git refuse
    a bare repository it merely discovered. Not covered: drivers the repository names itself
    (``filter.<name>.clean``, ``diff.<name>.textconv``, ``merge.<name>.driver`` with a
    ``.gitattributes`` line), whose names cannot be listed in advance; such code still runs
    inside the sandbox, without network, root or leftovers.
    """
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",  # wins over core.pager and pager.<command>
        "PAGER": "cat",
        "GIT_EDITOR": "true",
        "GIT_SEQUENCE_EDITOR": "true",
        "GIT_ASKPASS": "true",
        "GIT_CONFIG_COUNT": str(len(GIT_OVERRIDES)),
    }
    for index, (key, value) in enumerate(GIT_OVERRIDES):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


Handler = Callable[[ExecCall], ExecResult | Awaitable[ExecResult]]


class FakeSandbox(BaseSandbox):
    """Answers every `exec` with ``handler(call)``; records calls; runs nothing.

    Read-only mounts are accepted and recorded in `ExecCall.ro_mounts` (nothing is mounted).

    Args:
        handler: Returns (or awaits to) the `ExecResult` for a call.
        workspace: The folder it claims as its workspace; default: cwd.
        read_only_mounts: Whether it offers `MountingSandbox`; ``False`` plays a sandbox that
            does not.
    """

    def __init__(
        self, handler: Handler, *, workspace: str | os.PathLike[str] | None = None,
        read_only_mounts: bool = True,
    ) -> None:
        super().__init__(workspace)
        self.handler = handler
        self.read_only_mounts = read_only_mounts
        self.calls: list[ExecCall] = []
        self.started = self.closed = False

    async def start(self) -> None:
        """Mark the sandbox started."""
        self.started = True

    async def close(self) -> None:
        """Mark the sandbox closed."""
        self.closed = True

    async def run(self, call: ExecCall) -> ExecResult:
        """Record the call and return the handler's result."""
        self.calls.append(call)
        result = self.handler(call)
        if inspect.isawaitable(result):
            result = await result
        return result
