"""What `jianmu.durable._dbos_adapter` takes from DBOS beyond its public API is still there.

Each check names the missing piece, so a DBOS release that moves it fails here, loudly, before
any durable run misbehaves.
"""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("dbos")


def test_step_numbers_are_drawn_through_the_public_api() -> None:
    from dbos import DBOS, StepReservation

    assert callable(getattr(DBOS, "reserve_step", None)), (
        "DBOS.reserve_step is gone: advance_step_counter needs a new way to number new steps "
        "after replayed ones")
    assert isinstance(getattr(StepReservation, "step_id", None), property), (
        "StepReservation.step_id is gone: advance_step_counter cannot tell where it is")


def test_the_conditional_reenqueue_of_a_dead_workers_runs_is_reachable() -> None:
    from dbos import DBOSClient, _utils
    from dbos._sys_db import SystemDatabase

    assert isinstance(getattr(_utils, "INTERNAL_QUEUE_NAME", None), str), (
        "dbos._utils.INTERNAL_QUEUE_NAME is gone")
    for name, params in (("get_pending_workflows", ["executor_id", "app_version"]),
                         ("reenqueue_for_recovery",
                          ["workflow_id", "executor_ids", "recovery_queue_name"])):
        method = getattr(SystemDatabase, name, None)
        assert method is not None, f"SystemDatabase.{name} is gone: takeover cannot recover runs"
        assert list(inspect.signature(method).parameters)[1:] == params, (
            f"SystemDatabase.{name} changed its parameters")
    source = inspect.getsource(DBOSClient.__init__)
    assert "_sys_db" in source, "DBOSClient no longer keeps its system database as _sys_db"


def test_the_public_names_used_exist() -> None:
    from dbos import DBOS, DBOSClient, error

    assert callable(DBOS.migrate) and callable(DBOSClient.list_workflow_steps)
    assert issubclass(error.DBOSNonExistentWorkflowError, Exception)
    assert issubclass(error.DBOSAwaitedWorkflowCancelledError, Exception)


def test_only_the_adapter_imports_private_dbos_names() -> None:
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "jianmu"
    offenders = [
        str(p.relative_to(package)) for p in package.rglob("*.py")
        if p.name != "_dbos_adapter.py" and ("dbos._" in p.read_text() or "._sys_db" in
                                             p.read_text())
    ]
    assert offenders == []
