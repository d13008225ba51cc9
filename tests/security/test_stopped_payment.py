"""A payment stopped after it began is never paid again by the engine.

Before the fix, an approved async payment (``category="write"``, not idempotent) that the run's
timeout, a ``cancel()`` or a stream left by ``break`` stopped after its request went out was
not recorded: the next ``run()`` started it again and paid twice. Now such a call is recorded
as maybe done ("interrupted ... may or may not have taken effect"), the model reads that, and
nothing pays again; an idempotent call (and one that had not begun) still runs again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import py_trees
import pytest
from py_trees.common import Status

from jianmu import (
    AgentState,
    AsyncNode,
    ReactiveRunner,
    RunStatus,
    SQLiteCheckpointer,
    StateManager,
    ToolExecutor,
    tool,
)
from jianmu.llm.messages import Message
from jianmu.llm.scripted import ScriptedLLM
from jianmu.nodes import ToolExecutorConfig, ToolNode, agent_tool, create_react_node
from jianmu.runtime.events import Event

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TOLD = "may or may not have taken effect"
HANGS = 0.3
"""The timeout of a run that stops in a call hanging forever once it has begun: it begins
within milliseconds (at most 13 ms seen on 2 cores under a load of 9), and each test checks
that it had; a longer timeout only waits longer for the same end."""


class Bank:
    """Async tools that record each execution, then hang (after their effect) until let go."""

    def __init__(self) -> None:
        self.paid: list[int] = []
        self.looked: list[str] = []
        self.begun = asyncio.Event()
        self.hang = True

    def tools(self, *, ask: bool = True) -> list[Any]:
        @tool(category="write", permission="user_confirm" if ask else "auto")
        async def pay(amount: int) -> str:
            """Pay an amount (asks a person first).

            Args:
                amount: How much.
            """
            self.paid.append(amount)  # the request went out: the money moves
            self.begun.set()
            if self.hang:
                await asyncio.Event().wait()  # ...and the bank is slow to answer
            return f"paid {amount}"

        @tool(category="write", idempotent=True)
        async def set_limit(amount: int) -> str:
            """Set the card's limit (the same call twice leaves the same limit).

            Args:
                amount: The limit.
            """
            self.looked.append(f"limit {amount}")
            self.begun.set()
            if self.hang:
                await asyncio.Event().wait()
            return f"limit {amount}"

        return [pay, set_limit]


def _turn(call: dict[str, Any]) -> Any:
    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [call]
        return "done"
    return turn


def _agent(bank: Bank, call: dict[str, Any]) -> tuple[Any, ScriptedLLM]:
    llm = ScriptedLLM([_turn(call)] * 3)
    return create_react_node(llm, bank.tools()), llm


def _start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "Pay Bob 40."}]})


PAY = {"id": "pay_1", "name": "pay", "arguments": {"amount": 40}}


def _observation(state: StateManager) -> str:
    (said,) = [m.content for m in state.get("messages") if m.role == "tool"]
    return str(said)


async def _approved_and_stopped_by_timeout(runner: ReactiveRunner, bank: Bank) -> None:
    first = await runner.run(timeout=60)
    assert first.status is RunStatus.SUSPENDED
    runner.approve("pay_1")
    stopped = await runner.run(timeout=HANGS)  # the payment hangs after it paid: the timeout hits
    assert stopped.status is RunStatus.TIMEOUT
    assert bank.paid == [40]


async def test_an_approved_payment_stopped_by_the_runs_timeout_is_not_paid_again() -> None:
    bank = Bank()
    node, llm = _agent(bank, PAY)
    state = _start()
    runner = ReactiveRunner(node, state)
    failed: list[Event] = []
    runner.ctx.events.subscribe("tool.call.failed", failed.append)
    await _approved_and_stopped_by_timeout(runner, bank)
    bank.hang = False  # were it run again, it would now finish (and pay) at once
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert bank.paid == [40]  # once
    assert TOLD in _observation(state)
    assert TOLD in str(llm.requests[-1].messages[-1].content)  # the model read it
    assert [e.fields.get("in_doubt") for e in failed] == [True]
    assert not runner.pending  # not asked about again either


async def test_a_payment_the_model_asks_again_is_a_new_call_approved_again() -> None:
    bank = Bank()

    def turn(messages: list[Message]) -> Any:
        told = [m for m in messages if m.role == "tool"]
        if len(told) < 2:  # first, and again after reading it may not have gone through
            return [PAY]  # the same id: the engine gives the new call its own
        return "done"

    state = _start()
    runner = ReactiveRunner(create_react_node(ScriptedLLM([turn] * 4), bank.tools()), state)
    await _approved_and_stopped_by_timeout(runner, bank)
    bank.hang = False
    asked = await runner.run(timeout=60)
    assert asked.status is RunStatus.SUSPENDED  # a new call: the person is asked again
    (request,) = asked.pending
    assert request.id != "pay_1" and bank.paid == [40]
    runner.approve(request.id)
    assert (await runner.run(timeout=60)).ok
    assert bank.paid == [40, 40]  # the second payment is the one asked and approved again


async def test_the_stopped_payment_is_not_paid_again_after_a_restore(tmp_path: Path) -> None:
    bank, db = Bank(), tmp_path / "runs.sqlite"
    node, _ = _agent(bank, PAY)
    with SQLiteCheckpointer(db) as store:
        runner = ReactiveRunner(node, _start(), checkpointer=store, run_id="r1")
        await _approved_and_stopped_by_timeout(runner, bank)
        await runner.aclose()
    bank.hang = False
    fresh, _ = _agent(bank, PAY)  # a new tree, nothing kept in memory: as in a new process
    with SQLiteCheckpointer(db) as store:
        restored = ReactiveRunner.restore(fresh, store, "r1",
                                          state_manager=StateManager(AgentState))
        result = await restored.run(timeout=60)
        assert result.status is RunStatus.SUCCESS, result.error
        assert bank.paid == [40]
        assert TOLD in _observation(restored.state)


async def test_a_payment_stopped_by_cancel_is_not_paid_again() -> None:
    bank = Bank()
    node, _ = _agent(bank, PAY)
    state = _start()
    runner = ReactiveRunner(node, state)
    assert (await runner.run(timeout=60)).status is RunStatus.SUSPENDED
    runner.approve("pay_1")
    running = asyncio.create_task(runner.run(timeout=60))
    await bank.begun.wait()
    runner.cancel()  # Ctrl-C in the CLI does this
    assert (await running).status is RunStatus.CANCELLED
    bank.hang = False
    assert (await runner.run(timeout=60)).ok
    assert bank.paid == [40]
    assert TOLD in _observation(state)


async def test_a_payment_stopped_by_leaving_the_stream_is_not_paid_again() -> None:
    bank = Bank()
    node, _ = _agent(bank, PAY)
    state = _start()
    runner = ReactiveRunner(node, state)
    assert (await runner.run(timeout=60)).status is RunStatus.SUSPENDED
    runner.approve("pay_1")
    async with asyncio.timeout(60):
        async for event in runner.stream():
            if event.name == "tool.call.started":
                await bank.begun.wait()
                break  # the reader leaves: the run is cancelled under the payment
    bank.hang = False
    assert (await runner.run(timeout=60)).ok
    assert bank.paid == [40]
    assert TOLD in _observation(state)


async def test_an_idempotent_call_stopped_by_the_timeout_runs_again() -> None:
    bank = Bank()
    node, _ = _agent(bank, {"id": "l1", "name": "set_limit", "arguments": {"amount": 500}})
    state = _start()
    runner = ReactiveRunner(node, state)
    assert (await runner.run(timeout=HANGS)).status is RunStatus.TIMEOUT
    bank.hang = False
    assert (await runner.run(timeout=60)).ok
    assert bank.looked == ["limit 500", "limit 500"]  # run again: the same limit
    assert _observation(state) == "limit 500"


async def test_a_payment_stopped_before_it_began_runs_on_the_next_run() -> None:
    """A serial batch stopped in its first call: the payment after it had not begun, so it
    is not in doubt: the next run pays, once, under the approval it had."""
    bank = Bank()
    calls = [{"id": "l1", "name": "set_limit", "arguments": {"amount": 500}}, PAY]
    llm = ScriptedLLM([lambda m: calls if len(m) == 1 else "done"] * 3)
    node = create_react_node(llm, bank.tools(),
                             executor_config=ToolExecutorConfig(execution_mode="serial"))
    state = _start()
    runner = ReactiveRunner(node, state)
    assert (await runner.run(timeout=60)).status is RunStatus.SUSPENDED
    runner.approve("pay_1")
    assert (await runner.run(timeout=HANGS)).status is RunStatus.TIMEOUT  # in set_limit
    assert bank.paid == []
    bank.hang = False
    assert (await runner.run(timeout=60)).ok
    assert bank.paid == [40] and bank.looked == ["limit 500", "limit 500"]
    assert [m.content for m in state.get("messages") if m.role == "tool"] == [
        "limit 500", "paid 40"]


def _steps(tool_: Any) -> Any:
    return py_trees.composites.Sequence("steps", memory=True, children=[
        ToolNode("pay", tool_, input_key="amount", output_key="receipt")])


async def test_a_tool_node_step_stopped_after_it_began_fails_instead_of_paying_again() -> None:
    bank = Bank()
    pay, _ = bank.tools()
    runner = ReactiveRunner(_steps(pay), StateManager(AgentState, {"amount": {"amount": 40}}))
    failed: list[Event] = []
    runner.ctx.events.subscribe("tool.call.failed", failed.append)
    (request,) = (await runner.run(timeout=60)).pending
    runner.approve(request.id)
    assert (await runner.run(timeout=HANGS)).status is RunStatus.TIMEOUT
    bank.hang = False
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.FAILURE
    assert TOLD in (result.error or ""), result.error
    assert not result.pending  # neither asked about again
    assert bank.paid == [40]  # nor paid again
    assert [e.fields.get("in_doubt") for e in failed] == [True]


async def test_a_tree_whose_step_was_stopped_runs_it_for_a_new_run() -> None:
    """What a stopped step left is its run's: the same tree given a fresh state pays."""
    bank = Bank()
    pay, _ = bank.tools(ask=False)
    tree = _steps(pay)
    assert (await ReactiveRunner(tree, StateManager(
        AgentState, {"amount": {"amount": 40}})).run(timeout=HANGS)).status is RunStatus.TIMEOUT
    bank.hang = False
    fresh = ReactiveRunner(tree, StateManager(AgentState, {"amount": {"amount": 7}}))
    assert (await fresh.run(timeout=60)).ok
    assert bank.paid == [40, 7]


async def test_an_idempotent_tool_node_step_stopped_runs_again() -> None:
    bank = Bank()
    _, set_limit = bank.tools()
    runner = ReactiveRunner(_steps(set_limit), StateManager(AgentState,
                                                           {"amount": {"amount": 500}}))
    assert (await runner.run(timeout=HANGS)).status is RunStatus.TIMEOUT
    bank.hang = False
    assert (await runner.run(timeout=60)).ok
    assert bank.looked == ["limit 500", "limit 500"]
    assert runner.state.get("receipt") == "limit 500"


def _lead(bank: Bank) -> Any:
    """A lead agent whose sub-agent ``helper`` pays, and each answers with what it read."""

    def helper(messages: list[Message]) -> Any:
        done = [m for m in messages if m.role == "tool"]
        return f"helper: {done[-1].content}" if done else [PAY]

    def lead(messages: list[Message]) -> Any:
        done = [m for m in messages if m.role == "tool"]
        return f"lead: {done[-1].content}" if done else [
            {"id": "l1", "name": "helper", "arguments": {"input": "pay 40"}}]

    sub = agent_tool(lambda: create_react_node(ScriptedLLM([helper] * 4), bank.tools()),
                     name="helper", description="Pays.")
    return create_react_node(ScriptedLLM([lead] * 4), [sub])


async def _sub_agent_stopped(runner: ReactiveRunner, bank: Bank) -> None:
    (request,) = (await runner.run(timeout=60)).pending
    runner.approve(request.id)
    assert (await runner.run(timeout=HANGS)).status is RunStatus.TIMEOUT
    assert bank.paid == [40]
    bank.hang = False


async def test_a_sub_agents_payment_stopped_by_the_timeout_is_not_paid_again() -> None:
    """One level down: the agent tool's call runs again and resumes its sub-agent, whose
    payment is recorded as maybe done in its namespace; its model reads that."""
    bank = Bank()
    state = _start()
    runner = ReactiveRunner(_lead(bank), state)
    await _sub_agent_stopped(runner, bank)
    result = await runner.run(timeout=60)
    assert result.ok, result.error
    assert bank.paid == [40]
    assert TOLD in (state.get("final_answer") or "")


async def test_a_sub_agents_stopped_payment_is_not_paid_again_after_a_restore(
    tmp_path: Path,
) -> None:
    bank, db = Bank(), tmp_path / "runs.sqlite"
    with SQLiteCheckpointer(db) as store:
        runner = ReactiveRunner(_lead(bank), _start(), checkpointer=store, run_id="r1")
        await _sub_agent_stopped(runner, bank)
        await runner.aclose()
    with SQLiteCheckpointer(db) as store:
        restored = ReactiveRunner.restore(_lead(bank), store, "r1",
                                          state_manager=StateManager(AgentState))
        result = await restored.run(timeout=60)
        assert result.ok, result.error
        assert bank.paid == [40]
        assert TOLD in (restored.state.get("final_answer") or "")


class _Outrun(AsyncNode):
    """Succeeds once the payment beside it has begun: its Parallel then pre-empts the payment."""

    def __init__(self, bank: Bank) -> None:
        super().__init__("outrun")
        self.bank = bank

    async def update_async(self) -> Status:
        await self.bank.begun.wait()
        return Status.SUCCESS


async def test_a_payment_pre_empted_by_its_parent_is_not_paid_again() -> None:
    bank = Bank()
    pay, _ = bank.tools(ask=False)
    state = StateManager(AgentState, {"actions": [PAY]})
    race = py_trees.composites.Parallel(
        "race", policy=py_trees.common.ParallelPolicy.SuccessOnOne(),
        children=[_Outrun(bank), ToolExecutor(tools=[pay])])
    runner = ReactiveRunner(race, state)
    assert (await runner.run(timeout=60)).ok  # the race is won while the payment hangs
    assert bank.paid == [40]
    bank.hang = False
    # the batch is taken up again (here by a new executor on the same state): not paid again
    again = ReactiveRunner(ToolExecutor(tools=[pay]), state)
    assert (await again.run(timeout=60)).ok
    assert bank.paid == [40]
    assert TOLD in _observation(state)


async def test_a_parallel_payment_still_waiting_for_its_turn_runs_on_the_next_run() -> None:
    """Under ``max_concurrency`` a call waits for its turn: stopped there it had not begun,
    so it runs on the next run, once; the one that had begun is maybe done."""
    paid: list[str] = []
    first_began = asyncio.Event()

    @tool(category="write", parallel_safe=True)
    async def send(to: str) -> str:
        """Send money.

        Args:
            to: who gets it.
        """
        paid.append(to)
        if to == "a":
            first_began.set()
            await asyncio.Event().wait()
        return f"sent to {to}"

    state = StateManager(AgentState, {"actions": [
        {"id": "s1", "name": "send", "arguments": {"to": "a"}},
        {"id": "s2", "name": "send", "arguments": {"to": "b"}}]})
    executor = ToolExecutor(tools=[send], config=ToolExecutorConfig(
        execution_mode="parallel", max_concurrency=1))
    runner = ReactiveRunner(executor, state)
    running = asyncio.create_task(runner.run(timeout=60))
    await first_began.wait()
    runner.cancel()
    assert (await running).status is RunStatus.CANCELLED
    assert paid == ["a"]
    assert (await runner.run(timeout=60)).ok
    assert paid == ["a", "b"]
    told = {m.tool_call_id: m.content for m in state.get("messages") if m.role == "tool"}
    assert TOLD in told["s1"] and told["s2"] == "sent to b"


async def test_a_stopped_payment_then_a_new_message_tells_the_model_it_may_be_done() -> None:
    """The user stops the run during the payment and writes again (``send``): the
    conversation goes on, and the payment's result is what was recorded (maybe done), not
    "not run to its end", which would read as if nothing went out."""
    bank = Bank()
    node, llm = _agent(bank, PAY)
    state = _start()
    runner = ReactiveRunner(node, state)
    await _approved_and_stopped_by_timeout(runner, bank)
    bank.hang = False
    runner.send("Did it go through?")
    assert (await runner.run(timeout=60)).ok
    assert bank.paid == [40]
    assert TOLD in _observation(state)
    sent = [m for m in llm.requests[-1].messages if m.role == "tool"]
    assert len(sent) == 1 and TOLD in str(sent[0].content)


async def test_a_finished_payment_of_a_stopped_batch_keeps_its_result_after_a_new_message(
) -> None:
    """A batch stopped in its second call, then ``send``: the payment that had finished keeps
    its result ("paid 40"); it was answered "not run to its end", as if nothing went out."""
    bank = Bank()
    bank.hang = False
    pay, _ = bank.tools(ask=False)
    blocked = asyncio.Event()

    @tool(name="set_limit", category="write", idempotent=True)
    async def slow_limit(amount: int) -> str:
        """Set the card's limit.

        Args:
            amount: The limit.
        """
        blocked.set()
        await asyncio.Event().wait()
        return f"limit {amount}"

    calls = [PAY, {"id": "l1", "name": "set_limit", "arguments": {"amount": 500}}]
    llm = ScriptedLLM([lambda m: calls if len(m) == 1 else "done"] * 3)
    node = create_react_node(llm, [pay, slow_limit],
                             executor_config=ToolExecutorConfig(execution_mode="serial"))
    state = _start()
    runner = ReactiveRunner(node, state)
    running = asyncio.create_task(runner.run(timeout=60))
    await blocked.wait()
    runner.cancel()
    assert (await running).status is RunStatus.CANCELLED
    runner.send("Stop that, what happened?")
    assert (await runner.run(timeout=60)).ok
    assert bank.paid == [40]
    told = {m.tool_call_id: m.content for m in state.get("messages") if m.role == "tool"}
    assert told["pay_1"] == "paid 40"
    assert "not run to its end" in str(told["l1"])  # idempotent, stopped: left behind
