"""Red team, folders: a relative path after ``cd`` names a file in that folder.

Under ``bash: allow`` with ``bash(cat secrets/*): deny``, ``cd secrets; cat key`` read the key:
the guard matched ``cat key`` as written. A command after a change of folder is now also
matched with its relative words in that folder (``cat secrets/key``); after a change to a
folder only the run knows (``cd $D``, ``cd``, ``cd -``), its relative words may name anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import RunStatus
from tests.security.test_redteam_spellings import decide
from tests.security.test_shell_rules import send, workspace

pytestmark = pytest.mark.anyio

DENY_SECRETS = {"bash": "allow", "bash(cat secrets/*)": "deny"}


@pytest.mark.parametrize(
    "command",
    ["cd secrets; cat key", "cd secrets && cat ./key", "(cd secrets; cat key)",
     "cd -P secrets && cat key", "cd -- secrets; cat key", "pushd secrets && cat key",
     "cd docs/../secrets; cat key", "cd docs; cd ../secrets; cat key", "cd $D; cat key",
     "cd; cat key", "cd s*; cat key", "cd ~/ws/secrets; cat key", "cd - ; cat key",
     "cd secrets; sudo cat key"],
)  # fmt: skip
def test_a_file_named_after_a_change_of_folder_is_the_folders(command: str) -> None:
    assert decide(DENY_SECRETS, command) == "deny"


@pytest.mark.parametrize(
    "command",
    ["cd docs && cat readme.md", "cat key; cd secrets", "cd docs; ls -la", "cd docs; cat /tmp/x",
     "cd secrets && ls"],
)  # fmt: skip
def test_other_folders_are_not_caught(command: str) -> None:
    assert decide(DENY_SECRETS, command) == "allow"


async def test_cd_then_a_relative_read_does_not_read_the_secret(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key").write_text("the secret\n")
    result, said = await send(ws, "cd secrets; cat key", DENY_SECRETS, interactive=False)
    assert result.status is RunStatus.SUCCESS
    assert "denied" in said and "the secret" not in said, said
    result, said = await send(ws, "cd secrets && ls", DENY_SECRETS, interactive=False)
    assert "denied" not in said and "key" in said, said
