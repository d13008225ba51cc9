"""Red team, command runners by other names: ``x86_64 rm victim`` ran past ``bash(rm *)``.

util-linux installs ``setarch`` under the names of the architectures it sets (``i386``,
``x86_64``...), and each runs the command after it; the guard knew ``setarch``, ``linux32`` and
``linux64`` only. Those names, and a few more runners (``torify``, ``caffeinate``, ``xe``,
``with-lock-ex``, ``retry``), are opaque now: denied where nobody can answer.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from jianmu.guard._shell import scan
from tests.security.test_shell_rules import DENY_RM, send, workspace

pytestmark = pytest.mark.anyio


@pytest.mark.skipif(shutil.which("x86_64") is None, reason="util-linux's x86_64 link is absent")
@pytest.mark.parametrize("command", ["x86_64 rm victim", "x86_64 -R rm victim"])
async def test_setarch_by_an_architectures_name_is_refused(tmp_path: Path, command: str) -> None:
    ws = workspace(tmp_path)
    _, said = await send(ws, command, DENY_RM, interactive=False)
    assert "denied" in said, said
    assert (ws / "victim").read_text() == "keep me\n"


@pytest.mark.parametrize(
    "runner", ["i386", "i686", "x86_64", "uname26", "aarch64", "ppc64le", "s390x", "torify",
               "caffeinate", "xe", "with-lock-ex", "retry"],
)  # fmt: skip
def test_a_runner_by_any_name_is_opaque(runner: str) -> None:
    assert scan(f"{runner} rm victim").opaque
