"""A tree that pre-empts its agent node again and again (a reactive selector whose check comes
first) must not spend without bound under a token budget: each model call it stopped after
the request went out was billed, so it counts, and the budget stops the next one."""

from __future__ import annotations

import threading

import py_trees
import pytest
from py_trees.common import Status

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, create_react_node, tool
from jianmu.config import parse_config
from jianmu.errors import TokenBudgetExhausted
from jianmu.llm import OpenAIProvider
from tests.support.raw_http import SSE, RawServer, Recorded, Reply, chunk, openai_sse

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


class Interrupt(py_trees.behaviour.Behaviour):
    """A check that passes once each time it is armed: the selector then pre-empts the agent."""

    def __init__(self) -> None:
        super().__init__("interrupt")
        self.armed = False

    def update(self) -> Status:
        if self.armed:
            self.armed = False
            return Status.SUCCESS
        return Status.FAILURE


async def test_a_tree_that_keeps_pre_empting_its_agent_is_stopped_by_the_budget() -> None:
    """Fixed here (red team): a call stopped mid-answer counted nothing, and the budget was
    read only once a round ended, which a pre-empted round never does; the tree asked (and
    was billed) for ever under a budget of 1,000 tokens."""
    hold = threading.Event()

    def answer(request: Recorded) -> Reply:
        first = b"".join(openai_sse([chunk({"role": "assistant", "content": "x" * 400})],
                                    done=False))
        return Reply(headers=SSE, pieces=[first, *openai_sse([chunk(finish="stop")])],
                     chunked=True, hold=hold)

    with RawServer(answer) as server:
        try:
            llm = OpenAIProvider("m", base_url=server.url + "/v1", api_key="k")
            interrupt = Interrupt()
            agent = create_react_node(llm, [ping], stream=True)
            reactive = py_trees.composites.Selector("reactive", memory=False,
                                                    children=[interrupt, agent])
            root = py_trees.decorators.Repeat("again", reactive, num_success=-1)
            state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Hi."}]})
            config = parse_config("guard:\n  budget:\n    total_tokens: 1000\n")
            runner = ReactiveRunner(root, state, config=config)
            stopped: list[object] = []
            runner.ctx.events.subscribe("llm.usage_unknown", stopped.append)

            def pre_empt(event: object) -> None:  # the answer began: the check passes now
                interrupt.armed = True
                runner.wake()

            runner.ctx.events.subscribe("llm.call.delta", pre_empt)
            # a bound on ticks, not on time: without the fix the tree never ends
            result = await runner.run(max_ticks=2000)
            await llm.close()
        finally:
            hold.set()
    assert result.status is RunStatus.FAILURE, result
    assert isinstance(result.exception, TokenBudgetExhausted)
    usage = state.get("usage")
    # each stopped call counts some 150 tokens (its prompt and 400 characters of answer)
    assert usage.total_tokens >= 1000 and usage.requests == len(server.requests) <= 10
    assert len(stopped) == len(server.requests)
