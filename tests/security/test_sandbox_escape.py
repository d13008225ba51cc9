"""Sandbox escapes a hostile model would try (issue 12, items 3, 4 and 8).

Each attack runs against every sandbox this machine has: LocalSandbox without bubblewrap
(as root it still drops to an unprivileged user), LocalSandbox with bubblewrap, and
DockerSandbox (marked ``docker``). Several are driven through `ToolExecutor` with a `bash`
call, as a model would send it.
"""

from __future__ import annotations

import os
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
from jianmu.execution.runner import ToolRunner
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.providers import BuiltinToolProvider
from tests.execution._helpers import local_problem, processes_with, require_docker, wait_gone

pytestmark = pytest.mark.anyio

PIDS = 32
KINDS = [
    pytest.param("local", id="local"),
    pytest.param("local-bwrap", id="local-bwrap"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]
NO_NETWORK_KINDS = KINDS[1:]  # without bubblewrap nothing can cut the network


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace only its owner may enter: the sandbox must be granted it, not handed 0777."""
    path = tmp_path / "ws"
    path.mkdir(mode=0o700)
    return path


def _make(kind: str, workspace: Path, **options: Any) -> Any:
    if kind == "docker":
        require_docker()
        from jianmu.execution.docker_sandbox import DockerSandbox

        return DockerSandbox(workspace, pids=PIDS, timeout=30, **options)
    problem = local_problem(kind)
    if problem is not None:
        pytest.skip(problem)
    bwrap = kind == "local-bwrap"
    if not bwrap:
        options.setdefault("network", True)
    return LocalSandbox(workspace, use_bwrap=bwrap, pids=PIDS, timeout=30, **options)


@pytest.fixture(params=KINDS)
async def box(request: pytest.FixtureRequest, workspace: Path) -> AsyncIterator[Any]:
    sandbox = _make(request.param, workspace)
    sandbox.kind = request.param
    async with sandbox:
        yield sandbox


@pytest.fixture(params=NO_NETWORK_KINDS)
async def offline_box(request: pytest.FixtureRequest, workspace: Path) -> AsyncIterator[Any]:
    """A sandbox built without saying anything about the network: it must be off."""
    sandbox = _make(request.param, workspace)
    sandbox.kind = request.param
    assert sandbox.network is False
    async with sandbox:
        yield sandbox


def _python(box: Any) -> str:
    return getattr(box, "python", sys.executable) if isinstance(box, LocalSandbox) else "python3"


_CONNECT = """
import socket, sys
kind, address = sys.argv[1], sys.argv[2]
family = socket.AF_UNIX if kind == "unix" else socket.AF_INET
s = socket.socket(family)
s.settimeout(5)
try:
    s.connect(address if kind == "unix" else ("127.0.0.1", int(address)))
    print("CONNECTED")
except OSError as exc:
    print("BLOCKED", exc)
"""


# -- item 3: what only root may read, host sockets, the network ------------------------------

async def test_root_only_files_are_unreadable(box: Any) -> None:
    result = await box.exec("id -u; cat /etc/shadow && echo READ")
    assert "READ" not in result.stdout, result
    assert result.stdout.split()[0] != "0"  # never root inside
    status = await box.exec("grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status")
    assert all(line.split()[1] == "0000000000000000"
               for line in status.stdout.splitlines()[:2]), status


async def test_workspace_writes_reach_the_host_and_stay_private(
    box: Any, workspace: Path
) -> None:
    (workspace / "given.txt").write_text("from host\n")
    result = await box.exec(
        "cat given.txt && echo appended >> given.txt && mkdir -p sub && echo made > sub/new.txt"
    )
    assert result.ok, result
    assert (workspace / "sub" / "new.txt").read_text() == "made\n"
    assert (workspace / "given.txt").read_text() == "from host\nappended\n"
    # no one else was let in: the operator did not have to open the folder
    assert workspace.stat().st_mode & 0o007 == 0


async def test_host_unix_sockets_are_unreachable(offline_box: Any, tmp_path: Path) -> None:
    name = f"jianmu-test-{uuid.uuid4().hex[:8]}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + name)
    abstract.listen(4)
    try:
        script = (
            "import socket\n"
            f"s = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            f"    s.connect('\\0{name}'); print('CONNECTED')\n"
            "except OSError as exc:\n"
            "    print('BLOCKED', exc)\n"
        )
        result = await offline_box.exec([_python(offline_box), "-c", script])
        listing = await offline_box.exec(
            "ls -la /var/run/docker.sock /run/docker.sock /run 2>&1; true"
        )
    finally:
        abstract.close()
    assert result.stdout.startswith("BLOCKED"), result
    assert "docker.sock" not in listing.stdout.replace("No such file", "").replace(
        "cannot access", ""
    ) or "No such file" in listing.stdout
    assert "srw" not in listing.stdout  # no socket file of the host shows through


async def test_network_is_off_unless_asked(offline_box: Any, listener: int) -> None:
    result = await offline_box.exec([_python(offline_box), "-c", _CONNECT, "tcp", str(listener)])
    assert result.stdout.startswith("BLOCKED"), result


def test_runner_default_is_no_network(tmp_path: Path) -> None:
    if not bwrap_available(network=False):
        pytest.skip("bubblewrap cannot run here")
    runner = ToolRunner(Constraints().execution.model_copy(update={"workdir": str(tmp_path)}))
    assert runner.sandbox.network is False  # type: ignore[attr-defined]


# -- item 8: nothing a call started is left ---------------------------------------------------

async def test_nothing_outlives_a_call(box: Any, workspace: Path) -> None:
    tag = f"{uuid.uuid4().int % 10**6}"
    command = (
        f"env -i setsid sleep 3001.{tag} & "
        f"(sleep 3002.{tag} & echo $! > pid2) & "
        f"nohup sleep 3003.{tag} >/dev/null 2>&1 & "
        f"{_python(box)} -c 'import os,time\n"
        f"if os.fork() == 0:\n os.setsid()\n if os.fork() == 0:\n"
        f"  os.execvp(\"sleep\", [\"sleep\", \"3004.{tag}\"])\n' ; "
        "echo $! > pid1; echo started"
    )
    result = await box.exec(command)
    assert "started" in result.stdout, result
    assert await wait_gone(f".{tag}"), processes_with(f".{tag}")
    if box.kind == "local":  # the pid files hold host pids only without a pid namespace
        for name in ("pid1", "pid2"):
            text = (workspace / name).read_text().strip()
            if text.isdigit():
                assert not Path(f"/proc/{text}").exists() or _zombie(text)
    again = await box.exec("echo next")
    assert again.stdout == "next\n"


def _zombie(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("kills_watchers", [False, True], ids=["escapes", "kills-watchers"])
async def test_fork_bomb_leaves_the_next_call_working(box: Any, kills_watchers: bool) -> None:
    tag = f"{uuid.uuid4().int % 10**6}"
    # Fork without end, each child in a session of its own (out of the timeout's group), so
    # that nothing can fork to sweep up; the harder variant first kills every process it may
    # signal (the timeout, the shell that would sweep). kill(-1) only where a pid namespace
    # confines it: without one it reaches every host process of the same uid (as root on
    # unfixed code: the whole machine).
    kill_all = "os.kill(-1, signal.SIGKILL)" if kills_watchers and box.kind != "local" else "0"
    bomb = (
        "import os, signal, time\n"
        f"try:\n    {kill_all}\nexcept OSError:\n    pass\n"
        "while True:\n"
        "    try:\n"
        "        if os.fork() == 0:\n            os.setsid()\n"
        "    except OSError:\n        time.sleep(0.01)\n"
    )
    result = await box.exec([_python(box), "-c", bomb, f"bomb{tag}"], timeout=2)
    assert result.exit_code != 0
    assert await wait_gone(f"bomb{tag}"), len(processes_with(f"bomb{tag}"))
    after = await box.exec("echo alive")
    assert after.stdout == "alive\n", after


# -- item 4: an allowed `git status` must not run the repository's code -----------------------

def _git_in(box: Any) -> bool:
    return box.kind != "docker" or bool(os.environ.get("JIANMU_DOCKER_HAS_GIT"))


async def _model_run(workspace: Path, policy: dict[str, str], actions: list[dict[str, Any]],
                     **execution: Any) -> list[str]:
    constraints = Constraints.model_validate({
        "guard": {"default_policy": "deny", "tool_policy": policy},
        "execution": {"workdir": str(workspace), **execution},
    })
    tools = BuiltinToolProvider(["bash", "write_file"]).get_tools()
    executor = ToolExecutor(tools=tools, constraints=constraints)
    runner = ReactiveRunner(executor, StateManager(AgentState, {"actions": actions}))
    await runner.run(timeout=60)  # the run's end closes its sandbox
    return [m.content or "" for m in runner.state.get("messages")]


@pytest.mark.parametrize("kind", [KINDS[0], KINDS[1]])
async def test_allowed_git_status_does_not_run_a_planted_fsmonitor(
    kind: str, workspace: Path
) -> None:
    _make(kind, workspace)  # skips where this kind cannot run
    config = '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n' \
             '\tfsmonitor = "touch MARK; false"\n\thooksPath = hooks\n'
    writes = [("evil/HEAD", "ref: refs/heads/main\n"), ("evil/config", config),
              ("evil/objects/.keep", ""), ("evil/refs/heads/.keep", "")]
    actions = [
        {"id": f"w{i}", "name": "write_file", "arguments": {"path": p, "content": c}}
        for i, (p, c) in enumerate(writes)
    ] + [{"id": "g", "name": "bash", "arguments": {"command": "git status", "cwd": "evil"}}]
    execution = {} if kind == "local-bwrap" else {"network": True}
    messages = await _model_run(
        workspace, {"write_file": "allow", "bash(git status*)": "allow"}, actions, **execution
    )
    assert (workspace / "evil" / "config").exists(), messages
    assert len(messages) == 5, messages
    assert not (workspace / "evil" / "MARK").exists(), messages


async def test_git_overrides_are_in_every_command(box: Any) -> None:
    result = await box.exec("env | grep -E '^GIT_CONFIG_(COUNT|NOSYSTEM)='")
    assert "GIT_CONFIG_NOSYSTEM=1" in result.stdout, result
    # a caller's environment cannot turn them back off
    result = await box.exec("echo $GIT_CONFIG_COUNT", env={"GIT_CONFIG_COUNT": "0"})
    assert result.stdout.strip() not in ("", "0")


# -- driven as a model would: `bash: allow`, nothing else said --------------------------------

async def test_model_with_bash_allowed_cannot_read_shadow_or_reach_the_host(
    workspace: Path, listener: int
) -> None:
    if not bwrap_available(network=False):
        pytest.skip("bubblewrap cannot run here")
    probe = f"{sys.executable} -c '{_CONNECT}' tcp {listener}"
    actions = [
        {"id": "s", "name": "bash", "arguments": {"command": "cat /etc/shadow"}},
        {"id": "n", "name": "bash", "arguments": {"command": probe}},
        {"id": "w", "name": "bash", "arguments": {"command": "echo hi > made.txt; id -u"}},
    ]
    messages = await _model_run(workspace, {"bash": "allow"}, actions)
    shadow, net, made = messages
    assert "root:" not in shadow and ("denied" in shadow.lower() or "no such" in shadow.lower())
    assert "BLOCKED" in net and "CONNECTED" not in net, net
    assert (workspace / "made.txt").read_text() == "hi\n"
    if os.geteuid() == 0:
        assert made.strip().splitlines()[0] != "0"
