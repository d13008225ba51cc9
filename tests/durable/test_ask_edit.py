"""Durable runs: an approval with edited arguments, and a question answered (issue 36)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import ApprovalEditError, InteractionError
from tests.support.durable import Workers, wait_for

pytestmark = pytest.mark.timeout(400)


def _suspended(client: Any, run_id: str) -> Any:
    info = client.run_info(run_id)
    return info if info.status == "suspended" else None


def test_an_edited_approval_runs_the_edited_call(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out = tmp_path / "deployed.txt"
    workers.start("w1")
    run_id = asyncio.run(client.start("confirm", {"path": str(out)}))
    info = wait_for(lambda: _suspended(client, run_id), what="the run to ask for approval")
    assert info.pending[0].payload["parameters"]["required"] == ["target"]
    with pytest.raises(ApprovalEditError, match=r"\$\.target"):
        asyncio.run(client.approve(run_id, "deploy_1", arguments={"target": 5}))
    with pytest.raises(InteractionError, match="not for an answer"):
        asyncio.run(client.answer(run_id, "deploy_1", "yes"))
    assert client.decision(run_id, "deploy_1") is None  # nothing was recorded
    asyncio.run(client.approve(run_id, "deploy_1", arguments={"target": "staging"}))
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert out.read_text().splitlines() == ["deployed staging"]
    state = asyncio.run(client.state(run_id))
    assert state is not None
    answer = state["root"]["final_answer"]
    assert answer.startswith("finished: [a person edited") and answer.endswith("deployed")


def test_a_question_is_answered_from_another_process(workers: Workers, client: Any) -> None:
    workers.start("w1")
    run_id = asyncio.run(client.start("ask", {}))
    info = wait_for(lambda: _suspended(client, run_id), what="the run to ask its question")
    (request,) = info.pending
    assert request.kind == "question" and request.question == "Which city?"
    with pytest.raises(InteractionError, match="is a question"):
        asyncio.run(client.approve(run_id, request.id))
    asyncio.run(client.answer(run_id, request.id, "Lisbon"))
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    state = asyncio.run(client.state(run_id))
    assert state is not None
    assert state["root"]["final_answer"] == "going to Lisbon"
