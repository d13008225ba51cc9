"""`python_repl`'s session file is no channel between runs on a workspace.

The REPL keeps its variables in a file of the workspace, which every sandbox on it (another
run, another `mcp serve` client, the run's own `bash` commands) may read and write. It held a
plain pickle: another run read the session's variables there, or replaced the file with a
pickle that ran its code in this session's next call (with this run's network, mounts and
limits). And the driver ran as ``python -c`` in the workspace, so a ``json.py`` there replaced
the module it checks and loads the state with. Here the planting is done by the test itself,
as any command of another sandbox on the workspace could.
"""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from jianmu.errors import ToolExecutionError
from jianmu.execution.runner import use_workspace
from jianmu.tools.builtin import PythonREPLTool

pytestmark = pytest.mark.anyio

SECRET = "sk-live-REPL-SECRET-4242"


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "ws"
    root.mkdir()
    with use_workspace(root):
        yield root


class _Planted:
    """Unpickling this runs ``open(path, 'w')``: what a planted pickle would do."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.path, "w"))


async def test_another_run_cannot_read_the_session_variables(ws: Path) -> None:
    repl = PythonREPLTool()
    await repl.execute({"code": f"token = {SECRET!r}\nparts = [token[:7], token[7:]]"})
    state = ws / repl.state_path
    assert state.is_file()
    for path in state.parent.iterdir():
        blob = path.read_bytes()
        assert SECRET.encode() not in blob and b"REPL-SECRET" not in blob
        with pytest.raises(Exception):  # noqa: B017 - no pickle another run could load
            pickle.loads(blob)
    assert await repl.execute({"code": "token"}) == repr(SECRET)


async def test_a_planted_pickle_is_never_loaded(ws: Path) -> None:
    repl = PythonREPLTool()
    await repl.execute({"code": "kept = 1"})
    proof = ws / "pwned"  # where the sandboxed code may write
    state = ws / repl.state_path
    # another run replaces the session file with its own pickle, in the old layout
    evil = {"modules": {}, "defs": {},
            "values": {"kept": pickle.dumps(_Planted(str(proof)))}}
    state.write_bytes(pickle.dumps({**evil, "x": _Planted(str(proof))}))
    with pytest.raises(ToolExecutionError, match="NameError") as info:
        await repl.execute({"code": "kept"})
    assert "changed or removed outside this session" in str(info.value)
    assert not proof.exists(), "the planted pickle ran in the REPL's process"
    # the session goes on from there, sealed again
    await repl.execute({"code": "kept = 2"})
    assert await repl.execute({"code": "kept"}) == "2"


async def test_an_older_state_of_the_same_session_is_not_taken_back(ws: Path) -> None:
    repl = PythonREPLTool()
    await repl.execute({"code": "balance = 100"})
    old = (ws / repl.state_path).read_bytes()
    await repl.execute({"code": "balance = 0"})
    (ws / repl.state_path).write_bytes(old)  # replayed by another run
    with pytest.raises(ToolExecutionError, match="NameError") as info:
        await repl.execute({"code": "balance"})
    assert "changed or removed outside this session" in str(info.value)


async def test_a_module_in_the_workspace_does_not_replace_the_drivers(ws: Path) -> None:
    proof = ws / "shadowed"
    for name in ("json", "pickle", "hashlib", "ast"):
        (ws / f"{name}.py").write_text(f"open({str(proof)!r}, 'a').write({name!r})\n")
    (ws / "helpers.py").write_text("ANSWER = 42\n")
    repl = PythonREPLTool()
    await repl.execute({"code": "x = 1"})
    assert not proof.exists(), "the workspace replaced a module the driver imports"
    # the cell still imports the workspace's own modules, as a REPL started there would
    assert await repl.execute({"code": "import helpers\nhelpers.ANSWER + x"}) == "43"
    assert await repl.execute({"code": "helpers.ANSWER"}) == "42"
    assert not proof.exists()


async def test_removing_the_session_follows_no_link_out_of_the_workspace(
    ws: Path, tmp_path: Path
) -> None:
    repl = PythonREPLTool()
    await repl.execute({"code": "x = 1"})
    name = Path(repl.state_path).name
    # sandboxed code makes .jianmu a link to a folder outside holding a file of that name
    outside = tmp_path / "outside"
    (outside / "python_repl").mkdir(parents=True)
    victim = outside / "python_repl" / name
    victim.write_text("not the REPL's")
    real = ws / ".jianmu"
    real.rename(tmp_path / "moved")
    real.symlink_to(outside, target_is_directory=True)
    del repl
    gc.collect()
    assert victim.read_text() == "not the REPL's"
    assert os.path.islink(real)


async def test_a_folder_planted_at_the_session_file_does_not_lose_the_answer(ws: Path) -> None:
    repl = PythonREPLTool()
    await repl.execute({"code": "x = 1"})
    state = ws / repl.state_path
    state.unlink()
    state.mkdir()  # another run puts a folder where the file goes
    out = await repl.execute({"code": "print('done')\n6 * 7"})
    assert out.startswith("done\n[value]\n42\n[note] could not restore")
    assert "the session could not be saved" in out
    assert [p.name for p in state.parent.iterdir()] == [state.name]  # no temporary file left


async def test_the_next_run_and_another_client_start_empty(tmp_path: Path) -> None:
    """One tool instance serves every run of an agent, and every client of `mcp serve`
    (each with a runner and a sandbox of its own): its one session carried one run's
    variables into the next, and one client's into another's."""
    import gc as _gc

    from jianmu.constraints import ExecutionConstraints
    from jianmu.execution.runner import ToolRunner

    work = tmp_path / "work"
    work.mkdir()
    execution = ExecutionConstraints(workdir=str(work))
    repl = PythonREPLTool()
    async with ToolRunner(execution) as alice, ToolRunner(execution) as bob:
        await repl.execute({"code": f"token = {SECRET!r}"}, runner=alice)
        with pytest.raises(ToolExecutionError, match="NameError"):
            await repl.execute({"code": "token"}, runner=bob)  # another client
        assert await repl.execute({"code": "token"}, runner=alice) == repr(SECRET)
        first = work / repl.state_path
        await alice.release()  # the run ended (a suspended run keeps its sandbox)
        _gc.collect()
        assert not first.exists(), "the ended run's session file was left in the workspace"
        with pytest.raises(ToolExecutionError, match="NameError"):
            await repl.execute({"code": "token"}, runner=alice)  # the agent's next run
