"""Neither sandboxed code nor the file tools change the engine's Python in the workspace.

The workspace is often the project's folder, and the project's ``.venv`` is often the very
environment Jianmu runs from. The workspace is writable inside the sandbox, so a command could
rewrite a module the engine imports later (or drop a ``.pth`` file its next start runs): code
run outside the sandbox, as whoever runs Jianmu. The engine's install is read-only inside the
sandbox wherever it is, and the file tools refuse to write into it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.execution._helpers import docker_problem, local_problem

ROOT = Path(__file__).resolve().parents[2]
SITE = [p for p in sys.path if p.endswith("site-packages")]

# Run by the venv's python: a sandbox on the workspace holding that venv, one command.
_CHILD = r"""
import asyncio, sys
from pathlib import Path
kind, ws = sys.argv[1], Path(sys.argv[2])
if kind == "write_file":  # the in-process file tool, not sandboxed code
    from jianmu import ExecutionConstraints, ToolRunner, ToolSet
    async def write():
        tools = ToolSet.resolve(["write_file"])
        async with ToolRunner(ExecutionConstraints(workdir=str(ws))) as runner:
            for path in (".venv/lib/evil.pth", ".venv/pyvenv.cfg", "notes.txt"):
                print(await tools.execute("write_file", {"path": path, "content": "x"},
                                          runner=runner))
    asyncio.run(write())
    sys.exit()
if kind == "docker":
    from jianmu.execution.docker_sandbox import DockerSandbox as Box
    options = {}
else:
    from jianmu.execution.local_sandbox import LocalSandbox as Box
    bwrap = kind == "local-bwrap"  # without: as root, the sandbox user is not granted it
    options = {"use_bwrap": bwrap, "network": not bwrap}
async def main():
    async with Box(ws, **options) as box:
        result = await box.exec(
            "touch .venv/lib/evil.pth; touch .venv/pyvenv.cfg; touch notes.txt; ls .venv/lib")
        print(result.stdout, result.stderr)
asyncio.run(main())
"""


@pytest.mark.parametrize(
    "kind",
    ["write_file", "local-bwrap", "local-root", pytest.param("docker", marks=pytest.mark.docker)],
)
def test_a_venv_in_the_workspace_is_read_only_inside(tmp_path: Path, kind: str) -> None:
    problem = (docker_problem() if kind == "docker"
               else None if kind == "write_file" else local_problem(kind))
    if kind == "local-root" and os.geteuid() != 0:
        problem = "without bubblewrap, only root runs commands as another user"
    if problem is not None:
        pytest.skip(problem)
    ws = tmp_path / "project"
    ws.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(ws / ".venv")],
                   check=True)
    before = (ws / ".venv" / "pyvenv.cfg").stat().st_mtime_ns
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *SITE])}
    done = subprocess.run(
        [str(ws / ".venv" / "bin" / "python"), "-c", _CHILD, kind, str(ws)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (ws / "notes.txt").exists(), done.stdout  # the rest of the workspace is writable
    assert not (ws / ".venv" / "lib" / "evil.pth").exists(), done.stdout
    assert (ws / ".venv" / "pyvenv.cfg").stat().st_mtime_ns == before
