"""`ToolRunner`: runs tools under the execution constraints, in-process or through a sandbox,
in the workspace they are confined to; `RunnableTool`, what it needs of a tool.

Three things a call needs around its tool, here beside the runner that does them:

- the workspace root: a context variable (`use_workspace`, set by the `ToolRunner` from
  ``execution.workdir``; `effective_root` gives it for a configured workdir), and the one
  resolver of tool paths. Every place that turns a tool's path argument into a file — the file
  tools, the guard's path rules, the MCP server, a sandbox's ``cwd`` — goes through `locate` /
  `resolve_tool_path`, so they all agree on which file a path names;
- `within`: an in-process call cancelled into `ToolTimeoutError` at its deadline, with calls
  whose deadlines fall close together sharing one loop timer;
- the call itself, on the loop or on the worker pool, or through the sandbox, which is built
  only when a tool needs one.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import weakref
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Executor
from contextvars import Context, ContextVar, Token
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from jianmu import plugins
from jianmu.constraints import (
    DEFAULT_IMAGE,
    DEFAULT_READ_ONLY_PATHS,
    DEFAULT_TIMEOUT_S,
    ExecutionConstraints,
)
from jianmu.errors import PathEscapeError, ToolExecutionError, ToolInputError, ToolTimeoutError
from jianmu.execution.threads import CALLING, Calling, WorkerPool

if TYPE_CHECKING:
    from jianmu.execution.sandbox import Sandbox

__all__ = (
    "GRAIN_S",
    "RedirectCheck",
    "RunnableTool",
    "SandboxLife",
    "ToolPath",
    "ToolRunner",
    "current_workspace",
    "effective_root",
    "is_inside",
    "locate",
    "on_asyncio",
    "pinned_paths",
    "read_only_paths",
    "redirect_refusal",
    "repin_paths",
    "reset_redirect_check",
    "resolve_tool_path",
    "sandbox_life",
    "set_redirect_check",
    "use_workspace",
    "within",
)

T = TypeVar("T")


# -- the workspace ---------------------------------------------------------------------------

# None means "not set": the current folder, read at call time so `chdir` is honoured.
_WORKSPACE: ContextVar[Path | None] = ContextVar("jianmu_workspace", default=None)


def current_workspace() -> Path:
    """Return the workspace root for this context: the one set by `use_workspace`, else cwd."""
    root = _WORKSPACE.get()
    return root if root is not None else _cwd()


_READ_ONLY: ContextVar[tuple[str, ...] | None] = ContextVar("jianmu_read_only", default=None)


def read_only_paths() -> tuple[str, ...]:
    """The workspace paths no tool may change here (``execution.read_only_paths`` of the run
    making the call; `DEFAULT_READ_ONLY_PATHS` outside a run): what the host runs once
    changed, for the file tools as for sandboxed code."""
    paths = _READ_ONLY.get()
    return DEFAULT_READ_ONLY_PATHS if paths is None else paths


def effective_root(workdir: str | os.PathLike[str] | None = None) -> Path:
    """The absolute workspace root: ``workdir`` (``~`` expanded, relative to cwd) if given,
    else `current_workspace()`. Symlinks are kept; `locate` resolves them."""
    root = Path(workdir).expanduser() if workdir is not None else current_workspace()
    return root.absolute()


# -- redirects -------------------------------------------------------------------------------

RedirectCheck = Callable[[str, str], "str | None"]
"""``(argument, url) -> reason``: why the guard refuses the call with ``argument`` set to
``url`` (a redirect the tool was told to follow), or ``None``."""

class _Held:
    """A redirect check in the context variable, dropped when its call ends: a timer set
    during the call (a subprocess's, an HTTP client's) keeps a copy of the task's context
    until its deadline, and the check leads to the call's node and its whole run."""

    __slots__ = ("check",)

    def __init__(self, check: RedirectCheck | None) -> None:
        self.check = check


_REDIRECTS: ContextVar[_Held | None] = ContextVar("jianmu_redirects", default=None)


def redirect_refusal(argument: str, url: str) -> str | None:
    """Why the guard refuses that the running call follow a redirect to ``url`` (its argument
    ``argument`` then names ``url``), or ``None``: the rules that hold for the call's URL hold
    for every URL it is sent on to. ``None`` also outside a guarded call."""
    held = _REDIRECTS.get()
    check = None if held is None else held.check
    return None if check is None else check(argument, url)


def set_redirect_check(check: RedirectCheck | None) -> Token[_Held | None]:
    """Make ``check`` answer `redirect_refusal` in this task until `reset_redirect_check`
    (a bare pair, not a ``with``: it runs around every call)."""
    return _REDIRECTS.set(_Held(check))


def reset_redirect_check(token: Token[_Held | None]) -> None:
    """Undo the `set_redirect_check` that returned ``token``; copies of the context made
    meanwhile hold the check no more."""
    held = _REDIRECTS.get()
    if held is not None:
        held.check = None
    _REDIRECTS.reset(token)


@contextlib.contextmanager
def use_workspace(path: str | os.PathLike[str], *, check: bool = True) -> Iterator[Path]:
    """Make ``path`` the workspace root inside the ``with`` block (this task and its children).

    ``check=False`` skips the existence check, for a caller that made the folder itself (the
    `ToolRunner`, once, not on every call).

    Raises:
        ValueError: ``path`` is not an existing folder.
    """
    root = path if isinstance(path, Path) and not check else effective_root(path)
    if check and not root.is_dir():
        raise ValueError(f"workspace {str(path)!r} is not an existing folder; create it first")
    token = _WORKSPACE.set(root)
    try:
        yield root
    finally:
        _WORKSPACE.reset(token)


def set_workspace(root: Path) -> Token[Path | None]:
    """Make the absolute, existing ``root`` the workspace root until `reset_workspace`.

    The bare form of `use_workspace` for the `ToolRunner`'s per-call path (no generator).
    """
    return _WORKSPACE.set(root)


def reset_workspace(token: Token[Path | None]) -> None:
    """Undo the `set_workspace` that returned ``token``."""
    _WORKSPACE.reset(token)


class SandboxLife:
    """Stands for one life of a `ToolRunner`'s sandbox: from its start to the `release` or
    `close` that ends the run (a suspended run keeps it). What a sandboxed tool keeps for the
    calls of one run (`python_repl`'s session) is keyed by it, so the next run, or another
    `mcp serve` client, sharing the tool, starts afresh."""

    __slots__ = ("__weakref__",)


_LIFE: ContextVar[SandboxLife | None] = ContextVar("jianmu_sandbox_life", default=None)


def sandbox_life() -> SandboxLife | None:
    """The life of the sandbox this sandboxed call runs in, or ``None`` outside a
    `ToolRunner` (a tool's own default sandbox)."""
    return _LIFE.get()


_last_cwd: tuple[str, Path] = ("", Path())
"""The working folder seen last, as a string and a path (a path costs more than the read)."""


def _cwd() -> Path:
    """``Path.cwd()``, read now, without parsing the same folder into a path again."""
    global _last_cwd
    text = os.getcwd()
    if _last_cwd[0] != text:
        _last_cwd = (text, Path(text))
    return _last_cwd[1]


def is_inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (``/ws-evil`` is not below ``/ws``)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` with ``/`` separators ("." for the root itself)."""
    return os.path.relpath(path, root).replace(os.sep, "/")


@dataclass(frozen=True)
class ToolPath:
    """Where a tool's path argument leads, under one workspace root."""

    given: str
    """The path as the model wrote it."""
    base: str
    """The absolute workspace root as configured (it may be reached through a symlink)."""
    root: str
    """The real (symlink-free) workspace root."""
    lexical: str
    """The path joined to `base` and normalised, no symlink followed."""
    real: str
    """The path's real location: its existing part with every symlink followed."""

    @property
    def inside(self) -> bool:
        """Whether the real location is the root or below it."""
        return is_inside(self.real, self.root)

    @property
    def rel(self) -> str:
        """The real location relative to the real root ("." for the root itself)."""
        return _relative(self.real, self.root)

    def forms(self) -> tuple[str, str]:
        """The lexical and the real location, each relative to its root when inside it,
        else absolute: what a path rule is matched against."""
        lexical = self.lexical
        lexical = _relative(lexical, self.base) if is_inside(lexical, self.base) else lexical
        real = self.rel if self.inside else self.real
        return lexical.replace(os.sep, "/"), real.replace(os.sep, "/")


_PINNED: ContextVar[dict[tuple[str, str], str] | None] = ContextVar(
    "jianmu_pinned_paths", default=None
)


class pinned_paths:
    """Within the block, each path leads where it first led (`locate`): the guard checks a
    call's path, and the tool then opens the real location the guard saw (without following
    links), whatever a running command swaps in between (``docs/link`` pointed at
    ``../secrets/key`` after the check).

    A slotted class rather than a ``@contextmanager``: it is entered for every batch of calls,
    and a generator with its wrapper costs more there.
    """

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _PINNED.set({})

    def __exit__(self, *exc: object) -> None:
        _PINNED.reset(self._token)


def repin_paths() -> None:
    """Within `pinned_paths`, forget where paths led: an earlier call of the batch may have
    changed the workspace, so the guard checks the next calls again on what is there now, and
    their tools open that."""
    pins = _PINNED.get()
    if pins is not None:
        pins.clear()


def locate(path: str, root: str | os.PathLike[str] | None = None) -> ToolPath:
    """Where ``path`` leads from the workspace ``root`` (default `effective_root`), unchecked.

    Relative paths are taken from the root, absolute ones as they are; within `pinned_paths`,
    a path's real location is the one found first.

    Raises:
        OSError, ValueError: the path cannot be resolved (a symlink loop, a NUL character).
    """
    base = os.fspath(effective_root(root))
    real_root = os.path.realpath(base)
    candidate = os.path.join(base, path)  # an absolute path replaces the base
    pins = _PINNED.get()
    if pins is None:
        real = os.path.realpath(candidate)
    else:
        key = (real_root, os.path.normpath(os.path.join(real_root, path)))
        real = pins.get(key) or pins.setdefault(key, os.path.realpath(candidate))
    return ToolPath(
        given=path, base=base, root=real_root, lexical=os.path.normpath(candidate), real=real,
    )


def resolve_tool_path(path: str, root: str | os.PathLike[str] | None = None) -> ToolPath:
    """Resolve a tool's ``path`` argument and refuse it unless its real location is inside
    the workspace ``root`` (default `effective_root`). The path need not exist (for writes).

    Raises:
        ToolInputError: ``path`` is not a string, is empty or contains a NUL character.
        PathEscapeError: ``path`` leads outside the workspace (``..``, an absolute path, a
            symlink, or ``~``).
        ToolExecutionError: the workspace root is not an existing folder.
    """
    if not isinstance(path, str):
        raise ToolInputError(f"path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise ToolInputError(f"path {path!r} contains a NUL character")
    if not path.strip():
        raise ToolInputError("path is empty; give a path relative to the workspace root")
    if path.startswith("~"):
        # `~` is the user's home, which is outside the workspace; never expand it silently.
        raise PathEscapeError(
            f"path {path!r} refers to a home folder, outside the workspace; "
            "give a path relative to the workspace root"
        )
    where = locate(path, root)
    if not os.path.isdir(where.root):
        raise ToolExecutionError(f"workspace root {where.base!r} is not an existing folder")
    if not where.inside:
        how = "through a symbolic link, " if is_inside(where.lexical, where.base) else ""
        raise PathEscapeError(
            f"path {path!r} leads {how}outside the workspace {where.base!r}; give a path "
            "relative to the workspace root whose real location is inside it"
        )
    return where


# -- deadlines ------------------------------------------------------------------------------

GRAIN_S = 0.01
"""Deadlines are rounded up to this: a timeout fires at most this much late."""
NO_DEADLINE_S = 1e12
"""A timeout this long or longer (31,000 years; ``inf``) sets no deadline: a timer that far
cannot be set (an ``OverflowError`` failed every call)."""


class _Watch:
    """One call under a deadline: its task, and whether the deadline cancelled it."""

    __slots__ = ("fired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.fired = False


class _Timers:
    """One loop's deadlines, by grain: the calls of a batch start together and share a timer.

    A loop timer per call (what `asyncio.timeout` sets) costs more than a trivial tool. A
    grain's timer stays set when its calls finish early (a few per second at most, each
    gone at its deadline), so calls that start and end one after another reuse it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # weakly: `_TIMERS` is keyed by the loop weakly, and a value holding its key kept
        # every loop that ever set a deadline (one per ``asyncio.run`` of a request) for good
        self.loop_ref = weakref.ref(loop)
        self.grains: dict[int, set[_Watch]] = {}
        # a timer keeps the context it is set in until its deadline: the caller's would keep
        # the run that set it (its nodes, state and messages, via their context variables)
        # alive for the whole timeout after it ended; `_expire` reads no context variable
        self._context = Context()

    def watch(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], timeout: float
    ) -> tuple[int, _Watch]:
        """Cancel ``task`` (on ``loop``, this one's) once ``timeout`` seconds have passed."""
        grain = math.ceil((loop.time() + timeout) / GRAIN_S)
        watches = self.grains.get(grain)
        if watches is None:
            watches = self.grains[grain] = set()
            loop.call_at(grain * GRAIN_S, self._expire, grain, context=self._context)
        watch = _Watch(task)
        watches.add(watch)
        return grain, watch

    def unwatch(self, grain: int, watch: _Watch) -> None:
        watches = self.grains.get(grain)
        if watches is not None:
            watches.discard(watch)

    def _expire(self, grain: int) -> None:
        for watch in self.grains.pop(grain, ()):
            watch.fired = True
            watch.task.cancel()


_TIMERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Timers] = (
    weakref.WeakKeyDictionary()
)


def on_asyncio() -> bool:
    """Whether this runs in an asyncio task (`within` needs one; trio under anyio is not)."""
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no asyncio loop running
        return False


_last: list[_Timers] = []
"""The loop seen last, with its timers: most processes run one loop (no weak lookup then)."""


def _timers(loop: asyncio.AbstractEventLoop) -> _Timers:
    if _last and _last[0].loop_ref() is loop:
        return _last[0]
    timers = _TIMERS.get(loop)
    if timers is None:
        timers = _TIMERS[loop] = _Timers(loop)
    _last[:] = [timers]
    return timers


async def within(
    call: Awaitable[T], timeout: float, timed_out: Callable[[], Exception]
) -> T:
    """Await ``call``; past ``timeout`` seconds cancel it and raise ``timed_out()``.

    What `asyncio.timeout` does: a cancel from anyone else stays a cancel, a call's own
    TimeoutError stays its own, and a call that swallows the cancel keeps its result.
    """
    if not timeout < NO_DEADLINE_S:  # .inf, 1e308 (the config takes them): no timer that far
        return await call
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None  # in-process calls run in tasks
    timers = _timers(loop)
    cancelling = task.cancelling()
    grain, watch = timers.watch(loop, task, timeout)
    try:
        return await call
    except asyncio.CancelledError:
        if watch.fired:
            watch.fired = False
            if task.uncancel() <= cancelling:  # ours alone: the call timed out
                raise timed_out() from None
        raise
    finally:
        timers.unwatch(grain, watch)
        if watch.fired:  # the call swallowed our cancel: take it back all the same
            task.uncancel()


# -- the runner ----------------------------------------------------------------------------

class RunnableTool(Protocol):
    """A tool as the runner sees it: its name, limits and effects, and two ways to run it
    (a `jianmu.tools.Tool` has it all)."""

    @property
    def name(self) -> str:
        """The tool's name, for errors."""

    @property
    def timeout_seconds(self) -> float | None:
        """Its own per-call timeout; ``None`` for none."""

    @property
    def effect_tags(self) -> tuple[str, ...]:
        """Its side effects; ``http`` is refused while the network is off."""

    @property
    def sandboxed(self) -> bool:
        """Whether it runs code through the sandbox (`run_sandboxed`)."""

    @property
    def is_async(self) -> bool:
        """Whether it runs on the event loop (a timeout stops it) rather than in a thread."""

    async def invoke(
        self, args: dict[str, Any], *, executor: Executor | WorkerPool | None = None
    ) -> Any:
        """Run in-process with validated ``args``, a sync tool on ``executor``'s threads."""

    async def run_sandboxed(self, sandbox: Sandbox, **kwargs: Any) -> Any:
        """Run through ``sandbox``."""


def _takes_image(mode: str) -> bool:
    """Whether ``mode``'s sandbox class is given ``execution.docker_image`` (``takes_image``)."""
    return getattr(plugins.resolve("sandbox", mode), "takes_image", False) is True


class ToolRunner:
    """Runs tools under one set of `ExecutionConstraints`.

    Python tools run in-process under the timeout, sync ones in a bounded worker pool. Tools
    that set ``sandboxed = True`` (``bash``, ``python_repl``) run their command through
    `sandbox`, so the constraints, not the tool, decide where code runs: ``mode`` names a
    registered sandbox (`jianmu.plugins`): ``local`` is a `LocalSandbox`, ``docker`` a
    `DockerSandbox`, a plug-in its own class; each has no network unless ``network: true``
    (unset is off). The sandbox is built, and the isolation it promises checked, when the first
    sandboxed call comes: a runner whose calls all run in-process never touches one. The
    workspace is ``execution.workdir`` or the current folder; file tools see it through
    `current_workspace` while the runner runs them.

    Args:
        execution: The merged execution constraints; unset fields take the defaults.
        sandbox: Use this sandbox instead of building one from ``execution``.
        max_workers: Sync tools that may run at once in worker threads.
    """

    def __init__(
        self,
        execution: ExecutionConstraints | None = None,
        *,
        sandbox: Sandbox | None = None,
        max_workers: int = 8,
    ) -> None:
        if max_workers <= 0:
            raise ValueError(f"max_workers must be positive, got {max_workers!r}")
        self.execution = execution if execution is not None else ExecutionConstraints()
        # fixed now, not read from the context at each call: the guard checks paths against
        # this same folder (`effective_root`), whatever folder the process later runs in
        workdir = self.execution.workdir
        self.workspace = effective_root(workdir) if workdir else _cwd()
        paths = self.execution.read_only_paths
        self._read_only = DEFAULT_READ_ONLY_PATHS if paths is None else tuple(paths)
        self.max_workers = max_workers
        self._sandbox = sandbox
        self._life = SandboxLife()
        # this runner's share of the process's tool threads (made with the first call)
        self._pool: WorkerPool | None = None

    @property
    def sandbox(self) -> Sandbox:
        """Where sandboxed tools run: the one given, else the mode's, built on first use.

        Raises:
            SandboxUnavailableError: the constraints ask for isolation this machine lacks
                (``network: false`` without bubblewrap or Docker, a process limit for root
                without control groups).
            MissingExtraError: ``mode: docker`` without the ``docker`` extra.
            ConfigError: the mode's class cannot be imported or is not a sandbox.
        """
        if self._sandbox is None:
            self._sandbox = self._build_sandbox()
        return self._sandbox

    @classmethod
    def from_execution_constraints(cls, execution: ExecutionConstraints | None) -> ToolRunner:
        """Build a runner from the constraints (its sandbox comes with the first sandboxed call)."""
        return cls(execution)

    @property
    def mode(self) -> str:
        """The registered sandbox mode: ``local``, ``docker`` or a plug-in's name."""
        return self.execution.mode or "local"

    def signature(self) -> tuple[Any, ...]:
        """The stable tuple of what makes two runners differ; equal tuples, same behaviour.

        Returns:
            ``(mode, image, network, timeout_s, memory_mb, cpus, pids, workdir,
            read_only_paths)``; the image only for a mode whose sandbox takes one.
        """
        e = self.execution
        image = (e.docker_image or DEFAULT_IMAGE) if _takes_image(self.mode) else None
        ro = None if e.read_only_paths is None else tuple(e.read_only_paths)
        return (self.mode, image, e.network, e.timeout_s, e.memory_mb, e.cpus, e.pids,
                str(self.workspace), ro)

    def _build_sandbox(self) -> Sandbox:
        """The mode's sandbox class (`jianmu.plugins`), built from the constraints."""
        e = self.execution
        given = (("memory_mb", e.memory_mb), ("cpus", e.cpus), ("pids", e.pids))
        # unset limits are left to the sandbox's own defaults (a container always has some)
        options: dict[str, Any] = {k: v for k, v in given if v is not None}
        if e.read_only_paths is not None:  # unset: the sandbox's default (.git)
            options["read_only_paths"] = tuple(e.read_only_paths)
        if _takes_image(self.mode):
            options["image"] = e.docker_image or DEFAULT_IMAGE
        sandbox: Sandbox = plugins.resolve("sandbox", self.mode)(
            # unset is off: only an operator's network: true lets sandboxed code out
            self.workspace, network=e.network is True,
            timeout=e.timeout_s or DEFAULT_TIMEOUT_S, **options,
        )
        return sandbox

    def timeout_for(self, tool: RunnableTool) -> float:
        """The call's timeout: the smaller of the tool's and the constraints' (inf if neither)."""
        own, merged = tool.timeout_seconds, self.execution.timeout_s
        # no list per call: this runs for every call
        own = own if own is not None and own > 0 else math.inf
        return min(own, merged) if merged is not None and merged > 0 else own

    async def run(self, tool: RunnableTool, args: dict[str, Any]) -> Any:
        """Run ``tool`` with already-validated ``args`` and return its raw result.

        Raises:
            ToolExecutionError: the tool talks to the network (effect tag ``http``) while
                ``execution.network`` is false: such tools run in-process, where the
                sandbox's network cut does not reach them.
            SandboxUnavailableError: a sandboxed tool, and the isolation the constraints ask
                for is missing here (see `sandbox`): it never runs without it.
            ToolTimeoutError: the call ran past `timeout_for` (a sandboxed command is killed).
            Exception: whatever the tool raised.
        """
        if self.execution.network is False and "http" in tool.effect_tags:
            raise ToolExecutionError(
                f"tool {tool.name!r} uses the network, which is off in the execution constraints "
                "(execution.network: false); work without it, or ask for a run with "
                "execution.network: true"
            )
        if self._pool is None:
            if self.execution.workdir:  # else the current folder: it exists
                self.workspace.mkdir(parents=True, exist_ok=True)
            self._pool = WorkerPool(self.max_workers)
        timeout = self.timeout_for(tool)
        # a deadline shared with the calls that started with it (`within`)
        if tool.sandboxed:
            if timeout == math.inf:
                return await self._run_sandboxed(tool, args)
            return await within(self._run_sandboxed(tool, args), timeout,
                                lambda: self._timed_out(tool, timeout))
        # in-process; the folder was made with the pool above: no stat on every call
        token, read_only = set_workspace(self.workspace), _READ_ONLY.set(self._read_only)
        # a sync call's thread, followed: whether it began, under which tool it is abandoned
        here = Calling(tool.name)
        followed = CALLING.set(here)
        try:
            if timeout == math.inf:
                return await tool.invoke(args, executor=self._pool)
            return await within(tool.invoke(args, executor=self._pool), timeout,
                                lambda: self._timed_out(tool, timeout, here))
        finally:
            CALLING.reset(followed)
            _READ_ONLY.reset(read_only)
            reset_workspace(token)

    async def start_sandbox(self, tool: RunnableTool) -> None:
        """Build and start the sandbox ``tool`` runs in, under its timeout; nothing for a tool
        that runs in-process. What this raises, the tool never ran: a caller that counts
        executed calls starts the sandbox first (`run` would start it too).

        Raises:
            SandboxUnavailableError: the isolation the constraints ask for is missing here.
            ToolTimeoutError: the sandbox did not start within the call's timeout.
            Exception: whatever a plug-in sandbox raised building or starting.
        """
        if not tool.sandboxed:
            return
        timeout = self.timeout_for(tool)
        if timeout == math.inf:
            await self._started()
            return
        await within(self._started(), timeout, lambda: ToolTimeoutError(
            f"the sandbox for tool {tool.name!r} did not start within {timeout:g}s, so the "
            f"tool never ran; raise its timeout or execution.timeout_s"))

    async def _started(self) -> Sandbox:
        """The sandbox, built and started (`start` is idempotent: at once if it runs)."""
        sandbox = self.sandbox
        token, life = set_workspace(self.workspace), _LIFE.set(self._life)
        try:
            await sandbox.start()
        finally:
            _LIFE.reset(life)
            reset_workspace(token)
        return sandbox

    async def _run_sandboxed(self, tool: RunnableTool, args: dict[str, Any]) -> Any:
        """Through the sandbox, built and checked now if this is the first such call."""
        sandbox = await self._started()
        token, life = set_workspace(self.workspace), _LIFE.set(self._life)
        try:
            return await tool.run_sandboxed(sandbox, **args)
        finally:
            _LIFE.reset(life)
            reset_workspace(token)

    def _timed_out(
        self, tool: RunnableTool, timeout: float, here: Calling | None = None,
    ) -> ToolTimeoutError:
        """The error for a call that ran past ``timeout`` (``here``: the call, followed)."""
        # a sync call that waited for a thread all along (an async one never takes one)
        if here is not None and not here.started and not tool.is_async:
            unstarted = ToolTimeoutError(
                f"tool {tool.name!r} did not start within {timeout:g}s: all {self.max_workers} "
                "worker threads this agent may use for synchronous tools were busy with other "
                "calls, so it never ran; calling it again is safe"
            )
            unstarted.started = False
            return unstarted
        sandboxed = tool.sandboxed
        # a thread cannot be killed: say so rather than claim the work stopped
        fate = "was stopped" if sandboxed or tool.is_async else (
            "was abandoned (a synchronous tool's thread finishes in the background)"
        )
        knob = "its timeout argument or execution.timeout_s" if sandboxed else (
            "its timeout_seconds or execution.timeout_s"
        )
        return ToolTimeoutError(
            f"tool {tool.name!r} did not finish within {timeout:g}s and {fate}; raise "
            f"{knob}, or make the call smaller"
        )

    async def release(self) -> None:
        """Close the sandbox at the end of a run but keep the worker pool for the next one.

        The sandbox starts again on its next use, a new life (`SandboxLife`).
        """
        self._life = SandboxLife()
        if self._sandbox is not None:
            await self._sandbox.close()

    async def close(self) -> None:
        """Close the sandbox (a Docker container is removed) and drop the sync calls not started
        yet; idempotent. The threads are the process's: they end once idle (`IDLE_S`)."""
        pool, self._pool = self._pool, None
        self._life = SandboxLife()
        if pool is not None:
            pool.shutdown()
        if self._sandbox is not None:
            await self._sandbox.close()

    async def __aenter__(self) -> ToolRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        built = "not built yet" if self._sandbox is None else type(self._sandbox).__name__
        return f"<ToolRunner mode={self.mode!r} sandbox={built}>"
