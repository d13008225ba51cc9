"""One local command's process on this host, and what confines it there.

A cold command (`run_child`) runs in a worker thread: it starts the process (its control group
joined, its own IPC namespace and the seccomp filter taken, the rlimits set between fork and
exec, then the user dropped), feeds stdin, reads both pipes under the cap, and kills the whole
group at the deadline or when the main process exits, so nothing it started in the background
outlives it. A `ChildHandle` lets the event loop kill it. The pieces, each also used by the warm
supervisor's host side (`jianmu.execution._warm`) and some by `DockerSandbox`:

- **The user** (`sandbox_user`, `grant_tree`). As root, sandboxed code runs as an unprivileged
  uid, so that it cannot read what only root may read. That uid gets ``rwX`` on the workspace
  tree through a named-user POSIX ACL entry, and every folder gets the same entry as its default
  ACL, so files and folders made later inherit it; ownership and the mode bits for everyone else
  stay as they were (no chmod 0777). ACLs are set through the ``system.posix_acl_*`` extended
  attributes (the kernel's binary format), so no ``setfacl`` binary is needed.
- **Control groups** (`CgroupNest`, `CommandCgroup`): the only limits that bind root.
  ``RLIMIT_NPROC`` does not apply to root, and ``RLIMIT_AS`` makes allocations fail rather than
  killing the process. A group with ``pids.max`` and a memory limit does both for any user,
  counts OOM kills, and lets us kill every process of a command, even one that left its process
  group. Each command gets its own group, made in its sandbox's group (`CgroupNest`, under the
  caller's own group so the host's accounting still sees it), which bounds what the commands hold
  together. Works with cgroup v1 (one hierarchy per controller) and v2; `cgroup_support` is
  ``None`` wherever the groups are not writable, and the sandbox falls back to rlimits.
- **The kernel keyring, namespaces and IPC** (`command_filter`, `SeccompFilter`,
  `unshare_ipc`). The keyring is not namespaced for a root-run sandbox (no user namespace):
  every process of the commands' uid shares one user keyring, across sandboxes and runs. So
  ``add_key``, ``request_key`` and ``keyctl`` fail with ``EPERM`` in every command, as Docker's
  default profile has them; so do ``unshare``, ``setns`` and a ``clone`` making a namespace (a
  user namespace of its own gives a command every capability there, and the kernel code they
  reach), and ``clone3`` does not exist. On each system-call ABI the machine runs (x86-64, x32
  and i386 on x86-64; arm64 and arm on arm64; riscv64). The filter is a classic BPF program:
  bubblewrap loads it (``--seccomp FD``, once its own namespaces are made), the warm supervisor
  gets it in its config (and loads it the same way, standard library only), and a cold child
  without bubblewrap loads it itself (`SeccompFilter`), always after ``no_new_privs`` and its
  own IPC namespace. System V objects and POSIX message queues live in an IPC namespace: a cold
  child without bubblewrap, as root, takes one of its own (`unshare_ipc`), so nothing it leaves
  there reaches another command (bubblewrap gives each cold command one already).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import resource
import selectors
import signal
import stat
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from jianmu.errors import SandboxError, SandboxUnavailableError
from jianmu.execution.sandbox import CappedBuffer, engine_paths_in

__all__ = (
    "CgroupNest",
    "CgroupSupport",
    "ChildHandle",
    "ChildOutcome",
    "ChildSpec",
    "CommandCgroup",
    "SeccompFilter",
    "cgroup_support",
    "command_filter",
    "grant_tree",
    "hardlinks_protected",
    "pid_alive",
    "run_child",
    "sandbox_user",
    "seccomp_fd",
    "sweep_stale_cgroups",
    "unshare_ipc",
    "user_tasks",
)


# --- processes --------------------------------------------------------------------------

def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def user_tasks() -> int:
    """Count the tasks (threads included) of this real user, as RLIMIT_NPROC does."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


# --- the sandbox's user and its ACL -----------------------------------------------------

_ACCESS = "system.posix_acl_access"
_DEFAULT = "system.posix_acl_default"
_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_NO_ID = 0xFFFFFFFF
_NOBODY = 65534
_Entry = tuple[int, int, int]  # (tag, perm, id)


def sandbox_user(workspace: Path) -> tuple[int, int] | None:
    """The ``(uid, gid)`` sandboxed code runs as, or ``None`` to keep ours (not root).

    As root: the workspace's owner when that is not root (files stay theirs), else nobody.
    """
    if os.geteuid() != 0:
        return None
    try:
        st = workspace.stat()
    except OSError:
        return _NOBODY, _NOBODY
    if st.st_uid != 0:
        return st.st_uid, st.st_gid
    return _NOBODY, _NOBODY


def _parse(blob: bytes) -> list[_Entry]:
    (version,) = struct.unpack_from("<I", blob)
    if version != _VERSION:
        raise OSError(errno.EINVAL, f"unknown ACL version {version}")
    return [struct.unpack_from("<HHI", blob, off) for off in range(4, len(blob), 8)]


def _pack(entries: list[_Entry]) -> bytes:
    ordered = sorted(entries, key=lambda e: (e[0], e[2]))
    return struct.pack("<I", _VERSION) + b"".join(struct.pack("<HHI", *e) for e in ordered)


def _from_mode(mode: int) -> list[_Entry]:
    return [(_USER_OBJ, (mode >> 6) & 7, _NO_ID), (_GROUP_OBJ, (mode >> 3) & 7, _NO_ID),
            (_OTHER, mode & 7, _NO_ID)]


def _with_user(entries: list[_Entry], uid: int, perm: int) -> list[_Entry]:
    """``entries`` with a named-user entry for ``uid`` and a mask that lets it through."""
    kept = [e for e in entries if e[0] != _MASK and not (e[0] == _USER and e[2] == uid)]
    kept.append((_USER, perm, uid))
    mask = 0
    for tag, p, _ in kept:
        if tag in (_GROUP_OBJ, _USER, _GROUP):
            mask |= p
    return [*kept, (_MASK, mask, _NO_ID)]


def _read(fd: int, name: str, fallback: list[_Entry]) -> list[_Entry]:
    try:
        return _parse(os.getxattr(fd, name))
    except OSError as exc:
        if exc.errno in (errno.ENODATA, getattr(errno, "ENOATTR", errno.ENODATA)):
            return fallback
        raise


def _grant_one(fd: int, st: os.stat_result, uid: int, *, write: bool = True) -> None:
    """Grant ``uid`` the file or folder open at ``fd`` (by descriptor: no name to swap);
    without ``write``, reading (and searching, running) only, what is made in it too."""
    is_dir = stat.S_ISDIR(st.st_mode)
    perm = 7 if is_dir or st.st_mode & 0o111 else 6
    mask = 7 if write else 5
    wanted = [(_ACCESS, perm & mask), *([(_DEFAULT, mask)] if is_dir else [])]
    for name, bits in wanted:
        entries = _read(fd, name, _from_mode(st.st_mode))
        blob = _pack(_with_user(entries, uid, bits))
        if blob != _pack(entries):  # unchanged, its change time stays: the next walk skips it
            os.setxattr(fd, name, blob)


_ENTRY_FLAGS = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                | getattr(os, "O_CLOEXEC", 0))
"""How the walk opens an entry: never through a link, never blocking on a FIFO."""


_STAMP = "trusted.jianmu.grant"
"""The root's record of the last whole grant: a ``trusted.`` attribute, which only a process
with ``CAP_SYS_ADMIN`` may read or write (never sandboxed code)."""


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + os.sep)


def _last_grant(fd: int, record: dict[str, object]) -> int | None:
    """When (a change time, ns) the last whole grant with the same ``record`` began."""
    try:
        stamp = json.loads(os.getxattr(fd, _STAMP))
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or {**stamp, "since": None} != {**record, "since": None}:
        return None
    since = stamp.get("since")
    return since if isinstance(since, int) else None


def _begin_grant(fd: int) -> int | None:
    """Mark the root as being granted (a walk cut short leaves no record) and return the
    file system's time now, as the change times it stamps read (from its own, coarse clock:
    whatever changes from here on has a change time at least this)."""
    try:
        os.setxattr(fd, _STAMP, b"{}")
    except OSError:
        return None  # no trusted attributes here: every walk is whole
    return os.fstat(fd).st_ctime_ns


def grant_tree(
    root: Path, uid: int, read_only: Iterable[str] = (), stop: threading.Event | None = None
) -> None:
    """Give ``uid`` read-write access to ``root`` and everything under it (links untouched),
    but for the Python install Jianmu runs from (`engine_paths_in`): not the commands' to change;
    and read access only to the ``read_only`` paths (relative to ``root``) and what they hold,
    which a sandbox without a mount namespace cannot show read-only otherwise (an earlier
    grant's write access is taken back).

    The walk goes through folder descriptors (`os.fwalk`) and grants each entry through a
    descriptor opened without following links: code of another sandbox on this workspace may
    swap a folder for a link to ``/etc`` meanwhile, and a path would then lead there. A hard
    link is the file itself, wherever its other names are: where the kernel lets any user link
    any file it sees (`hardlinks_protected` false), a command could link ``/etc/shadow`` into
    the workspace for the next grant to open it to the commands' user, so there files with
    more than one link are not granted.

    What costs a walk is bounded by what changed, not by the workspace: a folder ``uid`` owns
    (made by the commands) is not entered, for what is made in it is theirs or inherits its
    default ACL; and after a whole grant (stamped on the root, `_STAMP`) an entry whose change
    time is older than that grant's start is only looked at, not opened (a chmod, a rename, a
    new link or an ACL change all set it). Skipping only ever grants less. The ``read_only``
    paths are always gone through whole, so a write access granted before is taken back.
    ``stop`` set ends the walk early, between folders (a cancelled start), with no record
    left: the next grant is whole.

    Raises:
        SandboxUnavailableError: the file system refuses ACLs on ``root``.
    """
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        try:
            _grant_one(fd, os.fstat(fd), uid)
        finally:
            os.close(fd)
    except OSError as exc:
        raise SandboxUnavailableError(
            f"cannot grant the sandbox user (uid {uid}) the workspace {str(root)!r} with an "
            f"ACL ({exc}); use a file system with ACLs, chown the folder to a non-root user "
            "(the sandbox then runs as that user), or run Jianmu as a non-root user"
        ) from exc
    kept = {host for host, _rel in engine_paths_in(root)}
    linked_ok = hardlinks_protected()
    real = os.path.realpath(root)
    # from the real path: fwalk yields nothing under a top that is a link (a workspace
    # named through one), and the workspace itself is the operator's choice
    root = Path(real)
    frozen = tuple(os.path.join(real, os.path.normpath(rel)) for rel in read_only)
    record: dict[str, object] = {"uid": uid, "read_only": sorted(frozen), "kept": sorted(kept),
                                 "links": linked_ok, "since": None}
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        since = _last_grant(root_fd, record)
        record["since"] = _begin_grant(root_fd)
        done = _walk(root, real, uid, kept, frozen, linked_ok, since, stop)
        if done and record["since"] is not None:
            os.setxattr(root_fd, _STAMP, json.dumps(record).encode())
    finally:
        os.close(root_fd)


def _walk(root: Path, real: str, uid: int, kept: set[str], frozen: tuple[str, ...],
          linked_ok: bool, since: int | None, stop: threading.Event | None) -> bool:
    """`grant_tree`'s walk below ``root``; entries unchanged since ``since`` are skipped.
    Whether it went through the whole tree (``stop`` not set).

    A folder changed since (moved in, renamed) is walked whole: what it holds keeps the change
    times it had wherever it was before (``mv ~/data ws/``), older than the last grant."""
    fresh: set[str] = set()  # folders walked whole, found top-down
    for folder, dirs, files, dir_fd in os.fwalk(root):
        if stop is not None and stop.is_set():
            return False
        here = None if folder in fresh else since
        # fwalk descends into what stays in `dirs`; the walk's paths are below `root` as given
        dirs[:] = [d for d in dirs
                   if os.path.join(real, os.path.relpath(os.path.join(folder, d), root))
                   not in kept]
        entered = []
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            whole = any(_under(path, top) or _under(top, path) for top in frozen)
            with contextlib.suppress(OSError):  # vanished, a link or a socket: skip it
                if not whole:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    if st.st_uid == uid:
                        continue  # the commands' own (a folder: all it holds, see above)
                    if stat.S_ISDIR(st.st_mode):
                        entered.append(name)
                        if since is not None and (here is None or st.st_ctime_ns >= since):
                            fresh.add(path)
                    if here is not None and st.st_ctime_ns < here:
                        continue  # granted by the last whole grant, unchanged since
                elif name in dirs:
                    entered.append(name)
                fd = os.open(name, _ENTRY_FLAGS, dir_fd=dir_fd)
                try:
                    st = os.fstat(fd)
                    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and not linked_ok:
                        continue  # maybe a hard link to a file outside (/etc/shadow)
                    if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                        _grant_one(fd, st, uid, write=not any(_under(path, t) for t in frozen))
                finally:
                    os.close(fd)
        dirs[:] = [d for d in dirs if d in entered]
    return True


def hardlinks_protected() -> bool:
    """Whether a user may hard-link only files it owns or may read and write
    (``fs.protected_hardlinks``: on in most distributions, off in the kernel's default)."""
    try:
        return Path("/proc/sys/fs/protected_hardlinks").read_text().strip() == "1"
    except OSError:
        return False


# --- control groups ---------------------------------------------------------------------

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


# --- seccomp and IPC --------------------------------------------------------------------

_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS: load a 32-bit word of struct seccomp_data
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K: jump when the loaded word has any of k's bits
_RET_K = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO: what Docker's profile answers
_ABSENT = 0x00050000 | errno.ENOSYS  # "no such call": libc falls back to another (clone3)
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]'s low word: LE only)
_NAMESPACES = 0x7E020080  # every CLONE_NEW* flag: NS, TIME, CGROUP, UTS, IPC, USER, PID, NET
_X32 = 0x40000000  # the x32 ABI's bit in the system-call number


@dataclass(frozen=True)
class _Calls:
    """One system-call ABI's numbers the filter looks at (an audit arch's, all in one block:
    x86-64's and x32's share theirs, and a block ends with "allow")."""

    arch: int  # its AUDIT_ARCH value
    refused: tuple[int, ...]  # add_key, request_key, keyctl, unshare, setns: EPERM
    clone: tuple[int, ...]  # refused with any namespace flag
    clone3: tuple[int, ...]  # its flags are behind a pointer, out of a filter's reach: ENOSYS

    def with_x32(self) -> _Calls:
        """These numbers and their x32 spellings (the x86-64 ABI with the x32 bit)."""
        def both(numbers: tuple[int, ...]) -> tuple[int, ...]:
            return numbers + tuple(_X32 | n for n in numbers)

        return _Calls(self.arch, both(self.refused), both(self.clone), both(self.clone3))


_GENERIC = (217, 218, 219, 97, 268)  # arm64's and riscv64's numbers
# the ABIs of each machine (``uname -m``): its own, and the 32-bit one it also runs
_ABIS: dict[str, list[_Calls]] = {
    "x86_64": [_Calls(0xC000003E, (248, 249, 250, 272, 308), (56,), (435,)).with_x32(),
               _Calls(0x40000003, (286, 287, 288, 310, 346), (120,), (435,))],
    "aarch64": [_Calls(0xC00000B7, _GENERIC, (220,), (435,)),
                _Calls(0x40000028, (309, 310, 311, 337, 375), (120,), (435,))],
    "riscv64": [_Calls(0xC00000F3, _GENERIC, (220,), (435,))],
}
_LIBC = ctypes.CDLL(None, use_errno=True)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)  # struct sock_filter, native order


@cache
def command_filter(machine: str | None = None) -> bytes | None:
    """The seccomp program every sandboxed command runs under, for this machine (``uname
    -m``), or ``None`` where its numbers are unknown.

    It refuses (``EPERM``, as Docker's default profile does) the kernel keyring (``add_key``,
    ``request_key``, ``keyctl``: not namespaced, shared by every process of a uid) and new
    namespaces (``unshare``, ``setns``, and ``clone`` with a ``CLONE_NEW*`` flag): in a user
    namespace of its own a command holds every capability over it, and with them reaches the
    kernel's least-trodden code (netfilter tables, mounts), the road of most container escapes.
    ``clone3`` says it does not exist (its flags cannot be read by a filter), so the C library
    falls back to ``clone``, which can. On every ABI the machine runs (x86-64, x32 and i386 on
    x86-64; arm64 and arm on arm64; riscv64).
    """
    abis = _ABIS.get(machine or platform.machine())
    if abis is None:
        return None
    body: list[tuple[int, int, int | str, int | str]] = []  # jumps to labels, resolved below
    for calls in abis:
        checks = [(nr, "deny") for nr in calls.refused] + [
            (nr, "clone") for nr in calls.clone] + [(nr, "absent") for nr in calls.clone3]
        body.append((_LD_ABS_W, _ARCH, 0, 0))
        # another ABI: on to the next block, past this one's load, checks and allow
        body.append((_JEQ_K, calls.arch, 0, len(checks) + 2))
        body.append((_LD_ABS_W, _NR, 0, 0))
        body += [(_JEQ_K, nr, where, 0) for nr, where in checks]
        body.append((_RET_K, _ALLOW, 0, 0))
    end = len(body)  # the shared ends, after every block (a filter jumps forward only)
    tail = {"clone": end, "allow": end + 2, "deny": end + 3, "absent": end + 4}
    body += [(_LD_ABS_W, _ARG0, 0, 0), (_JSET_K, _NAMESPACES, "deny", "allow"),
             (_RET_K, _ALLOW, 0, 0), (_RET_K, _DENY, 0, 0), (_RET_K, _ABSENT, 0, 0)]
    ops = []
    for at, (code, k, jt, jf) in enumerate(body):
        true, false = (tail[j] - at - 1 if isinstance(j, str) else j for j in (jt, jf))
        ops.append(_op(code, k, true, false))
    return b"".join(ops)


def seccomp_fd(program: bytes) -> int:
    """A descriptor holding ``program`` from its start, for bubblewrap's ``--seccomp``."""
    fd = os.memfd_create("jianmu-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class SeccompFilter:
    """A filter made ready before ``fork``, installed in the child by `install` (system calls
    only: nothing to allocate or load between fork and exec)."""

    def __init__(self, program: bytes) -> None:
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._prog = _Fprog(len(program) // 8, ctypes.addressof(self._buffer))
        self._ref = ctypes.byref(self._prog)

    def install(self) -> None:
        """Set ``no_new_privs`` and load the filter in this process.

        Raises:
            OSError: the kernel refused (the command must not start without it).
        """
        if _LIBC.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "could not set no_new_privs")
        if _LIBC.prctl(22, 2, self._ref, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
            raise OSError(ctypes.get_errno(), "could not load the seccomp filter")


def unshare_ipc() -> None:
    """Move this process into a new IPC namespace (needs CAP_SYS_ADMIN; between fork and exec).

    Raises:
        OSError: the kernel refused.
    """
    if _LIBC.unshare(0x08000000) != 0:  # CLONE_NEWIPC
        raise OSError(ctypes.get_errno(), "could not make the command an IPC namespace")


# --- the child process ------------------------------------------------------------------

_DRAIN_SECONDS = 1.0  # after a kill, how long to read what is left in the pipes


@dataclass(frozen=True, kw_only=True)
class ChildSpec:
    """How to start one command."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    limits: list[tuple[int, int]]
    """``(resource, value)`` pairs set as both soft and hard rlimits."""
    user: tuple[int, int] | None = None
    """``(uid, gid)`` the child drops to, or ``None`` to stay who we are."""
    pids: int | None = None
    memory_bytes: int | None = None
    cpus: float | None = None
    """The control group's limits, where control groups are usable."""
    nest: CgroupNest | None = None
    """The sandbox's group the command's group is made in; ``None``: no control group."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors the child inherits (folders that bubblewrap mounts read-only)."""
    own_ipc: bool = False
    """Whether the child takes an IPC namespace of its own (root, no bubblewrap)."""
    seccomp: SeccompFilter | None = None
    """The filter the child loads itself (no bubblewrap to load it)."""
    pipes_owner: tuple[int, int] | None = None
    """``(uid, gid)`` given the command's stdio pipes (as root: the user the command runs
    as, here or inside bubblewrap), so that it may reopen them (``/dev/stdout``)."""


class ChildHandle:
    """Lets the event loop kill a command that a worker thread is starting or running."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kill: Callable[[float], None] | None = None
        self.cancelled = False

    def attach(self, kill: Callable[[float], None]) -> None:
        """Called by the thread once the process exists; kills it if already cancelled."""
        with self._lock:
            self._kill = kill
            cancelled = self.cancelled
        if cancelled:
            kill(0.2)

    def cancel(self) -> None:
        """Kill the command now, or as soon as it has started."""
        with self._lock:
            self.cancelled = True
            kill = self._kill
        if kill is not None:
            kill(0.2)


@dataclass(frozen=True, kw_only=True)
class ChildOutcome:
    """What a finished command left: its exit code, output and how it ended."""

    exit_code: int
    stdout: CappedBuffer
    stderr: CappedBuffer
    timed_out: bool
    duration: float
    oom_kills: int


def _give_pipes(owner: tuple[int, int]) -> None:
    """Give ``owner`` the pipes on descriptors 0 to 2 (only pipes: never ``/dev/null``).

    A pipe made by root is root's, mode 0600: the command, run as another user, could write to
    it but not reopen it as ``/dev/stdout``, ``/dev/stderr`` or ``/dev/stdin``.
    """
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.fchown(fd, *owner)


def _make_preexec(
    procs_files: list[str], limits: list[tuple[int, int]], user: tuple[int, int] | None = None,
    *, own_ipc: bool = False, seccomp: SeccompFilter | None = None,
    pipes_owner: tuple[int, int] | None = None,
) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child between fork and exec: keep it to syscalls
        if pipes_owner is not None:
            _give_pipes(pipes_owner)
        for name in procs_files:
            fd = os.open(name, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # "0" moves the writing process itself
            finally:
                os.close(fd)
        if own_ipc:
            unshare_ipc()
        if seccomp is not None:
            seccomp.install()
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        if user is not None:  # last: joining the control group needs root
            uid, gid = user
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)  # from root to a user: every capability goes too

    return preexec


def run_child(
    spec: ChildSpec, data: bytes | None, timeout: float, limit: int, handle: ChildHandle
) -> ChildOutcome:
    """Start the process and collect its output in this worker thread."""
    group: CommandCgroup | None = None if spec.nest is None else spec.nest.command(
        pids=spec.pids, memory_bytes=spec.memory_bytes, cpus=spec.cpus
    )
    start = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(
                spec.argv, stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=spec.cwd,
                env=spec.env, start_new_session=True, pass_fds=spec.pass_fds,
                preexec_fn=_make_preexec(
                    group.procs_files if group else [], spec.limits, spec.user,
                    own_ipc=spec.own_ipc, seccomp=spec.seccomp, pipes_owner=spec.pipes_owner,
                ),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"could not start {spec.argv[0]!r}: {exc}") from exc

        def kill(wait: float = 1.0) -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if group is not None:
                group.kill_all(wait=wait)

        handle.attach(kill)
        with proc:
            out, err, timed_out = _collect(proc, data, start + timeout, limit, kill)
            exit_code = proc.wait()
        return ChildOutcome(
            exit_code=exit_code, stdout=out, stderr=err, timed_out=timed_out,
            duration=time.monotonic() - start,
            oom_kills=group.oom_kills() if group else 0,
        )
    finally:
        if group is not None:
            group.remove()


def _collect(
    proc: subprocess.Popen[bytes], data: bytes | None, deadline: float, limit: int,
    kill: Callable[[float], None],
) -> tuple[CappedBuffer, CappedBuffer, bool]:
    """Feed stdin, read both pipes under the cap, and kill at the deadline or at exit."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = CappedBuffer(limit), CappedBuffer(limit)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    pending = memoryview(data or b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE, None)
    pidfd: int | None = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    timed_out = exited = False
    drain_until: float | None = None
    try:
        while any(k.data is out or k.data is err for k in sel.get_map().values()):
            now = time.monotonic()
            if drain_until is None and (exited or now >= deadline):
                timed_out = not exited
                kill(1.0)  # at the timeout, or leftovers after the main process exited
                drain_until = now + _DRAIN_SECONDS
            if drain_until is not None and now >= drain_until:
                break  # a process outside our reach holds the pipe open
            wait = (drain_until if drain_until is not None else deadline) - now
            if pidfd is None:
                wait = min(wait, 0.02)
            for key, _mask in sel.select(max(wait, 0)):
                if key.data == "exit":
                    exited = True
                    sel.unregister(key.fileobj)
                elif key.data is None:
                    try:
                        written = os.write(key.fd, pending[:65536])
                    except BlockingIOError:
                        written = 0
                    except BrokenPipeError:
                        written = len(pending)  # the command stopped reading: drop the rest
                    pending = pending[written:]
                    if not pending:
                        sel.unregister(key.fileobj)
                        proc.stdin.close()  # type: ignore[union-attr]
                else:
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        key.data.write(chunk)
                    else:
                        sel.unregister(key.fileobj)
            if pidfd is None and not exited and proc.poll() is not None:
                exited = True
        if not exited and proc.poll() is None:
            # Pipes closed but the process lives on (it closed its stdout): wait for it.
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                timed_out = True
        kill(1.0)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
    return out, err, timed_out
