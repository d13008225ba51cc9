"""Ctrl-C that lands in an async write tool's own code is a stop: the payment is never made twice.

Before the fix, a SIGINT arriving while an async ``category="write"`` tool ran its own code on
the loop under ``run_sync`` (blocking work, or simply the instruction the signal interrupted)
raised ``KeyboardInterrupt`` through the call unrecorded: only a ``CancelledError`` settled a
stopped call, so the next ``run_sync()`` started the payment again, with a checkpointer too.
A sync tool stopped in its worker thread was already recorded as maybe done; now the async one
is too, and the ``KeyboardInterrupt`` still leaves ``run_sync`` (a real Ctrl-C stops the run).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import py_trees
import pytest

from jianmu import (
    AgentState,
    ReactiveRunner,
    RunStatus,
    SQLiteCheckpointer,
    StateManager,
    tool,
)
from jianmu.llm.scripted import ScriptedLLM
from jianmu.nodes import ToolExecutorConfig, ToolNode, create_react_node
from jianmu.runtime.events import Event

pytestmark = pytest.mark.timeout(120)

TOLD = "may or may not have taken effect"


@pytest.fixture(autouse=True)
def _python_handles_ctrl_c() -> Any:
    """SIGINT raises KeyboardInterrupt where the main thread is, as in a plain script."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


class Bank:
    """An async payment whose first execution gets a real SIGINT in its own code, after the
    money moved (the request went out); later executions pay and return."""

    def __init__(self) -> None:
        self.paid: list[int] = []

    def pay_tool(self, **spec: Any) -> Any:
        @tool(category="write", **spec)
        async def pay(amount: int) -> str:
            """Pay an amount.

            Args:
                amount: How much.
            """
            self.paid.append(amount)
            if len(self.paid) == 1:
                signal.raise_signal(signal.SIGINT)  # the person presses Ctrl-C just now
            return f"paid {amount}"

        return pay


def _state() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "Pay Bob 40."}]})


def _observations(state: StateManager) -> list[str]:
    return [str(m.content) for m in state.get("messages") if m.role == "tool"]


@pytest.mark.parametrize("stored", [True, False], ids=["checkpointed", "in-memory"])
def test_a_payment_ctrl_c_stopped_in_its_own_code_is_not_paid_again(
    tmp_path: Path, stored: bool,
) -> None:
    bank = Bank()
    llm = ScriptedLLM([[{"id": "c1", "name": "pay", "arguments": {"amount": 40}}], "done"])
    state = _state()
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite") if stored else None
    runner = ReactiveRunner(create_react_node(llm, [bank.pay_tool()]), state,
                            checkpointer=store)
    failed: list[Event] = []
    runner.ctx.events.subscribe("tool.call.failed", failed.append)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C still stops the run
        runner.run_sync()
    result = runner.run_sync()
    assert result.status is RunStatus.SUCCESS, result.error
    assert bank.paid == [40]  # once
    (said,) = _observations(state)
    assert TOLD in said
    assert TOLD in str(llm.requests[-1].messages[-1].content)  # the model read it
    assert [e.fields.get("in_doubt") for e in failed] == [True]
    if store is not None:
        store.close()


def test_a_parallel_batch_stopped_by_ctrl_c_in_one_payment_pays_none_again() -> None:
    bank = Bank()
    calls = [{"id": f"c{i}", "name": "pay", "arguments": {"amount": i}} for i in (1, 2)]
    state = _state()
    node = create_react_node(
        ScriptedLLM([calls, "done"]), [bank.pay_tool(parallel_safe=True)],
        executor_config=ToolExecutorConfig(execution_mode="parallel"))
    runner = ReactiveRunner(node, state)
    with pytest.raises(KeyboardInterrupt):
        runner.run_sync()
    assert runner.run_sync().ok
    assert len(bank.paid) <= 2 and bank.paid[0] == 1  # each call paid at most once
    assert sorted(bank.paid) == sorted(set(bank.paid))
    said = _observations(state)
    assert len(said) == 2 and TOLD in said[0]  # both answered, the stopped one maybe done


def test_an_idempotent_call_stopped_by_ctrl_c_runs_again() -> None:
    bank = Bank()
    llm = ScriptedLLM([[{"id": "c1", "name": "pay", "arguments": {"amount": 40}}], "done"])
    state = _state()
    runner = ReactiveRunner(create_react_node(llm, [bank.pay_tool(idempotent=True)]), state)
    with pytest.raises(KeyboardInterrupt):
        runner.run_sync()
    assert runner.run_sync().ok
    assert bank.paid == [40, 40]  # it may repeat, so it ran to its end
    assert _observations(state) == ["paid 40"]


def test_a_tool_node_step_stopped_by_ctrl_c_fails_instead_of_paying_again() -> None:
    bank = Bank()
    tree = py_trees.composites.Sequence("steps", memory=True, children=[
        ToolNode("pay", bank.pay_tool(), input_key="amount", output_key="receipt")])
    runner = ReactiveRunner(tree, StateManager(AgentState, {"amount": {"amount": 40}}))
    with pytest.raises(KeyboardInterrupt):
        runner.run_sync()
    result = runner.run_sync()
    assert result.status is RunStatus.FAILURE
    assert TOLD in (result.error or ""), result.error
    assert bank.paid == [40]
