"""Issue 27, items 1-5: what one warm sandbox call can see of another, locally and in Docker.

A warm sandbox's supervisor outlives each call, so what a call leaves in the kernel rather than
in files could reach the next call, another sandbox or another run: System V objects and POSIX
message queues (its IPC namespace), memory parked where no command's limit counts it, the
kernel keyring (one per uid), a running call's process (its environment). None of it does. And
a command that closes its stdin while it is still fed ends only itself, not the supervisor.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from jianmu.execution._process import cgroup_support
from jianmu.execution.docker_sandbox import DockerSandbox
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
from tests.execution._helpers import require_docker

pytestmark = pytest.mark.anyio

_ROOT_BWRAP = pytest.mark.skipif(
    os.geteuid() != 0 or not bwrap_available(network=False),
    reason="a warm bubblewrap supervisor needs root and bubblewrap")
_CGROUPS = pytest.mark.skipif(cgroup_support() is None,
                              reason="no control groups: no warm supervisor")
KINDS = [
    pytest.param("local", id="local", marks=_CGROUPS),
    pytest.param("local-bwrap", id="local-bwrap", marks=[_CGROUPS, _ROOT_BWRAP]),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]
LOCAL_KINDS = KINDS[:2]
Opener = Callable[..., Any]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    path.chmod(0o777)  # Docker's user writes here too
    return path


@pytest.fixture
def opener(request: pytest.FixtureRequest, workspace: Path) -> Opener:
    """Opens a started sandbox of the test's kind: ``async with opener(**options) as box``."""
    kind = request.node.callspec.params["kind"]
    if kind == "docker":
        require_docker()

    @asynccontextmanager
    async def open_box(**options: Any) -> AsyncIterator[Any]:
        box: Any
        if kind == "docker":
            box = DockerSandbox(workspace, timeout=30, **options)
        else:
            bwrap = kind == "local-bwrap"
            box = LocalSandbox(workspace, use_bwrap=bwrap, network=not bwrap, timeout=30,
                               **options)
        async with box:
            await box.exec("true")  # the supervisor runs from here on
            assert box.warm_problem is None or options.get("warm") is False, box.warm_problem
            box.py = "python3" if kind == "docker" else box.python
            yield box

    return open_box


# --- item 1: System V objects and POSIX message queues -------------------------------------

_IPC = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
mode, key, name = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
IPC_CREAT, IPC_NOWAIT, SHM_RDONLY = 0o1000, 0o4000, 0o10000

class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 64)]

if mode == "write":
    secret = sys.argv[4].encode()
    shm = libc.shmget(key, 4096, IPC_CREAT | 0o666)
    ctypes.memmove(libc.shmat(shm, None, 0), secret, len(secret))
    queue = libc.msgget(key, IPC_CREAT | 0o666)
    sent = libc.msgsnd(queue, ctypes.byref(Msg(1, secret)), len(secret), IPC_NOWAIT)
    mq = libc.mq_open(name, os.O_CREAT | os.O_RDWR, 0o666, None)
    posted = libc.mq_send(mq, secret, len(secret), 0) if mq >= 0 else -1
    print("MADE", shm >= 0, sent == 0, posted == 0)
else:
    shm = libc.shmget(key, 0, 0)
    if shm >= 0:
        addr = libc.shmat(shm, None, SHM_RDONLY)
        if addr not in (None, ctypes.c_void_p(-1).value):
            print("SEEN shm", ctypes.string_at(addr, 64))
    queue = libc.msgget(key, 0)
    if queue >= 0:
        msg = Msg()
        n = libc.msgrcv(queue, ctypes.byref(msg), 64, 0, IPC_NOWAIT)
        print("SEEN msg", msg.mtext[:max(n, 0)])
    mq = libc.mq_open(name, os.O_RDONLY | os.O_NONBLOCK)
    if mq >= 0:
        buf = ctypes.create_string_buffer(1 << 16)
        n = libc.mq_receive(mq, buf, len(buf), None)
        print("SEEN mq", buf.raw[:max(n, 0)])
    for kind in ("shm", "msg", "sem"):
        try:
            rows = open(f"/proc/sysvipc/{kind}").read().splitlines()[1:]
        except OSError:
            rows = []
        print("OBJECTS", kind, len(rows))
"""


def _host_keys() -> str:
    """The host IPC namespace's System V objects (their keys lead each line)."""
    return "".join(Path(f"/proc/sysvipc/{k}").read_text() for k in ("shm", "msg", "sem"))


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("kind", KINDS)
async def test_ipc_objects_reach_no_other_call(opener: Opener, kind: str, warm: bool) -> None:
    key, name = 0x4A4D0000 + uuid.uuid4().int % 0xFFFF, f"/jm-{uuid.uuid4().hex[:8]}"
    secret = f"IPC-SECRET-{uuid.uuid4().hex[:10]}"
    async with opener(warm=warm) as box:
        made = await box.exec([box.py, "-c", _IPC, "write", str(key), name, secret])
        assert made.stdout == "MADE True True True\n", made
        for _ in range(2):  # the next call, and the one after a call that did nothing
            seen = await box.exec([box.py, "-c", _IPC, "read", str(key), name])
            assert "SEEN" not in seen.stdout and secret not in seen.stdout, seen
            assert seen.stdout.count(" 0\n") == 3, seen  # no object at all
            await box.exec("true")
        async with opener() as other:  # another sandbox, another run
            seen = await other.exec([other.py, "-c", _IPC, "read", str(key), name])
            assert "SEEN" not in seen.stdout and secret not in seen.stdout, seen
    if kind != "docker":
        assert f"{key} " not in _host_keys()  # nothing reached the host's namespace


# --- item 2: memory that outlives a call ---------------------------------------------------

_PARK_SHM = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
size = int(sys.argv[1]) << 20
shm = libc.shmget(0, size, 0o1000 | 0o600)  # IPC_PRIVATE, never removed
ctypes.memset(libc.shmat(shm, None, 0), 1, size)
print("PARKED")
"""


def _sandbox_memory(before: set[Path]) -> int:
    """Bytes charged now to the sandbox groups made since ``before`` was listed."""
    total = 0
    for group in _sandbox_groups() - before:
        for name in ("memory.usage_in_bytes", "memory.current"):
            path = group / name
            if path.exists():
                total += int(path.read_text())
    return total


def _sandbox_groups() -> set[Path]:
    """This process's top-level sandbox groups in the memory hierarchy."""
    support = cgroup_support()
    assert support is not None and "memory" in support.controllers
    return set(support.parents["memory"].glob(f"jianmu-{os.getpid()}-*"))


@pytest.mark.skipif(cgroup_support() is None or "memory" not in cgroup_support().controllers,
                    reason="no memory control group")
@pytest.mark.parametrize("kind", LOCAL_KINDS)
async def test_shared_memory_left_by_calls_stays_within_memory_mb(
    opener: Opener, kind: str
) -> None:
    before = _sandbox_groups()
    async with opener(memory_mb=64) as box:
        for _ in range(3):  # 3 x 40 MiB, each call within its limit
            await box.exec([box.py, "-c", _PARK_SHM, "40"])
        held = _sandbox_memory(before)
        assert held <= 64 << 20, f"the sandbox holds {held >> 20} MiB past memory_mb=64"


@pytest.mark.skipif(cgroup_support() is None or "memory" not in cgroup_support().controllers,
                    reason="no memory control group")
@pytest.mark.parametrize("kind", [LOCAL_KINDS[0]])
async def test_files_in_a_tmpfs_left_by_calls_stay_within_memory_mb(
    opener: Opener, kind: str
) -> None:
    # without bubblewrap the commands write the host's /dev/shm (a tmpfs): RAM, not disk
    tag = uuid.uuid4().hex[:8]
    parked = [Path(f"/dev/shm/jm-park-{tag}-{i}") for i in range(3)]
    try:
        async with opener(memory_mb=64) as box:
            for path in parked:
                await box.exec(f"head -c 41943040 /dev/zero > {path}")
            held = sum(p.stat().st_size for p in parked if p.exists())
            assert held <= 64 << 20, f"{held >> 20} MiB parked past memory_mb=64"
    finally:
        for path in parked:
            path.unlink(missing_ok=True)


# --- item 3: the kernel keyring ------------------------------------------------------------

_KEYS = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, REQUEST_KEY, KEYCTL = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[
    os.uname().machine]
desc = sys.argv[2].encode()
if sys.argv[1] == "add":
    payload = sys.argv[3].encode()
    for keyring in (-4, -3, -5):  # @u, @s, @us
        got = libc.syscall(ADD_KEY, b"user", desc, payload, len(payload), keyring)
        print("ADD", keyring, got, ctypes.get_errno() if got < 0 else 0)
    if os.uname().machine == "x86_64":  # the x32 spelling of add_key
        got = libc.syscall(0x40000000 | ADD_KEY, b"user", desc, payload, len(payload), -4)
        print("ADD-X32", got, ctypes.get_errno() if got < 0 else 0)
else:
    for keyring in (-4, -3, -5):
        found = libc.syscall(KEYCTL, 10, keyring, b"user", desc, 0)  # KEYCTL_SEARCH
        if found > 0:
            buf = ctypes.create_string_buffer(256)
            n = libc.syscall(KEYCTL, 11, found, buf, 256)  # KEYCTL_READ
            print("READ", buf.raw[:max(n, 0)])
    got = libc.syscall(REQUEST_KEY, b"user", desc, None, 0)
    print("REQUEST", got)
"""


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="syscall numbers")
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("kind", KINDS)
async def test_the_kernel_keyring_is_out_of_reach(opener: Opener, kind: str, warm: bool) -> None:
    desc, secret = f"jm-{uuid.uuid4().hex[:10]}", f"KEY-SECRET-{uuid.uuid4().hex[:10]}"
    async with opener(warm=warm) as box:
        added = await box.exec([box.py, "-c", _KEYS, "add", desc, secret])
        lines = added.stdout.splitlines()
        assert len(lines) >= 3 and all(line.endswith(" -1 1") for line in lines), added  # EPERM
        seen = await box.exec([box.py, "-c", _KEYS, "search", desc])
        assert secret not in seen.stdout and "READ" not in seen.stdout, seen
        async with opener() as other:  # another run
            seen = await other.exec([other.py, "-c", _KEYS, "search", desc])
            assert secret not in seen.stdout and "READ" not in seen.stdout, seen


_NAMESPACES = r"""
import ctypes, errno, os, threading, subprocess
libc = ctypes.CDLL(None, use_errno=True)
CLONE, CLONE3 = {"x86_64": (56, 435), "aarch64": (220, 435)}[os.uname().machine]
def said(name, got):
    print(name, "ok" if got >= 0 else errno.errorcode[ctypes.get_errno()])
said("unshare-user", libc.unshare(0x10000000))  # CLONE_NEWUSER
said("unshare-net", libc.unshare(0x40000000))
if os.uname().machine == "x86_64":  # the x32 spelling: refused too, not left to the kernel
    got = libc.syscall(0x40000000 | 272, 0x10000000)
    print("unshare-x32", "ok" if got >= 0 else errno.errorcode[ctypes.get_errno()])
got = libc.syscall(CLONE, 0x10000000 | 17, 0, 0, 0, 0)  # a child in a user namespace
if got == 0:
    os._exit(0)
if got > 0:
    os.waitpid(got, 0)
said("clone-user", got)
said("clone3", libc.syscall(CLONE3, 0, 0))
said("setns", libc.setns(os.open("/proc/self/ns/user", os.O_RDONLY), 0))
# what commands do every day still works: threads (clone3 first, then clone), processes
done = []
worker = threading.Thread(target=done.append, args=[1])
worker.start()
worker.join()
child = subprocess.run(["echo", "child"], capture_output=True, text=True)
print("thread", done, child.stdout.strip())
"""


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="syscall numbers")
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_command_makes_no_namespace(opener: Opener, kind: str, warm: bool) -> None:
    """A user namespace of its own gives a command every capability in it, and with them the
    kernel's least-trodden code (netfilter tables, mounts): the road of most container
    escapes. Docker's default profile refuses it; so does the local sandbox's filter now."""
    async with opener(warm=warm) as box:
        said = await box.exec([box.py, "-c", _NAMESPACES])
    assert said.exit_code == 0, said
    lines = [line for line in said.stdout.splitlines() if line != "unshare-x32 EPERM"]
    assert lines == ["unshare-user EPERM", "unshare-net EPERM", "clone-user EPERM",
                     "clone3 ENOSYS", "setns EPERM", "thread [1] child"], said
    assert "unshare-x32" not in said.stdout.replace("unshare-x32 EPERM", ""), said


# --- item 4: a command closes the stdin it is fed ------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
async def test_closing_a_fed_stdin_ends_only_the_command(opener: Opener, kind: str) -> None:
    async with opener() as box:
        # far more than a pipe holds: the supervisor still writes when the read end closes
        closed = await box.exec("exec 0<&-; echo closed", stdin=b"x" * (1 << 20))
        assert closed.exit_code == 0 and closed.stdout == "closed\n", closed
        after = await box.exec("cat", stdin=b"still fed")
        assert after.stdout == "still fed" and box.supervisor_starts == 1, after


# --- item 5: calls running at the same time ------------------------------------------------

class _Queue:
    """A LocalSandbox's turn (one command at a time), noting whether a call waited for it."""

    def __init__(self, turn: Any) -> None:
        self.turn, self.waited = turn, False

    async def __aenter__(self) -> None:
        self.waited = self.waited or self.turn.locked()
        await self.turn.__aenter__()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.turn.__aexit__(*exc_info)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_call_does_not_see_another_one_running(
    opener: Opener, kind: str, workspace: Path
) -> None:
    secret = f"ENV-SECRET-{uuid.uuid4().hex[:10]}"
    ready, go, queued = workspace / "ready", workspace / "go", workspace / "queued"
    # the first call waits for the second to be done, or to wait for its turn (bounded, for a
    # second waiting where this test cannot see it): meanwhile the second reads every
    # environment it can
    first_cmd = ("touch ready; n=0; while [ ! -e go ] && [ ! -e queued ] && [ $n -lt 40 ]; "
                 "do sleep 0.05; n=$((n+1)); done; echo first-done")
    second_cmd = ("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a SECRET; "
                  "touch go; echo second-done")
    results: dict[str, Any] = {}
    async with opener() as box:
        turn = None
        if isinstance(box, LocalSandbox):  # it runs one command at a time: the second waits
            turn = box._turn = _Queue(box._turn)

        async def first() -> None:
            results["first"] = await box.exec(["sh", "-c", first_cmd],
                                              env={"JM_SECRET": secret})

        async def second() -> None:
            results["second"] = await box.exec(["sh", "-c", second_cmd])

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            with anyio.fail_after(60):
                while not ready.exists():
                    await anyio.sleep(0.01)
            tg.start_soon(second)
            with anyio.fail_after(60):
                while "second" not in results and not (turn is not None and turn.waited):
                    await anyio.sleep(0.01)
            queued.touch()  # the second waits for the first: let the first end
    assert results["first"].stdout == "first-done\n", results
    assert results["second"].stdout.endswith("second-done\n"), results
    assert secret not in results["second"].stdout, results["second"]
    assert go.exists()
