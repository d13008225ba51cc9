"""Workspace paths a sandbox shows read-only: what the user's own tools run later, on the host.

A sandboxed command may write anywhere in the workspace, but some of it is code that runs
outside the sandbox afterwards: git runs ``.git/hooks/*`` and the commands ``.git/config``
names (``core.fsmonitor``, ``core.hooksPath``, aliases) whenever someone uses git there, a
shell prompt included; the next run loads ``jianmu.yaml`` (the MCP servers it starts) and
imports a BT skill's ``tree.py`` from ``skills``. So the paths of ``execution.read_only_paths``
(`jianmu.constraints.DEFAULT_READ_ONLY_PATHS` unless set) are mounted read-only over the
writable workspace, where they exist when the sandbox starts.

Each is reached from the workspace without following a symbolic link: a ``.git`` that
sandboxed code replaced with a link to ``/root`` is left out, not mounted (which would show
``/root`` inside the sandbox). A path that does not exist is not protected (a mount point
would have to be created in the user's workspace); the read-only mount also keeps a protected
path from being renamed or removed.

And some folders are never a workspace (`workspace_problem`): a home (``~/.bashrc``,
``~/.ssh/authorized_keys`` run or let in whoever writes them) or a system folder, nor a folder
holding one (``/``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from collections.abc import Iterable
from pathlib import Path

__all__ = (
    "existing_read_only_paths",
    "open_read_only_paths",
    "path_folders_in",
    "workspace_problem",
)

_SYSTEM = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot",
           "/var", "/run", "/proc", "/sys", "/dev", "/root", "/home")

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_path(workspace: Path, rel: str) -> int | None:
    """An ``O_PATH`` descriptor of ``workspace/rel`` (a folder or a regular file), reached
    without following a link; ``None`` when it is missing, a link or something else."""
    parts = [p for p in rel.split("/") if p and p != "."]
    if not parts or ".." in parts:
        return None
    try:  # the workspace itself is the operator's choice: a link to it is followed
        fd = os.open(os.path.realpath(workspace), _DIR)
    except OSError:
        return None
    try:
        for name in parts[:-1]:
            child = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
        last = os.open(parts[-1], os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    mode = os.fstat(last).st_mode
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):  # a link (O_PATH opens it), a fifo
        os.close(last)
        return None
    return last


def open_read_only_paths(workspace: Path, paths: Iterable[str]) -> dict[int, str]:
    """``{descriptor: path in the sandbox}`` for each of ``paths`` that exists in
    ``workspace`` (bound read-only with bubblewrap's ``--ro-bind-fd``); the caller closes
    the descriptors."""
    found: dict[int, str] = {}
    try:
        for rel in dict.fromkeys(paths):
            fd = _open_path(workspace, rel)
            if fd is not None:
                found[fd] = os.path.join(str(workspace), rel)
    except BaseException:
        for fd in found:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    return found


def existing_read_only_paths(workspace: Path, paths: Iterable[str]) -> list[tuple[str, str]]:
    """``(host path, path relative to the workspace)`` for each of ``paths`` that exists in
    ``workspace`` with no link on the way (for mounts made by path: Docker's)."""
    found: list[tuple[str, str]] = []
    for rel in dict.fromkeys(paths):
        fd = _open_path(workspace, rel)
        if fd is not None:
            os.close(fd)
            found.append((os.path.join(str(workspace), rel), rel))
    return found


def _homes() -> set[str]:
    """Our home, root's, and every home under ``/home`` (the password database's)."""
    homes = {os.environ.get("HOME", ""), os.path.expanduser("~"), "/root"}
    with contextlib.suppress(Exception):  # no password database: the above is what we have
        homes.update(e.pw_dir for e in pwd.getpwall() if e.pw_dir.startswith("/home/"))
    return {os.path.realpath(h) for h in homes if h and os.path.isabs(h)}


def path_folders_in(workspace: Path, search_path: str | None = None) -> list[str]:
    """The folders of ``PATH`` (ours, or ``search_path``) inside ``workspace``, relative to it.

    The user's shell looks up commands there (an activated project ``.venv/bin``,
    ``node_modules/.bin``): a ``git`` or ``ls`` written there runs on the host the next time
    the user types it, so sandboxes show these folders read-only, whatever
    ``read_only_paths`` says.
    """
    root = os.path.realpath(workspace)
    found: list[str] = []
    for folder in (search_path if search_path is not None
                   else os.environ.get("PATH", "")).split(os.pathsep):
        if not folder or not os.path.isabs(folder):
            continue
        real = os.path.realpath(folder)
        if real != root and real.startswith(root + os.sep):
            rel = os.path.relpath(real, root)
            if rel not in found:
                found.append(rel)
    return found


def workspace_problem(workspace: Path) -> str | None:
    """Why ``workspace`` must not be a sandbox's (writable, and granted to its user), or
    ``None``: it is, or holds, a home folder or a system folder."""
    real = os.path.realpath(workspace)
    inside = real.rstrip("/") + "/"
    for kind, folders in (("a home folder", _homes()), ("a system folder", set(_SYSTEM))):
        for folder in sorted(folders):
            if folder == real or folder.startswith(inside) or real == "/":
                what = "is" if folder == real else "holds"
                return (
                    f"the workspace {real!r} {what} {kind} ({folder!r}): sandboxed code could "
                    "write what runs outside the sandbox later (a shell's startup files, "
                    "~/.ssh/authorized_keys); work in a project folder (execution.workdir, or "
                    "start Jianmu there)"
                )
    return None
