"""A payment a SkillNode's run was stopped under is never made twice: the skill's namespace
(its conversation, the call recorded as maybe done) outlives the runner's stop, and the next
run goes on from it, as a plain ReAct node's or a sub-agent's run does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import py_trees
import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager, tool
from jianmu.config import parse_config
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog
from jianmu.skills.node import SkillNode

pytestmark = pytest.mark.anyio

CHARGES: list[int] = []
STARTED: list[asyncio.Event] = []


@tool(category="write", permission="auto")
async def charge(amount: int) -> str:
    """Charge the card (not idempotent).

    Args:
        amount: How much.
    """
    CHARGES.append(amount)
    STARTED[-1].set()
    await asyncio.Event().wait()  # the card network never answers: the run is stopped here
    return "charged"


def model(messages: list[Any]) -> Any:
    """Charges once per conversation it has not seen a charge in, then reports the result."""
    results = [m for m in messages if m.role == "tool"]
    if results:
        said = [m.content for m in messages if m.role == "user"]
        return f"after {said}: {results[-1].content}"
    return [{"name": "charge", "arguments": {"amount": 100}}]


def billing(tmp_path: Path) -> tuple[SkillNode, ScriptedLLM, Any]:
    folder = tmp_path / "skills" / "billing"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: billing\ndescription: Bill.\ntools: [charge]\n---\nCharge once.\n")
    cfg = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    llm = ScriptedLLM([model] * 4)
    catalog = SkillCatalog([tmp_path / "skills"], config=cfg, custom_tools=[charge])
    return SkillNode("Bill", ["billing"], llm, tools=[charge], catalog=catalog), llm, cfg


@pytest.fixture(autouse=True)
def _ledger() -> None:
    CHARGES.clear()
    STARTED[:] = [asyncio.Event()]


async def test_a_charge_the_run_was_cancelled_under_is_not_made_again(tmp_path: Path) -> None:
    node, llm, cfg = billing(tmp_path)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "charge 100"}]})
    async with ReactiveRunner(node, state, config=cfg) as runner:
        going = asyncio.ensure_future(runner.run(timeout=60))
        await STARTED[-1].wait()
        runner.cancel()
        assert (await going).status is RunStatus.CANCELLED
        assert state.namespaces() == ["skill_runtime.Bill_0"]  # kept for the next run
        runner.send("did it go through?")  # the user's next word reaches the skill too
        done = await runner.run(timeout=60)
    assert done.status is RunStatus.SUCCESS, done.error
    assert CHARGES == [100]  # once: the model read that the stopped charge may have been made
    answer = state.get("final_answer") or ""
    assert "the run was stopped while 'charge' was running" in answer
    assert "did it go through?" in answer
    assert len(llm.requests) == 2  # the second run asked the model once, with the record
    assert state.namespaces() == []  # the skill ended: its namespace goes


async def test_a_skill_its_parent_moves_on_from_starts_afresh(tmp_path: Path) -> None:
    # stopped by its parent (a sibling decided the parallel), not by the runner: the skill's
    # conversation is done with, and its namespace goes as on any other end
    node, _, cfg = billing(tmp_path)
    gate = asyncio.Event()

    class Decides(py_trees.behaviour.Behaviour):
        def update(self) -> py_trees.common.Status:
            return py_trees.common.Status.SUCCESS if gate.is_set() else \
                py_trees.common.Status.RUNNING

    root = py_trees.composites.Parallel(
        "race", policy=py_trees.common.ParallelPolicy.SuccessOnOne(),
        children=[node, Decides("decides")])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "charge 100"}]})
    async with ReactiveRunner(root, state, config=cfg) as runner:
        going = asyncio.ensure_future(runner.run(timeout=60))
        await STARTED[-1].wait()
        gate.set()
        runner.wake()
        assert (await going).status is RunStatus.SUCCESS
    assert state.namespaces() == []
