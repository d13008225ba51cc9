"""What one run leaves in the workspace does not slow every later sandbox start.

As root, each sandbox start grants the commands' user the workspace with ACLs (`grant_tree`),
and the grant walked and rewrote every entry every time: a command that made a million files
slowed every later start of every run on that workspace by minutes. The walk now skips the
commands' own folders and, after a whole grant, what has not changed since; what it skips is
only ever granted less, and the read-only paths are still gone through whole. The counts here
are of entries granted and folders entered, never of time.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jianmu.execution import _process
from jianmu.execution.local_sandbox import LocalSandbox
from tests.execution._helpers import local_problem

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="the workspace is granted with ACLs only as root")

UID = 65534
ACL = "system.posix_acl_access"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    for i in range(30):
        (root / "src" / f"m{i}.py").write_text("x = 1\n")
    (root / "jianmu.yaml").write_text("llm: {}\n")
    return root


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[int], list[str]]]:
    """(descriptors granted, folders walked) during the grants that follow."""
    granted: list[int] = []
    walked: list[str] = []
    grant_one, fwalk = _process._grant_one, os.fwalk

    def counting_grant(fd: int, *args: Any, **kwargs: Any) -> None:
        granted.append(fd)
        grant_one(fd, *args, **kwargs)

    def counting_fwalk(top: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for item in fwalk(top, *args, **kwargs):
            walked.append(item[0])
            yield item

    monkeypatch.setattr(_process, "_grant_one", counting_grant)
    monkeypatch.setattr(os, "fwalk", counting_fwalk)
    yield granted, walked


def _tick(ws: Path) -> None:
    """Wait for the file system's clock to pass every change made in ``ws`` so far (it is
    coarse: a grant that follows within the same tick would see them as new)."""
    latest = max(p.lstat().st_ctime_ns for p in [ws, *ws.rglob("*")])
    probe = ws.parent / "clock-probe"
    probe.touch()
    while probe.stat().st_ctime_ns <= latest:
        os.utime(probe)


def _user_perm(path: Path) -> int:
    """What the ACL of ``path`` lets ``UID`` do (its entry masked), 0 without one."""
    try:
        entries = _process._parse(os.getxattr(path, ACL, follow_symlinks=False))
    except OSError:
        return 0
    mask = next((p for tag, p, _ in entries if tag == _process._MASK), 7)
    return next((p & mask for tag, p, who in entries
                 if tag == _process._USER and who == UID), 0)


def test_files_the_commands_made_are_not_walked_again(
    ws: Path, counted: tuple[list[int], list[str]]
) -> None:
    granted, walked = counted
    _process.grant_tree(ws, UID, ["jianmu.yaml"])
    _tick(ws)
    _process.grant_tree(ws, UID, ["jianmu.yaml"])
    made = ws / "build"
    for d in range(20):  # a command's output: its user owns all of it
        (made / f"d{d}").mkdir(parents=True)
        for f in range(50):
            (made / f"d{d}" / f"f{f}").write_text("")
    for path in [made, *made.rglob("*")]:
        os.chown(path, UID, UID)
    granted.clear()
    walked.clear()
    _process.grant_tree(ws, UID, ["jianmu.yaml"])
    assert not any(w.startswith(str(made)) for w in walked), "the commands' folder was walked"
    # the root, and the read-only path, which is always gone through whole
    assert len(granted) <= 2


def test_an_unchanged_workspace_is_not_granted_again(
    ws: Path, counted: tuple[list[int], list[str]]
) -> None:
    granted, _ = counted
    _process.grant_tree(ws, UID, ["jianmu.yaml"])
    first = len(granted)
    assert first >= 32
    _tick(ws)
    _process.grant_tree(ws, UID, ["jianmu.yaml"])  # every entry it granted is looked at again
    granted.clear()
    _process.grant_tree(ws, UID, ["jianmu.yaml"])
    assert len(granted) <= 2


def test_what_changed_since_is_granted_again(ws: Path, tmp_path: Path) -> None:
    _process.grant_tree(ws, UID, ["jianmu.yaml"])
    _process.grant_tree(ws, UID, ["jianmu.yaml"])
    assert _user_perm(ws / "src" / "m1.py") == 6
    os.chmod(ws / "src" / "m1.py", 0o600)  # the host's chmod masks the user out
    elsewhere = tmp_path / "new.py"
    elsewhere.write_text("y = 2\n")
    elsewhere.rename(ws / "src" / "new.py")  # moved in: no ACL
    os.mkdir(tmp_path / "pkg", 0o700)
    (tmp_path / "pkg" / "inner.py").write_text("z = 3\n")
    (tmp_path / "pkg").rename(ws / "src" / "pkg")  # a folder moved in, with what it holds
    assert _user_perm(ws / "src" / "m1.py") == 0 and _user_perm(ws / "src" / "new.py") == 0
    _process.grant_tree(ws, UID, ["jianmu.yaml"])
    for rel in ("src/m1.py", "src/new.py", "src/pkg/inner.py"):
        assert _user_perm(ws / rel) == 6, rel
    assert _user_perm(ws / "src" / "pkg") == 7
    assert _user_perm(ws / "jianmu.yaml") == 4  # read-only, as before


def test_a_path_made_read_only_later_is_taken_back(ws: Path) -> None:
    _process.grant_tree(ws, UID, [])
    _process.grant_tree(ws, UID, [])
    assert _user_perm(ws / "jianmu.yaml") == 6 and _user_perm(ws / "src" / "m2.py") == 6
    _process.grant_tree(ws, UID, ["jianmu.yaml", "src"])
    assert _user_perm(ws / "jianmu.yaml") == 4
    assert _user_perm(ws / "src" / "m2.py") == 4
    assert _user_perm(ws / "src") == 5


def test_a_hard_link_made_after_a_grant_is_still_not_granted(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process, "hardlinks_protected", lambda: False)
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o700)
    (outside / "shadow").write_text("root only")
    (outside / "shadow").chmod(0o600)
    _process.grant_tree(ws, UID)
    _process.grant_tree(ws, UID)
    os.link(outside / "shadow", ws / "src" / "shadow")
    _process.grant_tree(ws, UID)
    assert _user_perm(outside / "shadow") == 0


@pytest.mark.anyio
async def test_sandboxed_code_cannot_forge_the_grant_record(ws: Path) -> None:
    problem = local_problem("local-bwrap")
    if problem is not None:
        pytest.skip(problem)
    python = shutil.which("python3") or "python3"
    async with LocalSandbox(ws) as box:
        result = await box.exec([python, "-c", (
            "import os\n"
            "try:\n"
            f"    os.setxattr('.', {_process._STAMP!r}, b'{{}}')\n"
            "    print('forged')\n"
            "except OSError as exc:\n"
            "    print('refused', exc.errno)\n"
        )])
    assert result.stdout.startswith("refused"), result


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_cancelled_start_stops_the_walk(
    ws: Path, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    """The start of a sandbox on a huge workspace could not be cancelled: the walk went on
    to the end, minutes for millions of files, whatever the caller wanted."""
    import asyncio
    import threading

    folders = [ws / "src", *(ws / f"tree{d}" for d in range(5))]
    for folder in folders[1:]:
        folder.mkdir()
        (folder / "file").write_text("")
    reached, release = threading.Event(), threading.Event()
    after: list[str] = []
    grant_one = _process._grant_one

    def slow_grant(fd: int, st: os.stat_result, *args: Any, **kwargs: Any) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if release.is_set():
            after.append(path)
        elif not reached.is_set() and stat.S_ISREG(st.st_mode) and Path(path).parent != ws:
            reached.set()  # the first file of a subfolder
            assert release.wait(30)  # holds the walk here until the test has cancelled
        grant_one(fd, st, *args, **kwargs)

    monkeypatch.setattr(_process, "_grant_one", slow_grant)
    box = LocalSandbox(ws)
    start = asyncio.ensure_future(box.start())
    assert await asyncio.to_thread(reached.wait, 30)
    start.cancel()
    await asyncio.sleep(0)  # the cancel reaches the start first (no timing: it is queued)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await start
    await box.close()
    # the walk ends the folder it is in, and enters no other
    assert len({os.path.dirname(path) for path in after}) <= 1, after
    granted = [f for f in folders if any(_user_perm(p) for p in f.iterdir())]
    assert len(granted) <= 1, "the walk went on after the start was cancelled"
    assert os.getxattr(ws, _process._STAMP) == b"{}"  # no record: the next grant is whole


def test_a_folder_moved_into_the_workspace_is_granted_whole(ws: Path, tmp_path: Path) -> None:
    """A folder moved in (``mv ~/data ws/``) is new to the workspace, but what it holds keeps
    the change times it had: the grant after it must not skip them as granted before."""
    elsewhere = tmp_path / "elsewhere" / "data"
    (elsewhere / "deep").mkdir(parents=True)
    (elsewhere / "deep" / "rows.csv").write_text("a,b\n")
    _process.grant_tree(ws, UID)  # a whole grant, stamped: later ones skip what is older
    os.rename(elsewhere, ws / "data")
    _process.grant_tree(ws, UID)
    for path in (ws / "data", ws / "data" / "deep", ws / "data" / "deep" / "rows.csv"):
        assert ACL in os.listxattr(path, follow_symlinks=False), path
