"""A lease whose release the store refused (its file busy) is given back later, not held for
the process's life.

Before the fix, a run whose save failed (another process held the SQLite file's write lock past
the busy timeout) gave its lease up quietly, and that release failed too: the runner forgot it
held the run and the store forgot it had granted it, so neither ``aclose`` nor the store's
``close`` tried again. The lease of a live process of this machine is not taken even once it
expires, so the run stayed claimed ("held by process N of this machine, which is alive") for as
long as that process (a service, the studio) lived.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import py_trees
import pytest
from py_trees.common import Status

from jianmu import AgentState, AsyncNode, ToolExecutor, tool
from jianmu.errors import CheckpointError, RunClaimedError
from jianmu.runtime import ReactiveRunner, SQLiteCheckpointer
from jianmu.state import StateManager

pytestmark = pytest.mark.anyio


class Locker:
    """Another process's connection to the checkpoint file, holding its write lock."""

    def __init__(self, db: Path) -> None:
        self.db = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        self.locked = False

    def lock(self) -> None:
        self.db.execute("BEGIN EXCLUSIVE")
        self.locked = True

    def unlock(self) -> None:
        if self.locked:
            self.db.execute("ROLLBACK")
            self.locked = False


@pytest.fixture
def locker(tmp_path: Path) -> Iterator[Locker]:
    made = Locker(tmp_path / "runs.sqlite")
    yield made
    made.unlock()
    made.db.close()


def tree(locker: Locker) -> py_trees.behaviour.Behaviour:
    @tool(category="read")
    def look() -> str:
        """Look (and, meanwhile, another process takes the checkpoint file's write lock)."""
        locker.lock()
        return "seen"

    class Plan(AsyncNode):
        async def update_async(self) -> Status:
            self.state.update({"actions": [{"id": "c1", "name": "look", "arguments": {}}]})
            return Status.SUCCESS

    return py_trees.composites.Sequence("flow", memory=True, children=[
        Plan("plan"), ToolExecutor("execute", [look])])


def claimed_elsewhere(db: Path, run_id: str) -> bool:
    """Whether another store (as another process would) is refused the run."""
    with SQLiteCheckpointer(db) as other:
        try:
            other.claim(run_id, "another owner")
        except RunClaimedError:
            return True
        return False


async def failed_run(db: Path, locker: Locker) -> tuple[SQLiteCheckpointer, ReactiveRunner]:
    """A run whose save after its tool call found the file locked: it raised."""
    store = SQLiteCheckpointer(db, busy_timeout=0.1)
    runner = ReactiveRunner(tree(locker), StateManager(AgentState), checkpointer=store)
    with pytest.raises(CheckpointError, match="database is locked"):
        await runner.run(timeout=30)
    locker.unlock()
    return store, runner


async def test_the_runners_close_gives_back_a_lease_its_release_could_not(
    tmp_path: Path, locker: Locker,
) -> None:
    db = tmp_path / "runs.sqlite"
    store, runner = await failed_run(db, locker)
    assert store.holder(runner.run_id) is not None  # the quiet release found the file locked
    await runner.aclose()
    assert store.holder(runner.run_id) is None
    assert not claimed_elsewhere(db, runner.run_id)
    store.close()


async def test_closing_the_store_gives_back_a_lease_its_release_could_not(
    tmp_path: Path, locker: Locker,
) -> None:
    db = tmp_path / "runs.sqlite"
    store, runner = await failed_run(db, locker)
    assert claimed_elsewhere(db, runner.run_id)
    store.close()
    assert not claimed_elsewhere(db, runner.run_id)
