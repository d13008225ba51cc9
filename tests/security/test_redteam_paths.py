"""Red team, path rules: spellings and tools that reached a denied folder.

A hostile model sends file-tool calls through `ToolExecutor` under rules such as
``grep_search(path:secrets*): deny``. Found holes: ``glob_search``'s folder argument is named
``root`` and ``bash``'s ``cwd``, which were not read as paths (``./secrets`` passed a
``secrets*`` rule); a search of ``.`` or of a folder above ``secrets`` read what the rule
denied, also when the ``path`` argument was left out; and a search followed a file symlink
(``docs/k -> ../secrets/key``) the rule never saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

SECRET = "TOPSECRET-4c1"
TOOLS = ["write_file", "read_file", "list_dir", "glob_search", "grep_search", "str_replace", "bash"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text(SECRET + "\n")
    (ws / "docs").mkdir()
    (ws / "docs" / "a.txt").write_text("alpha\n")
    (ws / "docs" / "notes").symlink_to(ws / "secrets", target_is_directory=True)
    (ws / "docs" / "k").symlink_to(Path("..") / "secrets" / "key")
    return ws


async def send(ws: Path, name: str, args: Any, policy: dict[str, str]) -> tuple[Any, str]:
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": policy}, "execution": {"workdir": str(ws)}}
    )
    state = StateManager(AgentState, {"actions": [{"id": "c", "name": name, "arguments": args}]})
    executor = ToolExecutor(tools=ToolSet.resolve(TOOLS), constraints=constraints)
    runner = ReactiveRunner(executor, state, interactive=False)
    result = await runner.run(timeout=60)
    messages = runner.state.get("messages")
    return result, (messages[0].content or "") if messages else ""


def refused(said: str) -> bool:
    return "denied" in said and SECRET not in said


@pytest.mark.parametrize(
    "root", ["secrets", "./secrets", "secrets/.", "@/secrets", "docs/../secrets", "docs/notes"]
)
async def test_glob_root_is_a_path(ws: Path, root: str) -> None:
    policy = {"glob_search": "allow", "glob_search(root:secrets*)": "deny"}
    _, said = await send(ws, "glob_search", {"pattern": "*", "root": root.replace("@", str(ws))},
                         policy)  # fmt: skip
    assert "denied" in said and "key" not in said, said


@pytest.mark.parametrize("cwd", ["./secrets", "secrets/.", "@/secrets", "docs/notes"])
async def test_bash_cwd_is_a_path_not_a_command(ws: Path, cwd: str) -> None:
    policy = {"bash": "allow", "bash(cwd:secrets*)": "deny"}
    _, said = await send(ws, "bash", {"command": "cat key", "cwd": cwd.replace("@", str(ws))},
                         policy)  # fmt: skip
    assert refused(said) and "bash(cwd:secrets*)" in said, said


@pytest.mark.parametrize(
    "args",
    [{"pattern": SECRET[:6]}, {"pattern": SECRET[:6], "path": "."},
     {"pattern": SECRET[:6], "path": "./"}, {"pattern": SECRET[:6], "glob": "secrets/*"},
     {"pattern": SECRET[:6], "path": "@"}],
)  # fmt: skip
async def test_a_search_above_a_denied_folder_is_denied(ws: Path, args: dict[str, str]) -> None:
    policy = {"grep_search": "allow", "grep_search(path:secrets/*)": "deny"}
    args = {k: v.replace("@", str(ws)) for k, v in args.items()}
    _, said = await send(ws, "grep_search", args, policy)
    assert refused(said), said


async def test_a_listing_above_a_denied_folder_is_denied(ws: Path) -> None:
    policy = {"list_dir(path:secrets*)": "deny"}
    _, said = await send(ws, "list_dir", {"path": ".", "depth": 3}, policy)
    assert "denied" in said and "key" not in said, said


async def test_a_search_does_not_follow_a_file_link_into_a_denied_folder(ws: Path) -> None:
    policy = {"grep_search": "allow", "grep_search(path:secrets*)": "deny"}
    result, said = await send(ws, "grep_search", {"pattern": SECRET[:6], "path": "docs"}, policy)
    assert result.status is RunStatus.SUCCESS and SECRET not in said, said
    _, said = await send(ws, "glob_search", {"pattern": "**/*", "root": "docs"}, {})
    assert "docs/a.txt" in said and "docs/k" not in said, said


async def test_a_search_beside_a_denied_folder_still_runs(ws: Path) -> None:
    policy = {"grep_search(path:secrets/*)": "deny", "list_dir(path:secrets*)": "deny"}
    _, said = await send(ws, "grep_search", {"pattern": "alpha", "path": "docs"}, policy)
    assert "docs/a.txt:1:alpha" in said, said
    _, said = await send(ws, "list_dir", {"path": "docs"}, policy)
    assert "a.txt" in said and "denied" not in said, said


@pytest.mark.parametrize(
    ("name", "args"),
    [("read_file", {"path": "secrets//key"}), ("read_file", {"path": "secrets/./key"}),
     ("read_file", {"path": "secrets/key/"}), ("read_file", {"path": "secrets\\key"}),
     ("read_file", {"path": "secrets/key\x00"}),
     ("read_file", {"path": "./" * 400 + "secrets/key"}),
     ("read_file", {"path": "docs/k"}), ("read_file", {"path": "docs/notes/key"}),
     ("read_file", {"path": "secrets/key", "file_path": "docs/a.txt"}),
     ("read_file", {"file_path": "secrets/key"}), ("read_file", {"Path": "secrets/key"}),
     ("read_file", {"path": ["secrets/key"]}), ("read_file", '"{\\"path\\": \\"secrets/key\\"}"'),
     ("read_file", ["secrets/key"]), ("read_file", "secrets/key"),
     ("str_replace", {"path": "./secrets/key", "old": SECRET, "new": "x"}),
     ("write_file", {"path": "secrets//key", "content": "x"}),
     ("write_file", {"path": "docs/notes/key", "content": "x"})],
)  # fmt: skip
async def test_other_spellings_of_a_denied_file_hold(ws: Path, name: str, args: Any) -> None:
    policy = {f"{tool}(path:secrets/*)": "deny" for tool in ("read_file", "write_file",
                                                             "str_replace")}  # fmt: skip
    _, said = await send(ws, name, args, policy)
    assert SECRET not in said and (ws / "secrets" / "key").read_text() == SECRET + "\n", said


@pytest.mark.parametrize(
    ("name", "args"),
    [("read_file", {"path": "secrets/key"}), ("read_file", {"path": "./secrets/key"}),
     ("read_file", {"path": "docs/notes/key"}), ("read_file", {"path": "docs/k"}),
     ("grep_search", {"pattern": SECRET[:6]}), ("grep_search", {"pattern": "T", "path": "secrets"}),
     ("list_dir", {"path": "secrets"}), ("glob_search", {"pattern": "*", "root": "secrets"})],
)  # fmt: skip
async def test_a_rule_written_with_the_absolute_path_holds_for_relative_spellings(
    ws: Path, name: str, args: dict[str, str]
) -> None:
    real = ws.resolve()
    policy = {f"{tool}({arg}:{real}/secrets*)": "deny" for tool, arg in
              [("read_file", "path"), ("grep_search", "path"), ("list_dir", "path"),
               ("glob_search", "root")]}  # fmt: skip
    _, said = await send(ws, name, args, policy)
    assert "denied" in said and SECRET not in said, said


async def test_an_absolute_deny_rule_holds_against_a_search_of_the_workspace(ws: Path) -> None:
    # the rule names the folder by its absolute path; the search names the workspace as "."
    policy = {"grep_search": "allow", f"grep_search(path:{ws}/secrets/*)": "deny"}
    for args in ({"pattern": SECRET[:6], "path": "."}, {"pattern": SECRET[:6]}):
        _, said = await send(ws, "grep_search", args, policy)
        assert refused(said), said


async def test_an_absolute_deny_rule_elsewhere_leaves_a_search_of_the_workspace(ws: Path) -> None:
    # a folder outside the workspace is not beneath ".": the search runs
    policy = {"grep_search": "allow", f"grep_search(path:{ws.parent}/other/*)": "deny"}
    _, said = await send(ws, "grep_search", {"pattern": "alpha", "path": "."}, policy)
    assert "docs/a.txt:1:alpha" in said and "denied" not in said, said
