"""The bubblewrap command line of `LocalSandbox`: namespaces, a minimal read-only root, binds.

The root holds ``/usr``, ``/bin``, ``/lib*``, ``/sbin``, a few ``/etc`` files programs need and
this Python's install, read-only; the private ``/tmp`` and the workspace are bound writable. As
root, no user namespace: bwrap mounts with root's rights and ``setpriv`` drops to the user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from jianmu.execution.sandbox import engine_paths_in

__all__ = (
    "CGROUP_MOUNT",
    "bwrap_argv",
    "bwrap_available",
    "bwrap_binds_fds",
    "bwrap_problem",
    "clear_the_way",
    "minimal_root",
    "mqueue_available",
    "python_paths",
    "supervisor_argv",
)

@cache
def bwrap_problem(network: bool) -> str | None:
    """Run a trivial command under the flags we use; return the error, or None if it works."""
    path = shutil.which("bwrap")
    if path is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    as_user = (_NOBODY, _NOBODY) if os.geteuid() == 0 else None
    if as_user is not None and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing: as root, bwrap needs it to drop to a user"
    argv = [path, *_bwrap_flags(network, as_user), *minimal_root(os.environ.get("PATH", "")),
            "--", *_drop_to(as_user), "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to run: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot create namespaces here: {done.stderr.decode(errors='replace')}"
    return None


@cache
def bwrap_binds_fds() -> bool:
    """Whether this bubblewrap has ``--ro-bind-fd`` (0.8 and later): a mount of a folder
    already opened, which a path swapped for a symlink meanwhile cannot redirect."""
    path = shutil.which("bwrap")
    if path is None:
        return False
    try:
        done = subprocess.run([path, "--help"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--ro-bind-fd" in done.stdout + done.stderr


def bwrap_available(*, network: bool = True) -> bool:
    """Whether bubblewrap is installed and can create its namespaces on this machine."""
    return bwrap_problem(network) is None


_NOBODY = 65534
_NAMESPACES = (
    "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
    "--die-with-parent", "--new-session",
)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "passwd", "group", "hosts", "host.conf", "resolv.conf", "nsswitch.conf", "gai.conf",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl/certs",
    "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf", "localtime", "timezone",
    "mime.types", "os-release", "protocols", "services", "bash.bashrc", "inputrc",
)
"""What programs read from ``/etc``; no secrets (``shadow``, ``ssl/private``) among them."""
_NEVER_BOUND = ("/", "/etc", "/root", "/home", "/var", "/run", "/proc", "/sys", "/dev", "/tmp")


def _bwrap_flags(network: bool, as_user: tuple[int, int] | None) -> list[str]:
    """Namespace flags. As root, no user namespace (it would map to host root): bwrap mounts
    with root's rights and `setpriv` then drops to the user, capabilities and all."""
    flags = list(_NAMESPACES)
    if as_user is None:
        flags += ["--unshare-user", "--cap-drop", "ALL"]
    if not network:
        flags.append("--unshare-net")
    return flags


def _drop_to(as_user: tuple[int, int] | None) -> list[str]:
    if as_user is None:
        return []
    uid, gid = as_user
    return [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={gid}",
            "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


@cache
def _user_homes() -> frozenset[str]:
    """The password database's home folders, read once (it may be a directory service)."""
    with contextlib.suppress(Exception):  # none to read: $HOME is what we have
        return frozenset(entry.pw_dir for entry in pwd.getpwall())
    return frozenset()


def _homes() -> frozenset[str]:
    """Every user's home folder (``$HOME`` and the password database's), real paths."""
    homes = {os.environ.get("HOME", ""), os.path.expanduser("~"), *_user_homes()}
    return frozenset(os.path.realpath(h) for h in homes if h and os.path.isabs(h)) - {"/"}


def _holds_a_home(path: str, homes: frozenset[str]) -> bool:
    """Whether binding ``path`` would show a home folder (``~/.ssh``, ``~/.aws``...)."""
    return any(home == path or home.startswith(path.rstrip("/") + "/") for home in homes)


def python_paths(search_path: str) -> list[str]:
    """This Python's install and the ``PATH`` folders outside the system ones, to bind
    read-only at their own paths (a pyenv under ``/root``, a virtualenv in ``/tmp``).

    Never a home folder nor one holding a home (a ``PATH`` with ``$HOME`` or ``/data`` in
    it): what is bound is readable by every command, and a home holds the user's keys."""
    wanted = [sys.prefix, sys.base_prefix, os.path.dirname(sys.executable),
              *search_path.split(os.pathsep)]
    system = tuple(d + "/" for d in _SYSTEM_DIRS)
    homes = _homes()
    found: list[str] = []
    for folder in list(wanted):
        if os.path.basename(folder.rstrip("/")) == "shims":
            # a pyenv shim runs <root>/libexec/pyenv, which reads <root>/versions
            for up in Path(folder).parents:
                if (up / "libexec" / "pyenv").exists():
                    wanted.insert(0, str(up))
                    break
    for folder in wanted:
        if not folder or not os.path.isabs(folder):
            continue
        for path in (os.path.normpath(folder), os.path.realpath(folder)):
            if (path in _NEVER_BOUND or path.startswith(system) or path in _SYSTEM_DIRS
                    or not os.path.isdir(path) or path in found
                    or _holds_a_home(path, homes)):
                continue
            found.append(path)
    return found


def minimal_root(search_path: str) -> list[str]:
    """bwrap arguments for a read-only root holding only what programs need."""
    return list(_minimal_root_cached(search_path))


@cache
def _minimal_root_cached(search_path: str) -> tuple[str, ...]:
    """Computed once per ``PATH``: dozens of stat calls that would repeat on every command."""
    args: list[str] = []
    for folder in _SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    args += ["--perms", "0755", "--dir", "/etc"]
    made: set[str] = {"/etc"}
    for name in _ETC_FILES:
        path = f"/etc/{name}"
        if os.path.exists(path):
            args += [*_parents(path, made), "--ro-bind", path, path]
    # a private /dev/shm the command's user may write (POSIX semaphores and shared memory:
    # Python's multiprocessing locks and queues), in RAM its memory limit counts
    args += ["--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm", "--proc", "/proc"]
    for path in python_paths(search_path):
        args += [*_parents(path, made), "--ro-bind", path, path]
    return tuple(args)


def _parents(path: str, made: set[str]) -> list[str]:
    """``--dir`` for each missing parent of ``path``, world-traversable (bwrap run by root
    makes them 0700, which the unprivileged user could not pass)."""
    args: list[str] = []
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        parent = "/" + "/".join(parts[:i])
        if parent not in made and not parent.startswith(tuple(d + "/" for d in _SYSTEM_DIRS)):
            made.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args


Protected = Sequence[tuple[int | str, str]]
"""Workspace paths shown read-only (`jianmu.execution._protect`): ``(source, target)``, the
source a descriptor (bound with ``--ro-bind-fd``) or a host path."""


def _protected_args(protected: Protected) -> list[str]:
    args: list[str] = []
    for source, target in protected:
        if isinstance(source, int):
            args += ["--ro-bind-fd", str(source), target]
        else:
            args += ["--ro-bind", source, target]
    return args


def bwrap_argv(
    argv: list[str], *, network: bool, user: tuple[int, int] | None, tmp: Path,
    workspace: Path, workdir: Path, search_path: str, ro_fds: Mapping[int, str] | None = None,
    seccomp_fd: int | None = None, protected: Protected = (),
) -> list[str]:
    """``argv`` run under bubblewrap: ``tmp`` as ``/tmp``, the workspace writable at its path
    but its ``protected`` paths read-only, each folder descriptor of ``ro_fds`` read-only at
    its target, the seccomp filter in ``seccomp_fd`` (`jianmu.execution._process`) loaded
    before ``argv`` starts.

    Order matters: bwrap mounts in argument order, so the private /tmp comes after the root
    (Python may live under /tmp and is bound again after it), the workspace after it (it may
    itself live under /tmp), the read-only folders last (nothing may cover them).
    """
    made: set[str] = set()
    args = _rooted(network=network, user=user, tmp=tmp, workspace=workspace,
                   search_path=search_path, made=made)
    args += _protected_args(protected)
    for fd, target in (ro_fds or {}).items():
        args += [*_parents(target, made), "--ro-bind-fd", str(fd), target]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return [*args, "--chdir", str(workdir), "--", *_drop_to(user), *argv]


def _rooted(
    *, network: bool, user: tuple[int, int] | None, tmp: Path, workspace: Path,
    search_path: str, made: set[str],
) -> list[str]:
    """bwrap, its flags, the minimal root, the private /tmp and the workspace."""
    ws = str(workspace)
    clear_the_way(tmp, [ws, *python_paths(search_path)])
    return [
        shutil.which("bwrap") or "bwrap", *_bwrap_flags(network, user),
        *minimal_root(search_path),
        "--bind", str(tmp), "/tmp",
        *(arg for path in python_paths(search_path) if path.startswith("/tmp/")
          for arg in (*_parents(path, made), "--ro-bind", path, path)),
        *_parents(ws, made), "--bind", ws, ws,
        # the engine's own Python, when it lives in the workspace, stays read-only
        *(arg for host, rel in engine_paths_in(workspace)
          for arg in ("--ro-bind", host, os.path.join(ws, rel))),
    ]


_WALK = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def clear_the_way(tmp: Path, paths: list[str]) -> None:
    """Remove what is not a folder on the way, in the private /tmp (``tmp``), to each of
    ``paths`` bwrap mounts under ``/tmp``: the commands may write there, and bwrap, making a
    mount point, follows a link even out to the host's root (``/oldroot``), as root.

    A command once swapped the workspace's parent for ``/oldroot/etc``: at the next start
    bwrap made ``/etc/<name>`` on the host and failed every later call. Called right before
    bwrap starts, when none of the commands runs (one at a time, none outlives its call)."""
    for path in paths:
        if not path.startswith("/tmp/"):
            continue
        fd = os.open(tmp, _WALK)
        try:
            for name in path[len("/tmp/"):].split("/"):
                if not name:
                    continue
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    break  # bwrap makes it, a folder
                if not stat.S_ISDIR(st.st_mode):
                    os.unlink(name, dir_fd=fd)  # a link, a file: the commands', in their /tmp
                    break
                inner = os.open(name, _WALK, dir_fd=fd)
                os.close(fd)
                fd = inner
        finally:
            os.close(fd)


@cache
def mqueue_available() -> bool:
    """Whether this kernel has POSIX message queues (their file system), which a warm
    supervisor's namespace mounts at ``/dev/mqueue`` to see and remove what commands left."""
    try:
        with open("/proc/filesystems") as fh:
            return any(line.split()[-1:] == ["mqueue"] for line in fh)
    except OSError:
        return False


CGROUP_MOUNT = "/.jianmu-cgroup"
"""Where a warm supervisor's namespace shows the sandbox's control groups (``/<index>``)."""


def supervisor_argv(
    argv: list[str], *, network: bool, user: tuple[int, int], tmp: Path, workspace: Path,
    search_path: str, cgroups: list[str], protected: Protected = (),
) -> list[str]:
    """``argv`` (a warm supervisor) under bubblewrap as root, the sandbox's control group
    folders bound at ``CGROUP_MOUNT/<index>``, the IPC namespace's message queues at
    ``/dev/mqueue`` where the kernel has them (the supervisor removes what a command left).

    Only for root: the supervisor keeps root's uid (so the commands, dropped to ``user``,
    can neither signal nor trace it) but no capability beyond what starting them needs:
    setuid and setgid to drop, kill to end them, setpcap to empty their bounding set.
    """
    made: set[str] = set()
    args = _rooted(network=network, user=user, tmp=tmp, workspace=workspace,
                   search_path=search_path, made=made)
    args += _protected_args(protected)
    if mqueue_available():
        args += ["--mqueue", "/dev/mqueue"]
    args += ["--perms", "0755", "--dir", CGROUP_MOUNT]
    for index, folder in enumerate(cgroups):
        args += ["--bind", folder, f"{CGROUP_MOUNT}/{index}"]
    keep = [shutil.which("setpriv") or "setpriv", "--bounding-set=-all,+setuid,+setgid,+kill,"
            "+setpcap", "--inh-caps=-all", "--no-new-privs", "--"]
    return [*args, "--chdir", str(workspace), "--", *keep, *argv]
