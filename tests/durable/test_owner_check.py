"""The check each new durable step makes first: is the run still this worker's?"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("dbos")
sa = pytest.importorskip("sqlalchemy")


class _Client:
    """Answers the run's status listing; the first ``failures`` asks find no database."""

    def __init__(self, status: str, executor: str, failures: int = 0) -> None:
        self.status, self.executor, self.failures, self.asked = status, executor, failures, 0

    async def list_workflows_async(self, **_: Any) -> list[Any]:
        self.asked += 1
        if self.asked <= self.failures:
            raise sa.exc.OperationalError("SELECT", {}, ConnectionRefusedError("refused"))
        return [SimpleNamespace(status=self.status, executor_id=self.executor)]


def _owned(client: _Client) -> bool:
    from jianmu.durable import _workflow

    engine = SimpleNamespace(name="app", executor_id="w1", stopping=False, client=client)
    return asyncio.run(_workflow._owner_check(engine, "run1")())  # type: ignore[arg-type]


def test_the_run_is_owned_while_pending_under_this_executor() -> None:
    assert _owned(_Client("PENDING", "w1"))
    assert not _owned(_Client("PENDING", "w2"))  # taken over and dequeued by another
    assert not _owned(_Client("ENQUEUED", "w1"))  # handed back to the queue


def test_a_database_blip_waits_rather_than_failing_the_step(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from jianmu.durable import _workflow

    monkeypatch.setattr(_workflow, "_RECONNECT_S", 0.0)
    client = _Client("PENDING", "w1", failures=2)
    assert _owned(client)
    assert client.asked == 3
    assert "durable database unreachable" in caplog.text
