"""What a guardrail refused stays out of a durable run's record, as it stays out of a plain
run's state: an answer an output guardrail refused, and a sub-agent's answer that its caller's
tool-output guardrail withheld.

A durable run recorded each model turn as a step before the guardrails decided, so the refused
answer (a leaked key) stayed in `DurableEngine.steps`, the studio's view of the run and the
database. Now a turn a guardrail may refuse is recorded once they decided, holding only what
they passed; a recovered run replays the refusal without asking the model again.
Both databases: the embedded SQLite file (whose bytes are searched too) and a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import durable
from tests.support.durable import Workers, wait_for
from tests.support.studio import durable_pages

pytest.importorskip("dbos")
pytest.importorskip("starlette")
pytestmark = pytest.mark.timeout(400)

db_url = durable.db_url
workers = durable.workers


client = durable.client


def _leak() -> str:
    from durable_app import LEAK

    return str(LEAK)


def _encodings(secret: str) -> list[bytes]:
    """``secret`` as its bytes, and as it reads inside any base64 text (DBOS stores a step's
    output as base64 of its pickle): one fragment per alignment."""
    raw = secret.encode()
    found = [raw]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw)
        found.append(encoded[4 if pad else 0:-4])
    return found


def _assert_not_in_database(db_url: str, tmp_path: Path, secret: str) -> None:
    """Nowhere in the database: the SQLite file's bytes (and its journal), or every row of
    PostgreSQL's DBOS tables as text."""
    if db_url.startswith("sqlite"):
        files = [p for p in tmp_path.iterdir() if p.name.startswith("durable.sqlite")]
        assert files
        blobs = [p.read_bytes() for p in files]
    else:
        import sqlalchemy as sa

        from jianmu.durable._tables import sqlalchemy_url

        db = sa.create_engine(sqlalchemy_url(db_url))
        with db.connect() as conn:
            tables = conn.execute(sa.text(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")).all()
            blobs = [str(conn.execute(sa.text(f'SELECT t::text FROM "{s}"."{n}" t')).all())
                     .encode() for s, n in tables]
        db.dispose()
    for blob in blobs:
        for form in _encodings(secret):
            assert form not in blob, f"{form!r} is in the database"


def _assert_not_in_studio(client: Any, run_id: str, tmp_path: Path, secret: str) -> str:
    """Nowhere in the studio's page or API of the run; the API's JSON."""
    view, page = durable_pages(client, run_id, tmp_path / "journal.sqlite")
    assert secret not in view and secret not in page
    return json.dumps(json.loads(view))


def test_an_answer_an_output_guardrail_refused_is_in_no_step_studio_view_or_database_byte(
    workers: Workers, client: Any, db_url: str, tmp_path: Path
) -> None:
    asks = tmp_path / "asks.txt"
    workers.start("w1")
    run_id = asyncio.run(client.start("refused", {"path": "-", "asks": str(asks)}))
    result = asyncio.run(client.result(run_id, timeout=120))
    secret = _leak()
    assert not result.ok and "holds a key" in str(result.error)
    steps = client.steps(run_id)
    model = [s for s in steps if s["name"].startswith("jianmu:model:")]
    assert model, steps  # the turn is recorded: its refusal, never its answer
    assert "refused" in str(model[0]["output"])
    assert secret not in repr(steps)
    state = asyncio.run(client.state(run_id)) or {}
    assert state and secret not in repr(state)
    view = _assert_not_in_studio(client, run_id, tmp_path, secret)
    assert "refused" in view
    _assert_not_in_database(db_url, tmp_path, secret)


def test_a_sub_agents_answer_its_callers_guardrail_withheld_is_in_no_step_or_database_byte(
    workers: Workers, client: Any, db_url: str, tmp_path: Path
) -> None:
    asks = tmp_path / "asks.txt"
    workers.start("w1")
    run_id = asyncio.run(client.start("withheld_agent", {"path": "-", "asks": str(asks)}))
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    secret = _leak()
    state = asyncio.run(client.state(run_id)) or {}
    assert "withheld" in str(state["root"]["final_answer"])
    steps = client.steps(run_id)
    # the helper's answer: judged by the lead's guardrail inside its step, which holds the refusal
    assert any("helper" in s["name"] and "refused by tool_output guardrail" in str(s["output"])
               for s in steps), steps
    assert secret not in repr(steps) and secret not in repr(state)
    assert "withheld" in _assert_not_in_studio(client, run_id, tmp_path, secret)
    _assert_not_in_database(db_url, tmp_path, secret)


def test_a_refusal_recovered_after_a_crash_ends_the_same_without_asking_the_model_again(
    workers: Workers, client: Any, db_url: str, tmp_path: Path
) -> None:
    """Killed after the refusal was recorded: the recovered run replays it (the model is not
    asked again, the answer never comes back) and ends as a run that was never killed."""
    secret = _leak()
    whole = asyncio.run(client.start("refused", {  # never killed: how the run ends
        "path": "-", "asks": str(tmp_path / "whole.txt"), "marker": str(tmp_path / "whole")}))
    (tmp_path / "whole").touch()
    asks, marker = tmp_path / "asks.txt", tmp_path / "hung"
    first = workers.start("w1")
    expected = asyncio.run(client.result(whole, timeout=120))
    run_id = asyncio.run(client.start("refused", {
        "path": "-", "asks": str(asks), "marker": str(marker)}))
    wait_for(marker.exists, what="the node after the refusal to start")
    Workers.kill(first)
    workers.start("w1")
    result = asyncio.run(client.result(run_id, timeout=120))
    assert (result.status, result.error) == (expected.status, expected.error)
    assert "holds a key" in str(result.error)
    assert asks.read_text().splitlines() == ["answer"]  # asked once, before the kill
    assert secret not in repr(client.steps(run_id))
    assert secret not in repr(asyncio.run(client.state(run_id)))
    _assert_not_in_database(db_url, tmp_path, secret)


def test_a_withheld_sub_agent_answer_recovered_after_a_crash_is_not_asked_again(
    workers: Workers, client: Any, db_url: str, tmp_path: Path
) -> None:
    """Killed after the caller recorded the withheld call: the recovered run replays the
    refusal; the sub-agent's model is not asked again and its answer never comes back."""
    secret = _leak()
    asks, marker = tmp_path / "asks.txt", tmp_path / "hung"
    first = workers.start("w1")
    run_id = asyncio.run(client.start("withheld_agent", {
        "path": "-", "asks": str(asks), "marker": str(marker)}))
    wait_for(marker.exists, what="the lead's turn after the withheld call")
    Workers.kill(first)
    workers.start("w1")
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert asks.read_text().splitlines() == [
        "lead asks", "helper", "lead answers", "lead answers"]
    state = asyncio.run(client.state(run_id)) or {}
    answer = str(state["root"]["final_answer"])
    assert answer.startswith("told: ") and "withheld: guardrail '_no_keys'" in answer
    assert secret not in repr(client.steps(run_id)) and secret not in repr(state)
    _assert_not_in_database(db_url, tmp_path, secret)
