"""A result a tool-output guardrail withheld from the model stays withheld everywhere a durable
run is read: the durable step that recorded the call held the tool's raw result, so
`DurableEngine.steps`, the studio's run page, its API and its events stream showed it."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.durable import HERE, Workers
from tests.support.studio import durable_pages

pytest.importorskip("dbos")
pytest.importorskip("starlette")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(f"sqlite:///{tmp_path / 'durable.sqlite'}", tmp_path)
    try:
        yield pool
    finally:
        pool.close()


def test_a_withheld_result_is_in_no_step_page_api_or_stream_of_a_durable_run(
    workers: Workers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jianmu.durable import DurableEngine

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    sys.path.insert(0, str(HERE))
    from durable_app import SECRET, engine

    client = DurableEngine(workers.db, name=engine.name, config=engine.config)
    client._trees = engine._trees
    workers.start("w1")
    run_id = asyncio.run(client.start("withheld", {}))
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok
    secret = SECRET.split("=")[1]
    steps = client.steps(run_id)
    assert any(s["name"].startswith("jianmu:tool:") for s in steps)
    assert secret not in repr(steps)
    state: dict[str, Any] = asyncio.run(client.state(run_id)) or {}
    assert secret not in repr(state) and "withheld" in repr(state), state.keys()
    view, page = durable_pages(client, run_id, tmp_path / "journal.sqlite")
    assert "withheld" in json.dumps(json.loads(view))
    assert secret not in view and secret not in page
    assert "withheld" in page
