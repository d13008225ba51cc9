"""Red team, paths in shell words: the file a word names, not the word as written.

A rule on paths is written relative to the workspace (``bash(cat secrets/*)``), and the guard
matched a shell command's words as written, tidied. So under ``bash: allow`` with
``bash(cat secrets/*): deny``, the workspace's absolute path (``cat /ws/secrets/key``, also
after ``cd /ws/secrets``) and a symlink to the folder (``cat notes/key``) read the key; and an
allow rule ``bash(cat docs/*)`` let ``cat docs/../secrets/key`` out of its folder. A command's
literal arguments are now also matched as the files they name (`jianmu.guard._rules`
``located_words``), as a file tool's path argument already was: any such form restricts, and
an allow rule must match every one that names another file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jianmu import RunStatus
from jianmu.guard import ToolPolicyChecker
from jianmu.tools.builtin import BashTool
from jianmu.tools.calls import ToolCall
from tests.security.test_shell_rules import send, workspace

pytestmark = pytest.mark.anyio

DENY_SECRETS = {"bash": "allow", "bash(cat secrets/*)": "deny"}
ALLOW_DOCS = {"bash(cat docs/*)": "allow"}


def tree(tmp_path: Path) -> Path:
    """A workspace with ``secrets/key``, ``docs/readme`` and a link ``notes`` → ``secrets``."""
    ws = workspace(tmp_path)
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key").write_text("the secret\n")
    (ws / "docs").mkdir()
    (ws / "docs" / "readme").write_text("read me\n")
    os.symlink("secrets", ws / "notes")
    return ws


@pytest.mark.parametrize(
    "command",
    ["cat {ws}/secrets/key", "cat {ws}/docs/../secrets/key", "cd {ws}/secrets; cat key",
     "cat notes/key", "cat ./notes/key", "cat {ws}/notes/key", "cd notes && cat key",
     "cat docs/readme {ws}/secrets/key"],
)  # fmt: skip
async def test_a_denied_file_by_another_name_is_denied(tmp_path: Path, command: str) -> None:
    ws = tree(tmp_path)
    result, said = await send(ws, command.format(ws=ws), DENY_SECRETS, interactive=False)
    assert result.status is RunStatus.SUCCESS
    assert "denied" in said and "the secret" not in said, said


@pytest.mark.parametrize(
    "command",
    ["cat docs/../secrets/key", "cat docs/../notes/key", "cd docs; cat ../secrets/key"],
)  # fmt: skip
async def test_an_allow_rule_does_not_reach_out_of_its_folder(tmp_path: Path, command: str) -> None:
    ws = tree(tmp_path)
    result, said = await send(ws, command, ALLOW_DOCS, interactive=False)
    assert result.status is RunStatus.SUCCESS
    assert "denied" in said and "the secret" not in said, said


@pytest.mark.parametrize(
    ("policy", "command"),
    [(DENY_SECRETS, "cat docs/readme"), (DENY_SECRETS, "cat {ws}/docs/readme"),
     (ALLOW_DOCS, "cat docs/readme"), (ALLOW_DOCS, "cat docs/./readme")],
)  # fmt: skip
async def test_other_files_still_run(tmp_path: Path, policy: dict[str, str], command: str) -> None:
    ws = tree(tmp_path)
    result, said = await send(ws, command.format(ws=ws), policy, interactive=False)
    assert result.status is RunStatus.SUCCESS
    assert said.strip() == "read me", said


@pytest.mark.parametrize(
    ("policy", "command", "decision"),
    [({"bash": "allow", "bash(*secrets/key*)": "deny"}, "grep -r --file=docs/../secrets/key .",
      "deny"),
     ({"bash(grep *)": "allow"}, "grep -e a//b docs/readme", "allow"),
     ({"bash(cat docs/*)": "allow"}, "cat docs/a/../../secrets/key", "confirm")],
)  # fmt: skip
def test_option_values_are_paths_and_tidying_alone_changes_no_grant(
    tmp_path: Path, policy: dict[str, str], command: str, decision: str
) -> None:
    checker = ToolPolicyChecker(policy, workspace=tmp_path)
    call = ToolCall(name="bash", arguments={"command": command})
    assert checker.resolve(call, BashTool().tool_spec)[0] == decision
