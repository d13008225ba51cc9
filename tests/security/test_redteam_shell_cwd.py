"""A shell rule on a path holds for a command run in another folder through ``cwd``.

`bash` takes the folder to run in as an argument (``cwd``), which is a ``cd`` before the
command: ``{"command": "cat key", "cwd": "secrets"}`` reads ``secrets/key``, as ``cd secrets;
cat key`` does, and a rule ``bash(cat secrets/*)`` must hold for both. Before, the guard read
the command as if it ran at the workspace's root, and the key was shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.builtin.bash import BashTool

pytestmark = pytest.mark.anyio

POLICY = {"bash": "allow", "bash(cat secrets/*)": "deny"}


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "secrets" / "deeper").mkdir(parents=True)
    (ws / "docs").mkdir()
    (ws / "secrets" / "key").write_text("KEY-MATERIAL\n")
    (ws / "docs" / "readme").write_text("public\n")
    return ws


async def _send(
    ws: Path, arguments: dict[str, Any], policy: dict[str, str], default: str = "allow"
) -> str:
    """One bash call sent as a model would, where nobody can answer; the observation."""
    constraints = Constraints.model_validate({
        "guard": {"default_policy": default, "tool_policy": policy},
        "execution": {"workdir": str(ws)},
    })
    state = StateManager(
        AgentState, {"actions": [{"id": "c", "name": "bash", "arguments": arguments}]}
    )
    executor = ToolExecutor(tools=[BashTool()], constraints=constraints)
    runner = ReactiveRunner(executor, state, interactive=False)
    await runner.run(timeout=60)
    return runner.state.get("messages")[0].content or ""


@pytest.mark.parametrize(
    "arguments",
    [
        {"command": "cat key", "cwd": "secrets"},
        {"command": "cat ./key", "cwd": "./secrets/"},
        {"command": "cat ../key", "cwd": "secrets/deeper"},
        {"command": "cat ../secrets/key", "cwd": "docs"},
        {"command": "cd ..; cat secrets/key", "cwd": "docs"},
        {"command": "cat key", "cwd": "docs/../secrets"},
    ],
)
async def test_a_deny_rule_holds_in_the_folder_cwd_names(
    tmp_path: Path, arguments: dict[str, Any]
) -> None:
    said = await _send(_workspace(tmp_path), arguments, POLICY)
    assert "denied" in said and "KEY-MATERIAL" not in said, said


async def test_a_deny_rule_holds_for_an_absolute_cwd(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    said = await _send(ws, {"command": "cat key", "cwd": str(ws / "secrets")}, POLICY)
    assert "denied" in said and "KEY-MATERIAL" not in said, said


async def test_commands_elsewhere_still_run(tmp_path: Path) -> None:
    said = await _send(_workspace(tmp_path), {"command": "cat readme", "cwd": "docs"}, POLICY)
    assert said.strip() == "public"


async def test_an_allow_rule_reads_the_command_in_its_folder(tmp_path: Path) -> None:
    # `cat docs/x` run in secrets/ is `cat secrets/docs/x`: not what `bash(cat docs/*)` grants
    ws = _workspace(tmp_path)
    (ws / "secrets" / "docs").mkdir()
    (ws / "secrets" / "docs" / "x").write_text("KEY-MATERIAL\n")
    policy = {"bash(cat docs/*)": "allow"}  # the rest asks, and nobody answers: denied
    said = await _send(ws, {"command": "cat docs/x", "cwd": "secrets"}, policy, "confirm")
    assert "KEY-MATERIAL" not in said, said
    assert (await _send(ws, {"command": "cat docs/readme"}, policy, "confirm")).strip() == "public"


async def test_an_allow_rule_still_grants_a_command_without_paths_in_a_folder(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path)
    policy = {"bash(echo hello*)": "allow"}
    said = await _send(ws, {"command": "echo hello", "cwd": "docs"}, policy, "confirm")
    assert said.strip() == "hello"


# -- a change of folder the guard did not follow ------------------------------------------------
# `builtin cd` and `command cd` are `cd`; `pushd +1` turns the folder stack back to an earlier
# folder; with CDPATH (or `shopt -s cdable_vars`) `cd x` goes where a variable says. Before,
# each read `cat key` as a file of another folder and the key was shown.


@pytest.mark.parametrize(
    "command",
    ["builtin cd secrets; cat key", "command cd secrets && cat key",
     "builtin pushd secrets >/dev/null; cat key",
     "pushd secrets >/dev/null; pushd / >/dev/null; pushd +1 >/dev/null; cat key",
     "CDPATH=..; cd docs; cd secrets; cat key", "read CDPATH <<< ..; cd docs; cd secrets; cat key",
     "shopt -s cdable_vars; y=secrets; cd y; cat key"],
)  # fmt: skip
async def test_a_change_of_folder_by_any_spelling_is_followed(
    tmp_path: Path, command: str
) -> None:
    said = await _send(_workspace(tmp_path), {"command": command}, POLICY)
    assert "denied" in said and "KEY-MATERIAL" not in said, said


# -- a file given as input to a group, a loop, a function or $(< file) --------------------------
# `cat < secrets/key` was denied as `cat secrets/key`, but a redirection on the statement around
# the command (`{ cat; } < secrets/key`) gives it the same input, and `$(< secrets/key)` is
# bash's spelling of `$(cat secrets/key)`. Before, each showed the key.


@pytest.mark.parametrize(
    "command",
    ["{ cat; } < secrets/key", "(cat) < secrets/key", "for i in 1; do cat; done < secrets/key",
     "if true; then cat; fi < secrets/key", "f() { cat; } < secrets/key; f",
     "echo \"$(<secrets/key)\"", "cd secrets; echo $(< key)"],
)  # fmt: skip
async def test_a_file_given_as_input_around_a_command_is_read_by_it(
    tmp_path: Path, command: str
) -> None:
    said = await _send(_workspace(tmp_path), {"command": command}, POLICY)
    assert "denied" in said and "KEY-MATERIAL" not in said, said


@pytest.mark.parametrize(
    "command",
    ["{ cat; } < docs/readme", "echo \"$(<docs/readme)\"", "cat /proc/self/cwd/docs/readme"],
)
async def test_other_input_still_runs(tmp_path: Path, command: str) -> None:
    said = await _send(_workspace(tmp_path), {"command": command}, POLICY)
    assert "public" in said, said


# -- a path through the process's own folder ---------------------------------------------------
# `/proc/self/cwd` is the folder the command runs in, but the guard resolved it in its own
# process (another folder): `cat /proc/self/cwd/secrets/key` showed the key.


@pytest.mark.parametrize(
    "command",
    ["cat /proc/self/cwd/secrets/key", "cat /proc/thread-self/cwd/secrets/key",
     "cd /proc/self/cwd/secrets && cat key", "cat /proc/self/root/proc/self/cwd/secrets/key",
     "cd docs; cat /proc/self/cwd/../secrets/key"],
)  # fmt: skip
async def test_a_path_through_the_process_folder_is_read_in_the_workspace(
    tmp_path: Path, command: str
) -> None:
    said = await _send(_workspace(tmp_path), {"command": command}, POLICY)
    assert "denied" in said and "KEY-MATERIAL" not in said, said
