"""The warm supervisor's second part: how a child is started, set up, and forked ahead.

Standard library only, like `jianmu.execution._supervisor_main`: the host passes this source
as the supervisor's second argument and the supervisor runs it on its own names (``CONFIG``,
``SHIELDED``...). A command with nothing to do between fork and exec is `Spawned`
(``posix_spawn``, far cheaper than forking Python). `preexec` is what a child forked for a
command does before ``exec``: as
root, enter the cwd, join the command's control group, empty the bounding set, take its own
IPC namespace and load the seccomp filter (as configured); then the rlimits; then drop to the
user.

A `Spare` (``prefork`` on) is that child forked for the next command as soon as the host
named its control group, the root-side part done, in its own session, with its own pipes on
0, 1 and 2, every other descriptor closed and every signal at its default. It waits on a
socket for its command (``argv``, ``env``, whether stdin is fed, the rlimits), sets the
rlimits, drops to the user and execs: per call only a socket round trip and the ``exec`` are
left. It waits as root when the supervisor is root (so no process of the commands' user may
signal it) and is undumpable until its ``exec`` (none may trace it or read its descriptors);
it holds no other command's descriptors and serves one command. A set-up that fails ends it,
and the command forks the usual way.
"""

import contextlib
import gc
import json
import os
import resource
import select
import selectors
import signal
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time the supervisor runs this file on its own names
    from jianmu.execution._supervisor_isolation import harden
    from jianmu.execution._supervisor_main import (
        CONFIG,
        SHIELDED,
        SIGDEF,
        Child,
        empty_bounding_set,
    )


def child_setup(cwd, procs):
    """What a child does before it runs a command: as root, then as the user.

    Returns ``(enter, drop)``: ``enter`` resets the signals, enters ``cwd`` as root (like
    bubblewrap's --chdir and a cold start), joins the control group, empties the bounding
    set and hardens the child (`harden`: IPC namespace, seccomp filter); ``drop`` drops to
    the user (every capability goes) and enters ``cwd`` if root could not. The rlimits go
    between the two.
    """
    user, capbset = CONFIG.get("user"), CONFIG.get("capbset")
    shielded = SHIELDED if CONFIG.get("shield") else []
    moved = [True]

    def enter():
        for sig in shielded:  # an ignored signal would stay ignored across exec
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.chdir(cwd)
        except PermissionError:
            moved[0] = False  # a private /tmp on the way that only the user may pass
        for name in procs:
            fd = os.open(name, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        if capbset and not empty_bounding_set():
            raise OSError("could not empty the capability bounding set")
        harden()  # its own IPC namespace, the seccomp filter: as root, ahead of the call

    def drop():
        if user is not None:
            os.setgroups([])
            os.setresgid(user[1], user[1], user[1])
            os.setresuid(user[0], user[0], user[0])  # from root: every capability goes
        if not moved[0]:
            os.chdir(cwd)

    return enter, drop


def preexec(cwd, procs, limits):
    """The whole set-up of a child forked for one command (subprocess's preexec_fn)."""
    enter, drop = child_setup(cwd, procs)

    def run():  # in the child between fork and exec
        enter()
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        drop()

    return run


def which(name, path):
    """``name`` searched for in ``path`` (the command's PATH, as subprocess does)."""
    if "/" in name:
        return name
    denied = None
    for folder in path.split(os.pathsep):
        full = os.path.join(folder or ".", name)
        if os.path.isfile(full):
            if os.access(full, os.X_OK):
                return full
            denied = full
    if denied is not None:
        raise PermissionError(13, "Permission denied", denied)
    raise FileNotFoundError(2, "No such file or directory", name)


class Spawned(Child):
    """A command started with ``posix_spawn`` in its own session, Popen's few methods."""

    def __init__(self, argv, env, cwd, with_stdin):
        path = which(argv[0], env.get("PATH", os.defpath))
        if with_stdin:
            child_in, parent_in = os.pipe()
        else:
            child_in, parent_in = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            try:
                os.chdir(cwd)
            except OSError as exc:
                raise ValueError(f"cannot enter {cwd!r}: {exc.strerror}") from None
            self.pid = os.posix_spawn(
                path, argv, env, setsid=True, setsigdef=SIGDEF,
                file_actions=[(os.POSIX_SPAWN_DUP2, child_in, 0),
                              (os.POSIX_SPAWN_DUP2, out_w, 1),
                              (os.POSIX_SPAWN_DUP2, err_w, 2)],
            )
        except BaseException:
            for fd in (parent_in, out_r, err_r):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            os.chdir("/")
            for fd in (child_in, out_w, err_w):
                os.close(fd)
        self.stdin = None if parent_in is None else os.fdopen(parent_in, "wb", buffering=0)
        self.stdout = os.fdopen(out_r, "rb", buffering=0)
        self.stderr = os.fdopen(err_r, "rb", buffering=0)
        self.returncode = None


READY = b"R"  # the child wrote this once set up: it waits for its command
FAILED = b"E"  # then a JSON {"errno", "text"}: the command could not start


def read_all(fd):
    """Everything from ``fd`` until its end."""
    parts: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


def child(sock, stdin, stdout, stderr, enter, drop, shielded):  # pragma: no cover
    """In the forked child: set up, wait for the command, ``exec`` it; never returns."""
    code = 1
    try:
        gc.disable()  # no finaliser may close a descriptor number we reuse
        for sig in shielded:  # a handled or ignored signal would not be the default after exec
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        if sock != 3:
            os.dup2(sock, 3, inheritable=False)
        os.closerange(4, 1 << 20)  # the supervisor's pipes, other commands' pipes
        enter()  # as root: enter cwd, join the control group, empty the bounding set
        os.write(3, READY)
        msg = json.loads(read_all(3))  # the supervisor ends its side once it is sent
        code = 127
        if not msg["stdin"]:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        for which, value in msg["rlimits"]:
            resource.setrlimit(which, (value, value))
        drop()  # to the user, only now: till here no process of the user could reach us
        execute(msg["argv"], msg["env"])
    except BaseException as exc:  # reported, then the child ends
        if code == 127:
            err = exc.errno if isinstance(exc, OSError) and exc.errno else 0
            with contextlib.suppress(OSError):
                os.write(3, FAILED + json.dumps({"errno": err, "text": str(exc)}).encode())
    finally:
        os._exit(code)


def execute(argv, env):  # pragma: no cover - in the child
    """``execve`` ``argv[0]`` searched for in the command's ``PATH``, as subprocess does."""
    name = argv[0]
    if "/" in name:
        os.execve(name, argv, env)
    folders = os.get_exec_path(env)
    # A failed execve costs far more than access() in a forked Python (a PATH of the host's
    # may list several folders before the right one): exec the first entry the user may run
    # at once; if that fails, the full search below decides, as before.
    for folder in folders:
        full = os.path.join(folder, name)
        if os.access(full, os.X_OK):
            with contextlib.suppress(OSError):
                os.execve(full, argv, env)
            break
    first = last = None
    for folder in folders:
        try:
            os.execve(os.path.join(folder, name), argv, env)
        except (FileNotFoundError, NotADirectoryError) as exc:
            last = exc
        except OSError as exc:
            first = first or exc
    raise first or last or FileNotFoundError(2, "No such file or directory", name)


class Launched(Child):
    """A command running in what was a `Spare`: Popen's few methods."""

    def __init__(self, spare, stdin):
        self.pid, self.sock = spare.pid, spare.sock
        self.stdin = stdin
        self.stdout = os.fdopen(spare.out_r, "rb", buffering=0)
        self.stderr = os.fdopen(spare.err_r, "rb", buffering=0)
        self.returncode = None

    def failure(self, argv0):
        """Why the command did not start (an OSError), or ``None`` if it did; after `wait`."""
        data = b""
        with contextlib.suppress(OSError):
            self.sock.setblocking(False)
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
        self.sock.close()
        if not data.startswith(FAILED):
            return None
        try:
            info = json.loads(data[len(FAILED):])
        except ValueError:
            return OSError("the command's process failed before exec")
        if info.get("errno"):
            return OSError(info["errno"], os.strerror(info["errno"]), argv0)
        return OSError(info.get("text") or "the command's process failed before exec")


class Spare:
    """One pre-forked child waiting for its command, in control group ``procs`` and ``cwd``."""

    def __init__(self, procs, cwd, enter, drop, shielded):
        self.procs, self.cwd = list(procs), cwd
        self.replaced = 0
        self.reaped = False
        ours, theirs = socket.socketpair()
        pipes = [os.pipe() for _ in range(3)]
        self.pid = os.fork()
        if self.pid == 0:
            child(theirs.fileno(), pipes[0][0], pipes[1][1], pipes[2][1], enter, drop, shielded)
        theirs.close()
        for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
            os.close(fd)
        self.sock = ours
        self.in_w, self.out_r, self.err_r = pipes[0][1], pipes[1][0], pipes[2][0]
        self.open = True
        self.pidfd: int | None = None
        with contextlib.suppress(OSError, AttributeError):
            self.pidfd = os.pidfd_open(self.pid)

    def fits(self, procs, cwd):
        """Whether a command in control group ``procs`` and ``cwd`` may run here."""
        return self.open and self.procs == list(procs) and self.cwd == cwd

    def launch(self, argv, env, data, rlimits, wait=1.0):
        """Hand the command over and return it as `Launched`; ``None`` if this child is not
        usable (died or stuck while idle): it is then discarded."""
        try:
            ready, _, _ = select.select([self.sock], [], [], wait)
            if not ready or self.sock.recv(1) != READY or self.exited():
                raise OSError("the pre-forked child is not ready")
            self.sock.settimeout(wait)
            payload = {"argv": argv, "env": env, "stdin": bool(data), "rlimits": rlimits}
            self.sock.sendall(json.dumps(payload).encode(), socket.MSG_NOSIGNAL)
            self.sock.shutdown(socket.SHUT_WR)  # the child starts at the end of this stream
        except OSError:
            self.discard()
            return None
        self.open = False
        if self.pidfd is not None:
            os.close(self.pidfd)
        if data:
            stdin = os.fdopen(self.in_w, "wb", buffering=0)
        else:
            os.close(self.in_w)
            stdin = None
        return Launched(self, stdin)

    def exited(self):
        """Whether the child ended (it is reaped then)."""
        return self.reap() is not None

    def reap(self):
        """The child's wait status once it ended (reaped then, once), else ``None``."""
        if self.reaped:
            return 0
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, 0
        if not pid:
            return None
        self.reaped = True
        return status

    def discard(self):
        """Kill and reap the child and close our ends; idempotent."""
        if not self.open:
            return
        self.open = False
        if not self.reaped:  # a reaped pid may be another process's by now
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.reaped = True
        for fd in (self.in_w, self.out_r, self.err_r, self.pidfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.sock.close()


class Prefork:
    """The supervisor's one pre-forked child, made for the command the host named as next.

    Forked at once when it waits as root (``root``: the commands' user can neither signal
    nor trace it, so it may exist while a command runs), else only while nothing runs.
    """

    def __init__(self, sel):
        self.sel, self.root = sel, CONFIG.get("user") is not None
        self.spare, self.next, self.replaced = None, None, 0

    def take(self, msg):
        """The spare if the command fits it (its control group and cwd), else ``None``."""
        spare, self.spare = self.spare, None
        self.next, self.replaced = msg.get("next"), 0  # where the host puts the one after
        if spare is None:
            return None
        self._forget(spare)
        if spare.fits(msg.get("procs") or [], msg["cwd"]):
            return spare
        spare.discard()  # its limits or its cwd changed: a fresh child the usual way
        return None

    def refill(self, busy):
        """Fork the next command's child if the host named its control group."""
        if self.spare is not None or not self.next or (busy and not self.root):
            return
        nxt, self.next = self.next, None
        try:
            enter, drop = child_setup(nxt["cwd"], nxt["procs"])
            spare = Spare(nxt["procs"], nxt["cwd"], enter, drop, SHIELDED)
        except OSError:
            return  # no fork now: the command forks the usual way
        self.spare = spare
        if spare.pidfd is not None:
            self.sel.register(spare.pidfd, selectors.EVENT_READ, (self, "spare"))

    def on_event(self, _what):
        """The spare ended while idle: replaced if a signal ended it (a few times)."""
        spare = self.spare
        status = None if spare is None else spare.reap()
        if spare is None or status is None:
            return
        self.spare = None
        self._forget(spare)
        spare.discard()
        if os.WIFSIGNALED(status) and self.replaced < 3:  # a failed set-up exits, no signal
            self.replaced += 1
            self.next = {"procs": spare.procs, "cwd": spare.cwd}

    def _forget(self, spare):
        if spare.pidfd is not None:
            self.sel.unregister(spare.pidfd)

    def close(self):
        spare, self.spare = self.spare, None
        if spare is not None:
            spare.discard()
