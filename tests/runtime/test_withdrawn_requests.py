"""A request whose tree ended without it no longer waits: a run that finished (SUCCESS or
FAILURE) while a call asked for approval withdraws that request.

Fixed here: the request stayed pending after the run had finished. ``runner.pending`` still
listed it, ``approve`` took a decision that nothing would ever act on (a person was told the
call was approved), and ``send`` refused the next message of the chat ("the run waits for
approval") until someone decided a call that no longer existed.
"""

from __future__ import annotations

import py_trees
import pytest
from py_trees.common import ParallelPolicy, Status

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.errors import InteractionError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import create_react_node
from jianmu.nodes.state import AgentState
from jianmu.runtime import SQLiteCheckpointer
from jianmu.tools import tool

pytestmark = pytest.mark.anyio

PAID: list[int] = []


@tool
def transfer(amount: int) -> str:
    """Send money.

    Args:
        amount: how much.
    """
    PAID.append(amount)
    return f"sent {amount}"


class EndsOnceAsked(py_trees.behaviour.Behaviour):
    """A sibling that ends (with ``status``) on the first tick after a call asked a person,
    and succeeds from then on: a watchdog, a race's other branch."""

    def __init__(self, runner: list[ReactiveRunner], status: Status) -> None:
        super().__init__("sibling")
        self.runner, self.ends_with, self.ended = runner, status, False

    def update(self) -> Status:
        if self.ended:
            return Status.SUCCESS
        self.ended = self.runner[0].interaction.has_pending
        return self.ends_with if self.ended else Status.RUNNING


def race(policy: ParallelPolicy.Base, ends_with: Status,
         **kwargs: object) -> tuple[ReactiveRunner, StateManager]:
    llm = ScriptedLLM([
        [{"id": "pay", "name": "transfer", "arguments": {"amount": 100}}],
        "done", "next answer",
    ])
    constraints = Constraints.model_validate({"guard": {"tool_policy": {"transfer": "confirm"}}})
    agent = create_react_node(llm, [transfer], constraints=constraints)
    holder: list[ReactiveRunner] = []
    root = py_trees.composites.Parallel(
        "race", policy=policy, children=[agent, EndsOnceAsked(holder, ends_with)])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pay"}]})
    runner = ReactiveRunner(root, state, **kwargs)  # type: ignore[arg-type]
    holder.append(runner)
    return runner, state


@pytest.fixture(autouse=True)
def _clear() -> None:
    PAID.clear()


@pytest.mark.parametrize(("policy", "ends_with", "status"), [
    (ParallelPolicy.SuccessOnAll(), Status.FAILURE, RunStatus.FAILURE),
    (ParallelPolicy.SuccessOnOne(), Status.SUCCESS, RunStatus.SUCCESS),
])
async def test_a_request_of_a_finished_run_is_withdrawn(
    policy: ParallelPolicy.Base, ends_with: Status, status: RunStatus
) -> None:
    runner, _state = race(policy, ends_with)
    withdrawn: list[dict[str, object]] = []
    runner.ctx.events.subscribe("interaction.withdrawn",
                                lambda e: withdrawn.append(dict(e.fields)))

    result = await runner.run(timeout=30)

    assert result.status is status
    assert runner.pending == [] and result.pending == ()
    assert withdrawn == [{"request_id": "pay"}]
    with pytest.raises(InteractionError, match="no longer waits"):
        runner.approve("pay")
    assert runner.interaction.decision("pay") is None
    runner.send("and now?")  # the chat goes on: nothing waits for a person
    assert (await runner.run(timeout=30)).status is RunStatus.SUCCESS
    assert PAID == []


async def test_a_withdrawn_request_stays_withdrawn_after_a_restore(tmp_path: object) -> None:
    store = SQLiteCheckpointer(f"{tmp_path}/runs.db")
    runner, _state = race(ParallelPolicy.SuccessOnAll(), Status.FAILURE, checkpointer=store)
    assert (await runner.run(timeout=30)).status is RunStatus.FAILURE

    again, _ = race(ParallelPolicy.SuccessOnAll(), Status.FAILURE)
    restored = ReactiveRunner.restore(again.root, store, runner.run_id)
    assert restored.pending == []
    with pytest.raises(InteractionError, match="no longer waits"):
        restored.approve("pay")
