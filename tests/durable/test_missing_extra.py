"""Without the ``dbos`` extra, every client method of a `DurableEngine` says which extra to
install (`MissingExtraError`), as the CLI does, never a ModuleNotFoundError from a module of
Jianmu's own (examples/scale_app.py's ``wait`` met one)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest

from jianmu.durable import DurableEngine
from jianmu.errors import MissingExtraError

CALLS: dict[str, Callable[[DurableEngine], Any]] = {
    "runs": lambda e: e.runs(),
    "run_info": lambda e: e.run_info("r1"),
    "steps": lambda e: e.steps("r1"),
    "recover": lambda e: e.recover("worker-a"),
    "workers": lambda e: e.workers(),
    "decision": lambda e: e.decision("r1", "c1"),
    "start": lambda e: asyncio.run(e.start("t")),
    "result": lambda e: asyncio.run(e.result("r1")),
    "wait": lambda e: asyncio.run(e.wait("r1")),
    "pending": lambda e: asyncio.run(e.pending("r1")),
    "state": lambda e: asyncio.run(e.state("r1")),
    "approve": lambda e: asyncio.run(e.approve("r1", "c1")),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_client_call_without_dbos_names_the_extra(
    name: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = DurableEngine(f"sqlite:///{tmp_path / 'app.sqlite'}", name="missing")
    # as on a machine without the extra: DBOS cannot be imported, nor the modules that do
    for module in ("dbos", "sqlalchemy", "jianmu.durable._workflow", "jianmu.durable._tables",
                   "jianmu.durable._dbos_adapter"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=r"pip install 'jianmu\[dbos\]'"):
        CALLS[name](engine)
