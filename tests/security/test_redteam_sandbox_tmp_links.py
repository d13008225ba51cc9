"""A link a command leaves in its ``/tmp`` on the way to a mount point bwrap makes there.

When the workspace lives under the host's ``/tmp`` (a ``tempfile`` workspace, a test's), bwrap
makes the folders on its way inside the sandbox's private ``/tmp``, which the commands may
write. A command swapped the first of them for a link to ``/oldroot/<host folder>``: at the
next start bwrap, as root, followed it out to the host and made the rest of the way there (a
folder of the host's created by sandboxed code), and every later command failed to start.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jianmu.execution.local_sandbox import LocalSandbox
from tests.execution._helpers import local_problem

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
async def test_a_link_left_in_tmp_does_not_lead_bwrap_out_to_the_host(
    tmp_path: Path, warm: bool,
) -> None:
    problem = local_problem("local-bwrap")
    if problem is not None:
        pytest.skip(problem)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    if not str(workspace).startswith("/tmp/"):
        pytest.skip("the workspace must lie under /tmp for bwrap to make its way there")
    host = tmp_path / "host"  # a folder of the host's that no command can see
    host.mkdir()
    first = str(workspace).split("/")[2]  # /tmp/<first>/.../ws
    box = LocalSandbox(workspace, use_bwrap=True, timeout=30, warm=warm)
    async with box:
        if warm and not box.isolation["warm"]:
            pytest.skip(f"no warm supervisor here: {box.warm_problem}")
        planted = await box.exec(
            f"mv /tmp/{first} /tmp/moved && ln -s /oldroot{host} /tmp/{first} && echo PLANTED")
        assert "PLANTED" in planted.stdout, planted
        # the user makes a config: a warm supervisor restarts to hold it read-only
        (workspace / "jianmu.yaml").write_text("agent: {}\n")
        after = await box.exec("pwd; echo hello > file")
    assert list(host.iterdir()) == []  # nothing made on the host's side of the link
    assert after.exit_code == 0, after
    assert after.stdout.splitlines() == [str(workspace)]
    assert (workspace / "file").read_text() == "hello\n"
    assert not os.path.islink(workspace)
