"""The warm supervisor: one long-lived process inside a sandbox that starts each command.

Standalone, standard library only: the host runs it as ``python3 -I -S -c <this source>
<config JSON>`` inside the sandbox's isolation (a bubblewrap namespace, a container). Frames go
both ways on stdin/stdout: ``>II`` (header length, payload length), a JSON header, the payload.

Host to supervisor: ``{"op": "run", "id", "argv", "env", "cwd", "timeout", "limit", "rlimits",
"procs", "oom"}`` with stdin as payload; ``{"op": "kill", "id"}``. Supervisor to host: ``{"ready":
pid}`` once, then per command ``{"id", "exit", "timed_out", "duration", "out", "err",
"out_dropped", "err_dropped", "oom", "error", "empty"}`` with stdout then stderr as payload
(``empty``: its group was seen empty). Each command is a fresh child in its own session, with its
rlimits, its control group (``procs``: files it writes ``0`` to before exec) and the user dropped;
at its exit or timeout its process group and control group are killed, and in ``sweep`` mode (one
command at a time, inside a container only) every process the supervisor may signal (``kill(-1)``,
repeated until none is left). The supervisor is not dumpable, so a command of the same uid can
neither trace it nor open its pipes through ``/proc``; ``guarded`` in the ready frame says so. In
``shield`` mode it ignores every signal it may (a command of its own uid can still SIGKILL or stop
it: the host then sees its stream end, or no reply, and sweeps from outside).

What a command leaves in the kernel (IPC objects, keys) reaches no other: see the third part,
`jianmu.execution._supervisor_isolation`. SIGPIPE is ignored: a command that closes its stdin
only ends what it is fed.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import struct
import subprocess
import sys
import time
from typing import IO

HEAD = struct.Struct(">II")
DRAIN = 1.0  # after a kill, how long to read what is left in the pipes
CONFIG = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}


try:
    import ctypes
except ImportError:  # an image's python3 without it: no guard, and the host says so
    ctypes = None  # type: ignore[assignment]


def _libc():
    try:
        return None if ctypes is None else ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


LIBC = _libc()  # loaded once: a child between fork and exec must not load libraries


def prctl(option, arg):
    """``prctl(option, arg)``, or -1 where ctypes is missing."""
    return -1 if LIBC is None else LIBC.prctl(option, arg, 0, 0, 0)


def last_cap():
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63


LAST_CAP = last_cap()
# what a command of our uid could send us; ignored in shield mode, reset in each child
SHIELDED = [s for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                        signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE,
                        signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGVTALRM,
                        signal.SIGPROF, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGIO)]
SIGDEF = SHIELDED  # what a spawned command starts with at its default (Python ignores some)


def write_frame(header, payload=b""):
    data = json.dumps(header).encode()
    view = memoryview(HEAD.pack(len(data), len(payload)) + data + payload)
    while view:
        view = view[os.write(1, view):]


def read_count(path):
    """The ``oom_kill`` count in a memory control file, or 0."""
    try:
        with open(path) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def read_small(path):
    """A small kernel file's bytes (a control group's process list), in few system calls."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = b""
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return data
            data += chunk
    finally:
        os.close(fd)


def oom_total(paths):
    return sum(read_count(p) for p in paths)


def ours_left():
    """Live processes of our uid but us (zombies wait for pid 1 to reap them)."""
    me, uid, found = os.getpid(), str(os.getuid()), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except (OSError, ValueError):
            continue
        uids = fields.get("Uid", "").split()
        if fields.get("State", "").strip().startswith("Z") or uid not in uids[:1] + uids[2:3]:
            continue  # kill() reaches a process whose real or saved uid is ours
        found.append(int(name))
    return found


def sweep(wait):
    """``kill(-1)`` until nothing of our uid is left; return whether something still is.

    kill(-1) succeeds as long as any other process exists (it counts refusals too), so the
    process table says when we are done.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # every process of our uid but us and pid 1
        except OSError:
            pass
        if not ours_left():
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.001)


def start_failure(msg, exc):
    """A command that could not start, reported as a shell would (127: not found)."""
    code = 126 if isinstance(exc, PermissionError) else 127
    text = f"{msg['argv'][0]}: {exc.strerror or exc}\n".encode(errors="replace")[:msg["limit"]]
    write_frame({"id": msg["id"], "exit": code, "timed_out": False, "duration": 0.0,
                 "out": 0, "err": len(text), "out_dropped": 0, "err_dropped": 0, "oom": 0,
                 "left": 0, "error": None}, text)


class Child:
    """Popen's ``poll`` and ``wait`` for a child whose ``pid`` is known (the second part's
    `Spawned` and `Launched` are ones too)."""

    pid = 0
    returncode = None
    stdin: IO[bytes] | None = None
    stdout: IO[bytes]
    stderr: IO[bytes]

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self):
        if self.returncode is None:
            _pid, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def empty_bounding_set():
    """Drop every capability from the bounding set; whether it is empty now.

    The supervisor does it once at start (it never execs, and its own capabilities stay), so
    that the children it forks inherit an empty set and need not drop it each time.
    """
    for cap in range(LAST_CAP + 1):
        if prctl(23, cap) == 1 and prctl(24, cap) != 0:  # PR_CAPBSET_READ, PR_CAPBSET_DROP
            return False
    return True


def load_part():
    """What the other parts (arguments 2 on) define, run on our names: how a child is set up
    as root (``preexec``) and forked ahead (``Prefork``), `_supervisor_spare`; what keeps one
    command's kernel state from the next (``harden``, ``clear_ipc``), `_supervisor_isolation`."""
    scope = dict(globals())
    for index, source in enumerate(sys.argv[2:]):
        exec(compile(source, f"<part {index + 2}>", "exec"), scope)
    return scope


PART = load_part()


class Command:
    """One running command: its process, capped output, deadline and clean-up."""

    def __init__(self, sel, msg, data, spare=None):
        self.id, self.sel = msg["id"], sel
        self.argv0 = msg["argv"][0]
        self.limit = msg["limit"]
        self.procs = msg.get("procs") or []
        self.oom_files = msg.get("oom") or CONFIG.get("oom") or []
        self.oom_before = oom_total(self.oom_files)
        self.kept = [bytearray(), bytearray()]
        self.dropped = [0, 0]
        self.start = time.monotonic()
        self.deadline = self.start + msg["timeout"]
        self.drain_until = None
        self.left = 0
        self.emptied = False
        self.exited = self.timed_out = False
        self.pending = memoryview(data)
        self.pidfd = None
        env = {**os.environ, **msg["env"]} if CONFIG.get("inherit_env") else msg["env"]
        launched = None if spare is None else spare.launch(
            msg["argv"], env, data, msg.get("rlimits") or [])
        self.preforked = launched is not None
        self.proc: subprocess.Popen[bytes] | Child
        if launched is not None:  # the pre-forked child: set up already, it only execs
            self.proc = launched
        elif self.procs or msg.get("rlimits") or CONFIG.get("user") is not None \
                or CONFIG.get("capbset") or CONFIG.get("seccomp") or CONFIG.get("own_ipc"):
            self.proc = subprocess.Popen(
                msg["argv"], stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                start_new_session=True, preexec_fn=PART["preexec"](
                    msg["cwd"], self.procs, [tuple(x) for x in msg.get("rlimits", [])]),
            )
        else:  # nothing to do between fork and exec: spawn, far cheaper than forking Python
            self.proc = PART["Spawned"](msg["argv"], env, msg["cwd"], bool(data))
        sel.register(self.proc.stdout, selectors.EVENT_READ, (self, 0))
        sel.register(self.proc.stderr, selectors.EVENT_READ, (self, 1))
        if self.proc.stdin is not None:
            os.set_blocking(self.proc.stdin.fileno(), False)
            sel.register(self.proc.stdin, selectors.EVENT_WRITE, (self, "in"))
        try:
            self.pidfd = os.pidfd_open(self.proc.pid)
            sel.register(self.pidfd, selectors.EVENT_READ, (self, "exit"))
        except (OSError, AttributeError):
            self.pidfd = None

    def watched(self):
        return any(k.data[0] is self and k.data[1] in (0, 1)
                   for k in self.sel.get_map().values())

    def on_event(self, what):
        if what == "exit":
            self.exited = True
            self.sel.unregister(self.pidfd)
        elif what == "in":
            stdin = self.proc.stdin
            assert stdin is not None
            try:
                written = os.write(stdin.fileno(), self.pending[:65536])
            except BlockingIOError:
                written = 0
            except OSError:
                written = len(self.pending)  # the command stopped reading: drop the rest
            self.pending = self.pending[written:]
            if not self.pending:
                self.sel.unregister(stdin)
                stdin.close()
        else:
            stream = self.proc.stdout if what == 0 else self.proc.stderr
            assert stream is not None
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                self.sel.unregister(stream)
                return
            room = self.limit - len(self.kept[what])
            if room > 0:
                self.kept[what] += chunk[:room]
            self.dropped[what] += max(0, len(chunk) - max(room, 0))

    def kill(self, wait):
        """Kill the process group, the control group and, in sweep mode, all we may."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if CONFIG.get("sweep"):
            try:
                os.kill(-1, signal.SIGKILL)  # once: our own child may be a zombie still
            except OSError:
                pass
        deadline = time.monotonic() + wait
        self.left = 0
        while self.procs:
            pids: set[int] = set()
            for name in self.procs:
                try:
                    pids.update(int(x) for x in read_small(name).split())
                except (OSError, ValueError):
                    pids.add(-1)  # unreadable: not known to be empty
            # nothing alive in the group: nothing can enter it again (only we and the host
            # move processes in), so later kills of this command may be skipped
            self.emptied = self.emptied or not pids
            pids.discard(0)  # outside our pid namespace: the host kills those
            pids.discard(-1)
            self.left = len(pids)
            if not pids or time.monotonic() > deadline:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.002)

    def step(self, now):
        """Move on at exit or deadline; return whether the command is finished."""
        if self.pidfd is None and not self.exited and self.proc.poll() is not None:
            self.exited = True
        open_pipes = self.watched()
        if self.drain_until is None and (self.exited or now >= self.deadline):
            self.timed_out = not self.exited
            self.kill(1.0)
            self.drain_until = time.monotonic() + DRAIN
        if not open_pipes and self.drain_until is None:
            return False  # pipes closed, process alive: wait for its exit or the deadline
        return not open_pipes or (self.drain_until is not None and now >= self.drain_until)

    def wake_at(self):
        return self.drain_until if self.drain_until is not None else self.deadline

    def finish(self):
        for key in list(self.sel.get_map().values()):
            if key.data[0] is self:
                self.sel.unregister(key.fileobj)
        if not self.emptied:
            self.kill(1.0)
        code = self.proc.wait()
        if not self.emptied:
            self.kill(1.0)  # its zombie is reaped: the group can empty now
        if CONFIG.get("sweep") and sweep(1.0):
            self.left = max(self.left, 1)  # the host sweeps from outside
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self.pidfd is not None:
            os.close(self.pidfd)
        failed = self.proc.failure(self.argv0) if self.preforked else None  # type: ignore
        if failed is not None:  # as subprocess raises it: the command never ran
            write_frame({"id": self.id, "error": f"could not start {self.argv0!r}: {failed}"})
            return
        out, err = bytes(self.kept[0]), bytes(self.kept[1])
        write_frame({
            "id": self.id, "exit": code, "timed_out": self.timed_out,
            "duration": time.monotonic() - self.start, "out": len(out), "err": len(err),
            "out_dropped": self.dropped[0], "err_dropped": self.dropped[1],
            "oom": oom_total(self.oom_files) - self.oom_before, "left": self.left,
            "error": None, "prefork": self.preforked, "empty": self.emptied,
        }, out + err)


class NoPrefork:
    """Where nothing is forked ahead (``prefork`` off): every command forks when it comes."""

    def take(self, _msg):
        return None

    def refill(self, _busy):
        pass

    def close(self):
        pass


def main():
    guarded = prctl(4, 0) == 0  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/fd, same uid
    if CONFIG.get("sweep") and (os.getuid() == 0 or not os.path.exists("/.dockerenv")):
        guarded = False  # kill(-1) belongs in a container, as an unprivileged user
        CONFIG["sweep"] = False
    # a command that closes its stdin must not end us: a write there fails with EPIPE instead
    # (every child starts with SIGPIPE at its default again)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if CONFIG.get("capbset") and empty_bounding_set():
        CONFIG["capbset"] = False  # inherited empty by every child
    if CONFIG.get("shield"):
        for sig in SHIELDED:
            signal.signal(sig, signal.SIG_IGN)
    if CONFIG.get("clear_ipc") and not PART["clear_ipc"]():
        return  # what an earlier supervisor's command left stays: refuse to serve beside it
    sel = selectors.DefaultSelector()
    os.set_blocking(0, False)
    sel.register(0, selectors.EVENT_READ, (None, "host"))
    commands: dict[int, Command] = {}
    prefork = PART["Prefork"](sel) if CONFIG.get("prefork") else NoPrefork()
    write_frame({"ready": os.getpid(), "guarded": guarded})
    if not guarded and CONFIG.get("require_guard"):
        return
    try:
        serve(sel, commands, prefork)
    except BrokenPipeError:
        pass  # the host stopped reading: it is gone
    finally:  # nothing of ours may outlive the host
        prefork.close()
        for cmd in commands.values():
            cmd.kill(0.5)


def serve(sel, commands, prefork):
    """Run the host's commands until its stream ends (or a command leaves IPC objects that
    cannot be removed: a fresh supervisor then serves the next call)."""
    buf = bytearray()
    while True:
        now = time.monotonic()
        wait = min((c.wake_at() for c in commands.values()), default=now + 3600) - now
        for key, _mask in sel.select(max(wait, 0)):
            owner, what = key.data
            if owner is not None:
                owner.on_event(what)
                continue
            try:
                chunk = os.read(0, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:  # the host is gone
                return
            buf += chunk
            while len(buf) >= HEAD.size:
                hlen, plen = HEAD.unpack_from(buf)
                if len(buf) < HEAD.size + hlen + plen:
                    break
                msg = json.loads(bytes(buf[HEAD.size:HEAD.size + hlen]))
                data = bytes(buf[HEAD.size + hlen:HEAD.size + hlen + plen])
                del buf[:HEAD.size + hlen + plen]
                if msg.get("op") == "kill":
                    found = commands.get(msg["id"])
                    if found is not None and found.drain_until is None:
                        found.kill(0.2)
                    continue
                try:
                    commands[msg["id"]] = Command(sel, msg, data, prefork.take(msg))
                    prefork.refill(True)  # as root, it prepares while this command runs
                except OSError as exc:
                    if not CONFIG.get("shell_codes"):
                        write_frame({"id": msg["id"], "error": f"could not start "
                                     f"{msg['argv'][0]!r}: {exc}"})
                    else:
                        start_failure(msg, exc)
                except (subprocess.SubprocessError, ValueError) as exc:
                    write_frame({"id": msg["id"], "error": f"could not start "
                                 f"{msg['argv'][0]!r}: {exc}"})
        now = time.monotonic()
        finished = [k for k, c in commands.items() if c.step(now)]
        for done in finished:
            commands.pop(done).finish()
        # after the reply, before the next request is read: the next command sees none of it
        if finished and not commands and CONFIG.get("clear_ipc") and not PART["clear_ipc"]():
            return
        prefork.refill(bool(commands))

if __name__ == "__main__":
    main()
