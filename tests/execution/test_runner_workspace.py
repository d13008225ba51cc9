"""The workspace root of jianmu/execution/runner.py: a context variable the runner sets."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from jianmu.execution.runner import current_workspace, use_workspace


def test_default_is_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert current_workspace() == Path.cwd()


def test_use_workspace_sets_and_restores(tmp_path: Path) -> None:
    before = current_workspace()
    inner = tmp_path / "inner"
    inner.mkdir()
    with use_workspace(tmp_path) as root:
        assert root == current_workspace() == tmp_path
        with use_workspace(inner):
            assert current_workspace() == inner
        assert current_workspace() == tmp_path
    assert current_workspace() == before


def test_relative_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    with use_workspace("sub"):
        assert current_workspace() == tmp_path / "sub"


def test_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not an existing folder"):
        with use_workspace(tmp_path / "nope"):
            pass


@pytest.mark.anyio
async def test_worker_threads_and_child_tasks_see_it(tmp_path: Path) -> None:
    seen: list[Path] = []

    async def child() -> None:
        seen.append(current_workspace())

    with use_workspace(tmp_path):
        seen.append(await anyio.to_thread.run_sync(current_workspace))
        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
    assert seen == [tmp_path, tmp_path]


@pytest.mark.anyio
async def test_concurrent_tasks_keep_their_own(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    seen: dict[str, Path] = {}
    both_set = anyio.Event()
    count = 0

    async def task(name: str, root: Path) -> None:
        nonlocal count
        with use_workspace(root):
            count += 1
            if count == 2:
                both_set.set()
            await both_set.wait()
            seen[name] = current_workspace()

    async with anyio.create_task_group() as tg:
        tg.start_soon(task, "a", a)
        tg.start_soon(task, "b", b)
    assert seen == {"a": a, "b": b}
