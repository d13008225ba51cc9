"""Holes mutation testing of the guard's rule matching found (issue 12, mutation testing).

A hostile model sends ``bash`` calls through `ToolExecutor`, as in ``test_shell_rules``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import RunStatus
from tests.security.test_shell_rules import DENY_RM, send, workspace

pytestmark = pytest.mark.anyio


async def test_env_dash_does_not_hide_the_command(tmp_path: Path) -> None:
    # `env - CMD` (an empty environment, like -i) runs CMD: it was read as the command "-"
    ws = workspace(tmp_path)
    result, said = await send(ws, "env - rm victim", DENY_RM, interactive=True)
    assert result.status is RunStatus.SUCCESS
    assert "bash(rm *)" in said and "denied" in said
    assert (ws / "victim").read_text() == "keep me\n"


async def test_an_exact_deny_rule_sees_a_run_time_word_that_may_vanish(tmp_path: Path) -> None:
    # `rm victim $X` is `rm victim` when X is empty: an exact rule must not let it through
    ws = workspace(tmp_path)
    policy = {"bash": "allow", "bash(rm victim)": "deny"}
    result, said = await send(ws, "rm victim $X", policy, interactive=False)
    assert result.status is RunStatus.SUCCESS
    assert "denied" in said, said
    assert (ws / "victim").read_text() == "keep me\n"
