"""Red team, the tree an `Agent` shares between its runs one after another: it must serve a
new run only once no runner works on it any more.

Fixed here, a timed-out run whose stopped call is still cleaning up when `run()` returns (the
``runtime.cleanup_grace`` ran out): `Agent` freed its shared tree as soon as the run returned,
and the next run (another user's, on a web server's module-level agent) took it and bound its
nodes to its own state. When the first run's payment ended its cleanup, the executor recorded it
as maybe done in the second run's state and on its event bus: the first run lost the record, so
running it again paid a second time, and the second run held a call it never made. A plain
`ReactiveRunner` over the same tree did the same. The runner now keeps such tasks
(`RunContext.cleaning`) and refuses to bind the tree to another run until they end; `Agent`
gives the next runs a fresh tree meanwhile.

Fixed here too, a conversation going on through an ended run's runner
(``result.runner.send(...)``, then ``run()``): that run binds the shared tree again, which `Agent`
took for free, so another user's ``agent.run()`` meanwhile failed with "tree ... is being
ticked by run ...". `Agent` now asks whether a runner works on the tree before it hands it out.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jianmu import Agent, ReactiveRunner, RunStatus, ScriptedLLM, StateManager, tool
from jianmu.config import AppConfig
from jianmu.llm.provider import ChatRequest, LLMResponse
from jianmu.nodes import AgentState, create_react_node

pytestmark = pytest.mark.anyio

QUICK = AppConfig(runtime={"cleanup_grace": 0.01})


class Payments:
    """A payment whose cleanup, once stopped, outlasts the run's grace until ``gate`` opens."""

    def __init__(self) -> None:
        self.paid: list[str] = []
        self.started = asyncio.Event()
        self.gate = asyncio.Event()
        self.recorded = asyncio.Event()  # the stopped call's record, on whichever bus

        @tool(category="write")
        async def transfer(to: str) -> str:
            """Transfer money.

            Args:
                to: who gets it.
            """
            self.paid.append(to)
            if len(self.paid) > 1:
                return "paid again"
            self.started.set()
            try:
                await asyncio.Event().wait()
            finally:
                await self.gate.wait()
            return "paid"

        self.tool = transfer

    def watch(self, runner: ReactiveRunner) -> None:
        runner.ctx.events.subscribe("tool.call.failed", lambda _e: self.recorded.set())


def model(messages: list[Any]) -> Any:
    last = messages[-1]
    if last.role == "user" and last.content == "pay eve":
        return [{"name": "transfer", "arguments": {"to": "eve"}, "id": "first_call"}]
    return f"answered: {str(last.content)[:40]}"


async def timed_out(run: Any, payments: Payments) -> Any:
    result = await run
    assert payments.started.is_set(), "the payment must have begun before the run's timeout"
    assert result.status is RunStatus.TIMEOUT
    return result


async def test_a_timed_out_agent_runs_cleanup_never_writes_to_the_next_run() -> None:
    payments = Payments()
    agent = Agent(ScriptedLLM([model] * 10), tools=[payments.tool], config=QUICK)
    first = await timed_out(agent.run("pay eve", timeout=1.0), payments)
    second = await agent.run("hello")  # another user, while the payment still cleans up
    payments.watch(first.runner)
    payments.watch(second.runner)
    payments.gate.set()
    await payments.recorded.wait()

    assert "first_call" not in (second.runner.state.get("completed_call_ids") or ())
    assert "first_call" in (first.runner.state.get("completed_call_ids") or ())
    again = await first.runner.run()  # the first run goes on: the payment is not made twice
    assert again.status is RunStatus.SUCCESS
    assert payments.paid == ["eve"]
    assert "may or may not have taken effect" in (again.messages[2].content or "")


async def test_another_runner_over_the_tree_is_refused_while_the_cleanup_runs() -> None:
    payments = Payments()
    tree = create_react_node(ScriptedLLM([model] * 10), [payments.tool])

    def runner(prompt: str) -> ReactiveRunner:
        return ReactiveRunner(tree, StateManager(AgentState, {"messages": [
            {"role": "user", "content": prompt}]}), config=QUICK)

    first = runner("pay eve")
    payments.watch(first)
    await timed_out(first.run(timeout=1.0), payments)
    second = runner("hello")
    with pytest.raises(RuntimeError, match="still cleaning up after run"):
        await second.run()
    payments.gate.set()
    await payments.recorded.wait()
    while first.ctx.cleaning:  # the task ends right after its record
        await asyncio.sleep(0)

    assert (await second.run()).status is RunStatus.SUCCESS
    assert "first_call" in (first.state.get("completed_call_ids") or ())
    assert "first_call" not in (second.state.get("completed_call_ids") or ())


class Slow(ScriptedLLM):
    """A scripted model that holds its answer to ``"slow"`` until ``gate`` opens."""

    def __init__(self) -> None:
        super().__init__([lambda m: f"answer {m[-1].content}"] * 10)
        self.asked, self.gate = asyncio.Event(), asyncio.Event()

    async def send(self, request: ChatRequest) -> LLMResponse:
        if request.messages[-1].content == "slow":
            self.asked.set()
            await self.gate.wait()
        return await super().send(request)


async def test_a_conversation_going_on_through_a_results_runner_leaves_others_their_runs() -> None:
    llm = Slow()
    agent = Agent(llm)
    first = await agent.run("hi")
    first.runner.send("slow")  # the chat goes on with the run's own runner
    going_on = asyncio.create_task(first.runner.run())
    await llm.asked.wait()
    try:
        other = await agent.run("another user")
    finally:
        llm.gate.set()
    assert (other.status, other.output) == (RunStatus.SUCCESS, "answer another user")
    assert (await going_on).messages[-1].content == "answer slow"
