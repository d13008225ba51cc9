"""Per-command control groups for `LocalSandbox`: the only limits that bind root.

``RLIMIT_NPROC`` does not apply to root, and ``RLIMIT_AS`` makes allocations fail rather than
killing the process. A control group with ``pids.max`` and a memory limit does both for any
user, counts OOM kills, and lets us kill every process of a command, even one that left its
process group. Each command gets its own group, made in its sandbox's group (`CgroupNest`, under
the caller's own group so the host's accounting still sees it), which bounds what the commands
hold together. Works with cgroup v1 (one hierarchy per controller) and v2; `cgroup_support` is
``None`` wherever the groups are not writable, and the sandbox falls back to rlimits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from jianmu.errors import SandboxError
from jianmu.execution._pids import pid_alive

__all__ = (
    "CgroupNest",
    "CgroupSupport",
    "CommandCgroup",
    "cgroup_support",
    "sweep_stale_cgroups",
)

_ROOT = Path("/sys/fs/cgroup")
_PREFIX = "jianmu-"


@dataclass(frozen=True, kw_only=True)
class CgroupSupport:
    """Which controllers this process can use, and where their groups go."""

    version: int
    parents: dict[str, Path] = field(default_factory=dict)
    """Controller name to the folder new groups are made in (v2: one folder for all)."""

    @property
    def controllers(self) -> frozenset[str]:
        """The usable controllers among pids, memory and cpu."""
        return frozenset(self.parents)


def _own_paths() -> dict[str, str]:
    """Map controller names (``""`` for v2) to this process's group path."""
    result: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return result
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(","):
                result[name] = parts[2]
    return result


def _writable_parent(candidates: list[Path]) -> Path | None:
    for parent in candidates:
        probe = parent / f"{_PREFIX}probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        with contextlib.suppress(OSError):
            probe.rmdir()
        return parent
    return None


@cache
def cgroup_support() -> CgroupSupport | None:
    """Probe once which controllers are writable here; ``None`` when none is."""
    return _probe()


def _probe() -> CgroupSupport | None:
    own = _own_paths()
    if (_ROOT / "cgroup.controllers").exists():
        base = own.get("", "/").lstrip("/")
        # Own group first; v2 forbids children there while it holds processes (not root), so
        # the root is the usual fallback, where the no-internal-process rule does not apply.
        for parent in (_ROOT / base, _ROOT):
            try:
                available = set((parent / "cgroup.controllers").read_text().split())
                wanted = available & {"pids", "memory", "cpu"}
                enabled = set((parent / "cgroup.subtree_control").read_text().split())
                if wanted - enabled:
                    (parent / "cgroup.subtree_control").write_text(
                        " ".join(f"+{c}" for c in sorted(wanted - enabled))
                    )
            except OSError:
                continue
            if wanted and _writable_parent([parent]):
                return CgroupSupport(version=2, parents={c: parent for c in wanted})
        return None
    parents: dict[str, Path] = {}
    for controller in ("pids", "memory", "cpu"):
        mount = _ROOT / controller
        if not mount.is_dir():
            continue
        rel = own.get(controller, "/").lstrip("/")
        found = _writable_parent([mount / rel, mount])
        if found is not None:
            parents[controller] = found
    return CgroupSupport(version=1, parents=parents) if parents else None


class CommandCgroup:
    """One group (per controller on v1) holding one command and everything it starts."""

    def __init__(self, support: CgroupSupport, name: str) -> None:
        self.support = support
        if support.version == 2:
            parent = next(iter(support.parents.values()))
            self.dirs = {c: parent / name for c in support.parents}
        else:
            self.dirs = {c: p / name for c, p in support.parents.items()}
        for path in set(self.dirs.values()):
            path.mkdir()
        self.procs_files = sorted({str(p / "cgroup.procs") for p in self.dirs.values()})

    def _write(self, controller: str, v1_file: str, v2_file: str, value: str) -> None:
        name = v2_file if self.support.version == 2 else v1_file
        (self.dirs[controller] / name).write_text(value)

    def limit(self, *, pids: int | None, memory_bytes: int | None, cpus: float | None) -> None:
        """Write the limits this group enforces; unset ones stay unlimited."""
        if pids is not None and "pids" in self.dirs:
            self._write("pids", "pids.max", "pids.max", str(pids))
        if memory_bytes is not None and "memory" in self.dirs:
            self._write("memory", "memory.limit_in_bytes", "memory.max", str(memory_bytes))
            # No swap either, or the limit only slows the process down.
            with contextlib.suppress(OSError):
                self._write(
                    "memory", "memory.memsw.limit_in_bytes", "memory.swap.max",
                    str(memory_bytes) if self.support.version == 1 else "0",
                )
        if cpus is not None and "cpu" in self.dirs:
            period = 100_000
            quota = max(1000, int(cpus * period))
            if self.support.version == 2:
                self._write("cpu", "", "cpu.max", f"{quota} {period}")
            else:
                self._write("cpu", "cpu.cfs_period_us", "", str(period))
                self._write("cpu", "cpu.cfs_quota_us", "", str(quota))

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this group for its memory limit."""
        path = self.dirs.get("memory")
        if path is None:
            return 0
        name = "memory.events" if self.support.version == 2 else "memory.oom_control"
        try:
            for line in (path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def pids(self) -> set[int]:
        """The processes now in the group."""
        found: set[int] = set()
        for name in self.procs_files:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(x) for x in Path(name).read_text().split())
        return found

    def kill_all(self, *, wait: float = 2.0) -> bool:
        """SIGKILL every process in the group until it is empty; return whether it emptied."""
        deadline = time.monotonic() + wait
        if self.support.version == 2:
            kill_file = next(iter(self.dirs.values())) / "cgroup.kill"
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        while True:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)  # killed processes leave the group once their parent reaps them

    def remove(self) -> None:
        """Kill what is left and delete the group; a busy group is left for the next sweep."""
        if self._remove_empty():
            return
        self.kill_all()
        for path in set(self.dirs.values()):
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


    def _remove_empty(self) -> bool:
        """Delete the group if it is empty already (the kernel refuses a busy one)."""
        for path in sorted(set(self.dirs.values())):
            try:
                path.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                return False
        return True


def _owner_alive(name: str) -> bool:
    try:
        pid = int(name.removeprefix(_PREFIX).split("-", 1)[0])
    except ValueError:
        return True  # not ours to judge
    return pid_alive(pid)


def _remove_tree(support: CgroupSupport, folder: Path) -> None:
    """Kill and remove a group and the groups under it (a sandbox's nest), deepest first."""
    with contextlib.suppress(OSError):
        for child in folder.iterdir():
            if child.is_dir():
                _remove_tree(support, child)
    stale = CommandCgroup.__new__(CommandCgroup)
    stale.support = support
    stale.dirs = {"": folder}
    stale.procs_files = [str(folder / "cgroup.procs")]
    with contextlib.suppress(OSError):
        stale.remove()


def sweep_stale_cgroups() -> None:
    """Remove groups whose owning process died (a crash skipped their clean-up)."""
    support = cgroup_support()
    if support is None:
        return
    for parent in set(support.parents.values()):
        with contextlib.suppress(OSError):
            for child in parent.glob(f"{_PREFIX}*"):
                if not _owner_alive(child.name):
                    _remove_tree(support, child)


class CgroupNest:
    """A sandbox's own group (per controller) under which its commands' groups go.

    It holds everything the sandbox's commands can allocate, including what outlives a
    command: files in a tmpfs, System V shared memory, page cache. The kernel charges those
    to the command's group and, once that group is removed, to this one, so the memory limit
    is set here too: together, the sandbox's commands never hold more than it.

    Bound into a bubblewrap namespace, it lets the supervisor there put each command in a
    group the host made: the commands' user may read it, not write it.
    """

    def __init__(self, support: CgroupSupport, *, memory_bytes: int | None = None) -> None:
        """Make the nest, its memory limit set.

        Raises:
            SandboxError: it could not be made or limited.
        """
        own = _limited_group(support, f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}",
                             pids=None, memory_bytes=memory_bytes, cpus=None)
        parents = own.dirs
        if support.version == 2:  # children get the controllers only if the nest hands them on
            folder = next(iter(parents.values()))
            with contextlib.suppress(OSError):
                (folder / "cgroup.subtree_control").write_text(
                    " ".join(f"+{c}" for c in sorted(parents))
                )
        self.support = CgroupSupport(version=support.version, parents=parents)
        self.folders = sorted({str(p) for p in parents.values()})
        """The nest's folders on the host, one per hierarchy."""

    def command(
        self, *, pids: int | None, memory_bytes: int | None, cpus: float | None
    ) -> CommandCgroup:
        """A fresh group for one command, with its limits.

        Raises:
            SandboxError: the group could not be made or limited.
        """
        return _limited_group(
            self.support, f"c-{uuid.uuid4().hex[:12]}",
            pids=pids, memory_bytes=memory_bytes, cpus=cpus,
        )

    def remove(self) -> None:
        """Kill everything in the nest and delete it with the groups under it."""
        for folder in self.folders:
            _remove_tree(self.support, Path(folder))


def _limited_group(
    support: CgroupSupport, name: str,
    *, pids: int | None, memory_bytes: int | None, cpus: float | None,
) -> CommandCgroup:
    """Make the group ``name`` and set its limits (removed again if they cannot be set)."""
    try:
        group = CommandCgroup(support, name)
    except OSError as exc:
        raise SandboxError(f"could not create a control group for the command: {exc}") from exc
    try:
        group.limit(pids=pids, memory_bytes=memory_bytes, cpus=cpus)
    except OSError as exc:
        group.remove()
        raise SandboxError(f"could not set the control group's limits: {exc}") from exc
    return group
