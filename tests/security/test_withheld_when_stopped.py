"""A run stopped while a tool-output guardrail read a result records the call done with its
result withheld: that result is then in none of what the run shows: the events a ``stream()``
reader sees, the tool's span (with content captured), the checkpoint's points and the studio's
view of the run (its API and each point)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jianmu import AppConfig, ReactiveRunner, StateManager, ToolExecutor, Tripwire, tool
from jianmu.nodes import AgentState
from jianmu.runtime import RunStatus, SQLiteCheckpointer
from jianmu.runtime.events import Event

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
SECRET = "sk-live-stopped-9191"
TOKEN = "stopped-token"


@tool
async def read_env() -> str:
    """Read the environment."""
    return f"API_KEY={SECRET}"


async def test_a_result_withheld_as_the_run_stopped_is_nowhere_to_be_seen(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from jianmu.studio import CheckpointRuns, create_app
    from jianmu.studio.runs import Journal

    runner: ReactiveRunner | None = None

    async def moderation(ctx: Any, result: Any) -> Tripwire | None:
        assert runner is not None
        runner.cancel()  # the run is stopped while the result is read
        await asyncio.Event().wait()
        return None

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    path = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(path)
    state = StateManager(AgentState, {"actions": [{"id": "e1", "name": "read_env",
                                                   "arguments": {}}]})
    tree = ToolExecutor(tools=[read_env], tool_output_guardrails=[moderation])
    config = AppConfig.model_validate({"telemetry": {"capture_content": True}})
    runner = ReactiveRunner(tree, state, config=config, checkpointer=store,
                            tracer_provider=provider)
    events: list[Event] = [event async for event in runner.stream(timeout=30)]
    assert events[-1].fields["result"].status is RunStatus.CANCELLED
    assert state.get("completed_call_ids") == ["e1"]
    told = (state.get("observations") or {})["e1"].content or ""
    assert "withheld" in told and SECRET not in told
    assert SECRET not in repr([(e.name, e.fields) for e in events])
    assert SECRET not in repr([dict(s.attributes or {}) for s in exporter.get_finished_spans()])
    store.close()
    with TestClient(create_app([CheckpointRuns(str(path), Journal(str(path)))], TOKEN,
                               by="tester"),
                    base_url="http://127.0.0.1", follow_redirects=False) as http:
        http.get(f"/?token={TOKEN}")
        view = http.get(f"/api/run/cp/{runner.run_id}")
        assert view.status_code == 200 and SECRET not in view.text
        assert SECRET not in http.get(f"/run/cp/{runner.run_id}").text
        points = view.json()["points"]
        assert points  # every tick was kept: each is looked at
        for point in points:
            number = point["n"]
            shown = http.get(f"/api/run/cp/{runner.run_id}/point/{number}")
            assert SECRET not in shown.text
            assert SECRET not in http.get(
                f"/api/run/cp/{runner.run_id}/point/{number}/state").text
        assert "withheld" in json.dumps(view.json())
