"""A forked child does not give up its parent's runs.

Before the fix, a child made by ``os.fork()`` that closed the checkpoint store it inherited
(``with SQLiteCheckpointer(...)`` unwinding in the child, a worker's clean-up) or closed a
runner it inherited released every lease the parent held: another process could then claim
the run the parent was still deciding or paying in, and both acted on it. Now a lease belongs
to the process that took it; the child's close leaves the parent's leases (and the file) alone.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from jianmu import AgentState
from jianmu.errors import RunClaimedError
from jianmu.runtime import ReactiveRunner, SQLiteCheckpointer
from jianmu.state import StateManager
from tests.support.payments import PAID, pay_flow, suspended_payment

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _no_payments() -> None:
    PAID.clear()


def in_child(step: Callable[[], object]) -> int:
    """Run ``step`` in a forked child that then exits; its exit code (0: ``step`` returned)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            step()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def refused_elsewhere(db: Path, run_id: str) -> bool:
    """Whether another process's claim on ``run_id`` is refused (the run is still held)."""
    with SQLiteCheckpointer(db) as other:
        try:
            other.claim(run_id, "another-terminal")
        except RunClaimedError:
            return True
        other.release(run_id, "another-terminal")
        return False


def test_a_child_closing_the_inherited_store_keeps_the_parents_lease(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(db)
    store.claim("r1", "parent")
    assert in_child(store.close) == 0
    holder = store.holder("r1")
    assert holder is not None and holder.owner == "parent"
    assert refused_elsewhere(db, "r1")
    store.close()  # the parent's own close gives it up
    assert not refused_elsewhere(db, "r1")


def test_a_child_closing_an_inherited_runner_keeps_the_parents_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = suspended_payment(db)
    store = SQLiteCheckpointer(db)
    runner = ReactiveRunner.restore(pay_flow(), store, run_id,
                                    state_manager=StateManager(AgentState))  # holds the run
    assert in_child(lambda: asyncio.run(runner.aclose())) == 0
    assert in_child(store.close) == 0
    assert refused_elsewhere(db, run_id)  # the parent is deciding it still
    runner.approve("pay_1")
    assert runner.run_sync(timeout=60).ok
    assert PAID == ["paid 40"]
    assert not refused_elsewhere(db, run_id)  # the run returned: given up
    store.close()


def test_a_child_cannot_release_its_parents_lease_by_name(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(db)
    store.claim("r1", "parent")
    assert in_child(lambda: store.release("r1", "parent")) == 0
    assert refused_elsewhere(db, "r1")
    store.release("r1", "parent")
    assert not refused_elsewhere(db, "r1")
    store.close()


def test_a_store_opened_in_the_child_works_there(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    parent = SQLiteCheckpointer(db)

    def child() -> None:  # its own store, its own lease, given up by its own close
        with SQLiteCheckpointer(db) as own:
            own.claim("r2", "child")
        with SQLiteCheckpointer(db) as check:
            check.claim("r2", "someone")  # free again

    assert in_child(child) == 0
    parent.close()


