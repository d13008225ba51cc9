"""Workspace paths a sandbox shows read-only: what the user's own tools run later, on the host.

A sandboxed command may write anywhere in the workspace, but some of it is code that runs
outside the sandbox afterwards: git runs ``.git/hooks/*`` and the commands ``.git/config``
names (``core.fsmonitor``, ``core.hooksPath``, aliases) whenever someone uses git there, a
shell prompt included; the next run loads ``jianmu.yaml`` (the MCP servers it starts) and
imports a BT skill's ``tree.py`` from ``skills``. So the paths of ``execution.read_only_paths``
(`jianmu.constraints.DEFAULT_READ_ONLY_PATHS` unless set) are mounted read-only over the
writable workspace, where they exist when a command starts; what a command creates where one
did not exist is moved out of the way after it (below).

Each is reached from the workspace without following a symbolic link: a ``.git`` that
sandboxed code replaced with a link to ``/root`` is left out, not mounted (which would show
``/root`` inside the sandbox). But the host follows the user's own links: what a link on
the way to a protected path leads to in the workspace (``.venv -> venvs/py311``, ``configs ->
shared``) is protected as well (`with_link_targets`), mounted where it exists, watched where it
does not, while the link itself is watched (below). The read-only mount also keeps a protected
path from being renamed or removed. A warm supervisor and a Docker container mount the paths
that exist when they start; one the host makes later (the user runs ``git init``) is seen
before the next command, which then gets a new supervisor, container or grant that holds it
too.

A path that does not exist cannot be mounted (a mount point would have to be made in the
user's workspace), so `ProtectedPaths` watches it instead, the same way for every sandbox:
before each command, a few ``lstat`` calls note what the host would find at each protected
path that no mount holds (missing, or reached through a link); after the command, once none
of its processes is left (a cold bubblewrap child's pid namespace is gone, a warm
supervisor or a Docker command's wrapper killed every process of the command's control
group or user, else the sandbox swept them), whatever now stands at such a path is renamed
into ``.jianmu/quarantine/<time>-<random>/`` under a name nothing looks for
(``configs%jianmu.yaml.quarantined``: a ``.git`` there is no repository), without following
a link (a planted link is moved as the link), and the command's stderr names what went
where. Nothing is deleted; when that folder cannot be made (``.jianmu`` is a link), the path
is renamed next to itself. What a link the user had on the way (``configs`` -> ``shared``)
now leads to inside the workspace is moved, the user's link kept. A mount holds a path, not
the folders on its way: a command renamed ``configs`` away (a folder holding a mount point may
be renamed) and wrote a ``configs/jianmu.yaml`` of its own, so the folders on the way to a
mounted path below one are watched too (``ReadOnlyWatch.ways``), and one renamed away is renamed
back after the command when it is found next to where it was (else the stderr says the next run
will not find it: ``mv configs src/c``). And a mount holds the object
it found, which may have been made by another sandbox's command on the workspace, still
running: that sandbox's watch moves it away, and this command writes another where the mount
no longer holds anything. So a path a sandbox of this process once found missing is watched
whole even when mounted (``ReadOnlyWatch.made_since``): another object standing there after
the command is moved. A command that did not end
normally (cancelled) is swept before the next one (once its processes are gone: a warm
supervisor's kill comes after the cancelled call returned), or when the sandbox closes.

What this leaves open: while the command runs, what it made is there, and a host process that
reads the workspace meanwhile (a shell prompt running ``git status``, another ``jianmu run``
started there) sees it, and one the user makes there meanwhile is moved too (nothing tells it
from the command's); only the paths of ``read_only_paths`` and the ``PATH`` folders are watched
(a ``.git`` made in a subfolder is not); a sandbox of another process, started while a
command had made one, takes it for the user's; one made since the first look and replaced
by the host during a command (an editor saving by a rename) is moved too; without bubblewrap
as root (the commands' user granted
the protected paths read-only, not the folders that hold their names), an existing one may be
renamed away and made anew: that is moved like a new one, and so is one the host changed during
the command (a file's change time is all that tells a new file on a reused inode apart); and
where nothing kills every process of a command (no bubblewrap, no control groups: a process
that left its group with ``setsid``), one left running may write again after the sweep.

And some folders are never a workspace (`workspace_problem`): a home (``~/.bashrc``,
``~/.ssh/authorized_keys`` run or let in whoever writes them), a system folder (``/opt``,
``/mnt`` too), the host's temporary folder (every sandbox's private ``/tmp`` is made there, and
the host's sockets are there), nor a folder holding one (``/``); a folder below one
(``/tmp/project``) is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import secrets
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from jianmu.execution.sandbox import ExecResult

__all__ = (
    "QUARANTINE",
    "ProtectedPaths",
    "ReadOnlyWatch",
    "existing_read_only_paths",
    "identified_read_only_paths",
    "open_read_only_paths",
    "path_folders_in",
    "quarantine_note",
    "with_link_targets",
    "workspace_problem",
)

_SYSTEM = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot",
           "/var", "/run", "/proc", "/sys", "/dev", "/root", "/home",
           # what the host installs, serves or mounts there: software for every user, other
           # disks; a project below one is fine, the folder itself is not
           "/opt", "/srv", "/mnt", "/media", "/snap")

_log = logging.getLogger("jianmu.execution")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_path(workspace: Path, rel: str) -> int | None:
    """An ``O_PATH`` descriptor of ``workspace/rel`` (a folder or a regular file), reached
    without following a link; ``None`` when it is missing, a link or something else."""
    parts = [p for p in rel.split("/") if p and p != "."]
    if not parts or ".." in parts:
        return None
    try:  # the workspace itself is the operator's choice: a link to it is followed
        fd = _open_dir(os.path.realpath(workspace), parts[:-1])
    except OSError:
        return None
    try:
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
    return [(host, rel) for host, rel, _ in identified_read_only_paths(workspace, paths)]


def identified_read_only_paths(
    workspace: Path, paths: Iterable[str]
) -> list[tuple[str, str, tuple[int, int]]]:
    """`existing_read_only_paths`, each with the ``(st_dev, st_ino)`` of what was found: a
    mount made by path later shows that object only if nothing swapped it meanwhile."""
    found: list[tuple[str, str, tuple[int, int]]] = []
    for rel in dict.fromkeys(paths):
        fd = _open_path(workspace, rel)
        if fd is not None:
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
            found.append((os.path.join(str(workspace), rel), rel, (st.st_dev, st.st_ino)))
    return found


def with_link_targets(workspace: Path, paths: Iterable[str]) -> list[str]:
    """``paths``, each followed by where it leads in ``workspace`` when a link is on its way
    (the user's ``.venv -> venvs/py311``, ``skills -> shared-skills``): the host follows the
    link, so what it leads to is held as the path itself would be (mounted read-only where it
    exists, watched where it does not), and the link is watched (a command re-pointing it is
    moved). A link leading outside the workspace, or to the workspace itself, adds nothing:
    a sandbox shows nothing outside it writable."""
    root = os.path.realpath(workspace)
    found: dict[str, None] = {}
    for rel in paths:
        found.setdefault(rel)
        parts = _parts(rel)
        if parts is None or not any(kind == stat.S_IFLNK
                                    for _, _, kind, _ in _seen(root, parts).walk):
            continue
        real = os.path.realpath(os.path.join(root, *parts))
        if real.startswith(root + os.sep):
            found.setdefault(os.path.relpath(real, root))
    return list(found)


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
    ``read_only_paths`` says. Each is given as ``PATH`` names it (``bin``, the user's link to
    ``tools``: the shell follows that link, so it is watched, `with_link_targets`) and where
    it really is (``tools``).
    """
    root = os.path.realpath(workspace)
    # the workspace as the operator named it too (through a link of theirs)
    names = dict.fromkeys((root, os.path.abspath(workspace)))
    found: dict[str, None] = {}
    for folder in (search_path if search_path is not None
                   else os.environ.get("PATH", "")).split(os.pathsep):
        if not folder or not os.path.isabs(folder):
            continue
        named = os.path.normpath(folder)
        if ".." not in folder.split("/"):  # else the kernel's way differs from the name's
            base = next((b for b in names if named.startswith(b.rstrip("/") + "/")), None)
            if base is not None:
                found.setdefault(os.path.relpath(named, base))
        real = os.path.realpath(folder)
        if real != root and real.startswith(root + os.sep):
            found.setdefault(os.path.relpath(real, root))
    return list(found)


def _temp_folders() -> set[str]:
    """The host's temporary folders: ``/tmp`` (its sockets, other users' files) and the one
    Python's ``tempfile`` uses, where every sandbox keeps its private ``/tmp``."""
    import tempfile  # only when a sandbox starts

    return {os.path.realpath(f) for f in ("/tmp", tempfile.gettempdir())}


def workspace_problem(workspace: Path) -> str | None:
    """Why ``workspace`` must not be a sandbox's (writable, and granted to its user), or
    ``None``: it is, or holds, a home folder, a system folder or the host's temporary folder."""
    real = os.path.realpath(workspace)
    inside = real.rstrip("/") + "/"
    later = ("sandboxed code could write what runs outside the sandbox later (a shell's startup "
             "files, ~/.ssh/authorized_keys)")
    shared = ("sandboxed code could read and write every other sandbox's private /tmp, other "
              "runs' workspaces and the host's sockets there")
    for kind, folders, why in (("a home folder", _homes(), later),
                               ("a system folder", set(_SYSTEM), later),
                               ("the host's temporary folder", _temp_folders(), shared)):
        for folder in sorted(folders):
            if folder == real or folder.startswith(inside) or real == "/":
                what = "is" if folder == real else "holds"
                return (
                    f"the workspace {real!r} {what} {kind} ({folder!r}): {why}; work in a "
                    "project folder (execution.workdir, or start Jianmu there)"
                )
    return None


# --- what a command created at a protected path -------------------------------------------

QUARANTINE = ".jianmu/quarantine"
"""Where `ReadOnlyWatch` moves what a command created at a protected path (in the workspace,
so that a rename moves it: nothing is copied or deleted; nothing loads from there)."""

_STAYED = "nowhere: "  # what could not be moved: its `where`, then why
_BACK = "back from: "  # a protected folder (or one on the way) renamed away, put back
_GONE = "gone: "  # one renamed away that could not be put back, and why
_Ident = tuple[int, int, int, int]  # device, inode, file type, ctime (0 for a folder)
_Walk = tuple[_Ident, ...]


@dataclass(frozen=True)
class _Seen:
    """What the host would find at one protected path: each part reached without following a
    link (up to the first missing one, link or non-folder), and, when a link is on the way,
    what following it leads to (the host follows links)."""

    walk: _Walk
    followed: _Ident | None


def _ident(st: os.stat_result) -> _Ident:
    kind = stat.S_IFMT(st.st_mode)
    # a folder's ctime changes with each entry made in it: its inode says whether it is the same
    return (st.st_dev, st.st_ino, kind, 0 if kind == stat.S_IFDIR else st.st_ctime_ns)


def _seen(root: str, parts: list[str]) -> _Seen:
    walk: list[_Ident] = []
    path = root
    for name in parts:
        path = f"{path}/{name}"
        try:  # the parts before are folders, not links: a path is as safe as a descriptor
            st = os.lstat(path)
        except OSError:
            break
        walk.append(_ident(st))
        if not stat.S_ISDIR(st.st_mode):
            break
    followed = None
    if any(kind == stat.S_IFLNK for _, _, kind, _ in walk):
        with contextlib.suppress(OSError):
            followed = _ident(os.stat(f"{root}/{'/'.join(parts)}"))
    return _Seen(tuple(walk), followed)


def _parts(rel: str) -> list[str] | None:
    parts = [p for p in rel.split("/") if p and p != "."]
    return parts if parts and ".." not in parts else None


_MISSING_ONCE: dict[str, set[str]] = {}
"""Per workspace (its real path), the protected paths a sandbox of this process found missing
(or reached through a link) before a command: what stands there later was made since, by the
user or by another sandbox's command (`ReadOnlyWatch.made_since`)."""


def _same_objects(before: _Walk, after: _Walk) -> bool:
    """Whether each part is the same object (file times aside: a change in place)."""
    return len(before) == len(after) and all(
        b[:3] == a[:3] for b, a in zip(before, after, strict=True))


def _guarded(seen: _Seen, parts: list[str]) -> bool:
    """Whether a sandbox mounts (or grants) this path read-only: a folder or a regular file
    reached without a link (as `open_read_only_paths` finds it)."""
    return len(seen.walk) == len(parts) and seen.walk[-1][2] in (stat.S_IFDIR, stat.S_IFREG)


@dataclass
class ReadOnlyWatch:
    """The protected paths a sandbox cannot hold read-only during one command (missing, or
    reached through a link), as the host would read them before it; `quarantine` moves out of
    the way what the command made there. See the module's docstring."""

    root: str
    """The workspace's real path."""
    mounted: frozenset[str]
    """The protected paths (as given) that exist: the ones a sandbox mounts read-only."""
    seen: dict[str, _Seen]
    """What each watched path was before the command (those not mounted, unless
    ``replaceable``; of a mounted one below a folder, the folders on its way)."""
    ways: frozenset[str] = frozenset()
    """The mounted paths below a folder, watched for the folders on their way only: a mount
    holds the path itself, but a command may rename a folder above it away and make it anew
    (``mv configs c2; mkdir configs``), and the host would load what it wrote there."""
    made_since: frozenset[str] = frozenset()
    """The mounted paths a sandbox of this process once found missing, watched whole for
    another object standing there after the command: another sandbox's command may have
    made the one mounted, and its watch move it away during this command, which then writes
    one the mount no longer holds (a change in place is the host's: the mount held it)."""

    @classmethod
    def take(
        cls, workspace: Path, paths: Iterable[str], *, replaceable: bool = False
    ) -> ReadOnlyWatch:
        """Look at ``paths`` (relative to ``workspace``) before a command: a few ``lstat``.

        ``replaceable``: the existing paths are watched too, for a sandbox that holds only
        their contents read-only (an ACL grant), not their names: one renamed away and made
        anew is moved like one made where there was none."""
        root = os.path.realpath(workspace)
        missing_once = _MISSING_ONCE.setdefault(root, set())
        mounted: set[str] = set()
        ways: set[str] = set()
        made_since: set[str] = set()
        seen: dict[str, _Seen] = {}
        for rel in dict.fromkeys(paths):
            parts = _parts(rel)
            if parts is None:
                continue
            now = _seen(root, parts)
            if _guarded(now, parts):
                mounted.add(rel)
            else:
                missing_once.add(rel)
            if replaceable or rel not in mounted:
                seen[rel] = now
            elif rel in missing_once:
                made_since.add(rel)
                seen[rel] = now
            elif len(parts) > 1:
                ways.add(rel)
                seen[rel] = _Seen(now.walk[:-1], None)
        return cls(root, frozenset(mounted), seen, frozenset(ways), frozenset(made_since))

    def changed(self) -> list[str]:
        """What to move, relative to the workspace: for each watched path that changed, the
        part the command made there (a link is moved as a link), or what a link that was
        there before now leads to, inside the workspace."""
        return list(self._targets())

    def _targets(self) -> dict[str, str | None]:
        """`changed`, each with the outermost folder the command made on its way (moved
        instead when it cannot be: a folder of another user's that we may not write)."""
        found: dict[str, str | None] = {}
        for rel, before in self.seen.items():
            parts = _parts(rel)
            assert parts is not None
            after = _seen(self.root, parts)
            if after == before or not after.walk:
                continue
            if rel in self.ways and after.walk[:len(before.walk)] == before.walk:
                continue  # the same folders on the way: the path itself was held read-only
            if rel in self.made_since and _same_objects(before.walk, after.walk):
                continue  # the one held read-only, changed in place by the host if at all
            depth = len(after.walk)
            last = after.walk[-1]
            new = depth > len(before.walk) or before.walk[depth - 1] != last
            if new and (depth == len(parts) or last[2] == stat.S_IFLNK):
                # made, or replaced, by the command; and the first part of it that is new
                first = next(i for i, ident in enumerate(after.walk)
                             if i >= len(before.walk) or before.walk[i] != ident)
                found["/".join(parts[:depth])] = (
                    "/".join(parts[:first + 1]) if first < depth - 1 else None)
            elif last[2] == stat.S_IFLNK and after.followed is not None:
                # a link that was there before leads somewhere else now: move what it leads to
                real = os.path.realpath(os.path.join(self.root, *parts))
                inside = os.path.relpath(real, self.root)
                # not where the sandbox held it read-only: the host changed that, not the command
                if real.startswith(self.root + os.sep) and not any(
                        inside == held or inside.startswith(f"{held}/")
                        for held in self.mounted):
                    found.setdefault(inside, None)
        return found

    def quarantine(self) -> list[tuple[str, str]]:
        """Move what the command made at the watched paths into `QUARANTINE` (never deleted,
        never followed: renamed); ``(path, where it went)``, both relative to the workspace
        (or why it stayed). Call it once none of the command's processes is left."""
        moved: list[tuple[str, str]] = []
        targets = self._targets()
        if not targets:
            return self._put_back()
        folder: tuple[int, str] | None = None
        try:
            for rel, outer in targets.items():
                if folder is None:
                    folder = _quarantine_folder(self.root)
                try:
                    moved.append((rel, _move(self.root, rel, folder)))
                    continue
                except OSError as exc:
                    problem = exc
                if outer is not None and os.path.lexists(os.path.join(self.root, outer)):
                    with contextlib.suppress(OSError):
                        moved.append((outer, _move(self.root, outer, folder)))
                        continue
                # said, not hidden: the user must look at it
                moved.append((rel, f"{_STAYED}{problem.strerror}"))
        finally:
            if folder is not None and folder[0] >= 0:
                os.close(folder[0])
        return moved + self._put_back()

    def _put_back(self) -> list[tuple[str, str]]:
        """Rename back what the command renamed away of the user's protected paths and the
        folders on their way (``mv configs .c``: a folder holding a mount point may be
        renamed, and the next run would not find ``configs/jianmu.yaml``), found next to where
        it was; said when it is not there. Called once what the command made there is moved.
        Not one first seen missing (``made_since``): another sandbox's command may have made
        it, and its watch moved it away."""
        done: list[tuple[str, str]] = []
        looked: set[str] = set()
        for rel, before in self.seen.items():
            parts = _parts(rel)
            if parts is None or rel not in self.mounted or rel in self.made_since:
                continue
            after = _seen(self.root, parts).walk
            # the first part that is not there now (one moved along with it is not looked at)
            i = next((i for i, ident in enumerate(before.walk)
                      if i >= len(after) or after[i][:3] != ident[:3]), None)
            if i is None:
                continue
            name = "/".join(parts[:i + 1])
            if name not in looked:
                looked.add(name)
                done.append((name, _rename_back(self.root, parts[:i], parts[i],
                                                before.walk[i])))
        return done


def _rename_back(root: str, parent: list[str], name: str, ident: _Ident) -> str:
    """Rename the entry of ``root/parent`` that is ``ident`` back to ``name``; where it was
    found (`_BACK`), or why not (`_GONE`)."""
    try:
        fd = _open_dir(root, parent)
    except OSError as exc:
        return f"{_GONE}{exc.strerror}"
    try:
        for entry in os.scandir(fd):
            if entry.inode() != ident[1] or ".quarantined" in entry.name:
                continue  # (never what a watch of another sandbox moved next to itself)
            st = entry.stat(follow_symlinks=False)
            if (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode)) != ident[:3]:
                continue
            # an empty folder there (the command's, emptied by the move) is removed: nothing
            # is lost; anything else stays, and is said
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=fd)
            with contextlib.suppress(FileNotFoundError):
                os.lstat(name, dir_fd=fd)
                return f"{_GONE}another {name!r} stands there"
            os.rename(entry.name, name, src_dir_fd=fd, dst_dir_fd=fd)
            return f"{_BACK}{'/'.join([*parent, entry.name])}"
        return f"{_GONE}not found in {'/'.join(parent) or 'the workspace'}"
    except OSError as exc:
        return f"{_GONE}{exc.strerror}"
    finally:
        os.close(fd)


def _open_dir(root: str, parts: list[str], *, create: bool = False) -> int:
    """A descriptor of ``root/parts``, each part opened without following a link (and, with
    ``create``, made when missing)."""
    fd = os.open(root, _DIR)
    try:
        for name in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=fd)
            child = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make_shared_folder(root: str, name: str) -> None:
    """Make ``root/name`` when missing as the commands could use it: python_repl keeps its
    session in ``.jianmu``, made by the commands' user. Made 0700 by us (as root), it held the
    rest of the run's cells out of it; so the umask and the workspace's default ACL decide, as
    for a folder a command makes, and as root the workspace's owner owns it. The quarantine
    inside stays ours alone."""
    fd = os.open(root, _DIR)
    try:
        try:
            os.mkdir(name, 0o777, dir_fd=fd)
        except FileExistsError:
            return
        if os.geteuid() == 0:
            owner = os.fstat(fd)
            made = os.open(name, _DIR, dir_fd=fd)
            try:
                os.fchown(made, owner.st_uid, owner.st_gid)
            finally:
                os.close(made)
    finally:
        os.close(fd)


def _quarantine_folder(root: str) -> tuple[int, str]:
    """A new folder under `QUARANTINE` (a descriptor, and its path relative to the workspace);
    ``(-1, "")`` when that cannot be made there (a link planted at ``.jianmu``)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        _make_shared_folder(root, QUARANTINE.split("/")[0])
        parent = _open_dir(root, QUARANTINE.split("/"), create=True)
    except OSError:
        return (-1, "")
    try:
        while True:
            name = f"{stamp}-{secrets.token_hex(3)}"
            try:
                os.mkdir(name, 0o700, dir_fd=parent)
            except FileExistsError:
                continue
            return (os.open(name, _DIR, dir_fd=parent), f"{QUARANTINE}/{name}")
    except OSError:
        return (-1, "")
    finally:
        os.close(parent)


def _move(root: str, rel: str, folder: tuple[int, str]) -> str:
    """Rename ``rel`` into ``folder`` under a name nothing looks for (``.git`` there is no
    repository); else next to itself, renamed. Where it went, relative to the workspace."""
    parts = rel.split("/")
    parent = _open_dir(root, parts[:-1])
    try:
        name = parts[-1]
        fd, where = folder
        if fd >= 0:
            kept = "%".join(parts) + ".quarantined"
            with contextlib.suppress(OSError):
                os.rename(name, kept, src_dir_fd=parent, dst_dir_fd=fd)
                return f"{where}/{kept}"
        # no quarantine folder, or another file system: a sibling's name, in the same folder
        kept = f"{name}.quarantined-{secrets.token_hex(3)}"
        os.rename(name, kept, src_dir_fd=parent, dst_dir_fd=parent)
        return "/".join([*parts[:-1], kept])
    finally:
        os.close(parent)


def quarantine_note(moved: list[tuple[str, str]]) -> str:
    """The lines a command's stderr gets for what was moved out of the way (or could not be),
    and for what it renamed away, put back (or not)."""
    made = [f"{rel!r} NOT moved ({where.removeprefix(_STAYED)}): remove it before anything "
            "runs here" if where.startswith(_STAYED) else f"{rel!r} moved to {where!r}"
            for rel, where in moved if not where.startswith((_BACK, _GONE))]
    renamed = [f"{rel!r} put back (it had been renamed {where.removeprefix(_BACK)!r})"
               if where.startswith(_BACK) else
               f"{rel!r} NOT put back ({where.removeprefix(_GONE)}): the next run does not find "
               "what it held; look for it in the workspace"
               for rel, where in moved if where.startswith((_BACK, _GONE))]
    note = ""
    if made:
        note += ("[jianmu sandbox: the command created protected paths (execution.read_only_paths"
                 f": what the host runs or loads later), moved out of the way: "
                 f"{'; '.join(made)}]\n")
    if renamed:
        note += ("[jianmu sandbox: the command renamed protected paths (execution.read_only_paths)"
                 f" or the folders holding them away: {'; '.join(renamed)}]\n")
    return note


class ProtectedPaths:
    """One sandbox's watch over its protected paths, the same for every sandbox: `before`
    each command, `after` it once none of its processes is left.

    A command that did not finish (cancelled, or its sandbox failed) leaves its watch
    pending: the next command's `before` (or `settle`, at close) moves what it made, and the
    next result says so."""

    def __init__(self, workspace: Path, paths: Callable[[], list[str]]) -> None:
        self._workspace, self._paths = workspace, paths
        self._pending: ReadOnlyWatch | None = None
        self._moved: list[tuple[str, str]] = []  # by a command whose result nobody got
        self.replaceable = False
        """Whether commands may rename an existing protected path (`ReadOnlyWatch.take`)."""

    def before(self) -> ReadOnlyWatch:
        """Settle an earlier command's watch, then look at the paths for the next one."""
        self._moved += self.settle()
        watch = self._pending = ReadOnlyWatch.take(self._workspace, self._paths(),
                                                   replaceable=self.replaceable)
        return watch

    def retake(self) -> ReadOnlyWatch:
        """Look again, the command not started yet (the sandbox changed file times itself:
        a new grant)."""
        assert self._pending is not None
        watch = self._pending = ReadOnlyWatch.take(self._workspace, self._paths(),
                                                   replaceable=self.replaceable)
        return watch

    def after(self, result: ExecResult) -> ExecResult:
        """``result``, with a note of what was moved out of the way first on its stderr
        (where no cut of a long output drops it)."""
        moved, self._moved = [*self._moved, *self.settle()], []
        if not moved:
            return result
        return replace(result, stderr=quarantine_note(moved) + result.stderr)

    def settle(self) -> list[tuple[str, str]]:
        """Move what the pending command made at a protected path; what was moved."""
        watch, self._pending = self._pending, None
        if watch is None:
            return []
        moved = watch.quarantine()
        if moved:
            _log.warning("%s", quarantine_note(moved).strip())
        return moved
