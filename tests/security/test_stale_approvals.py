"""An `AgentResult`'s ``approve()`` / ``reject()`` without an id decides the one request that
result lists, never another one asked since.

Fixed here: they decided whatever the run waited for at the time of the call. A person who
approved a transfer of 10 from the first result and, on a later turn, called ``approve()`` on
that same result again (a retried click, a stale handle) approved the transfer of 10000 the
run had asked for since, which they had never seen.
"""

from __future__ import annotations

import pytest

from jianmu import Agent, RunStatus, ScriptedLLM, tool
from jianmu.errors import InteractionError


@tool(confirm=True)
def transfer(amount: int) -> str:
    """Send money (a person approves first).

    Args:
        amount: how much.
    """
    return f"sent {amount}"


def two_transfers() -> Agent:
    return Agent(ScriptedLLM([
        [{"name": "transfer", "arguments": {"amount": 10}}],
        [{"name": "transfer", "arguments": {"amount": 10000}}],
        "Done.",
    ]), tools=[transfer])


@pytest.mark.parametrize("decide", ["approve", "reject"])
def test_a_stale_result_does_not_decide_a_request_it_never_showed(decide: str) -> None:
    agent = two_transfers()
    first = agent.run_sync("Pay.")
    first.approve()
    second = agent.run_sync(resume=first)
    assert second.status is RunStatus.SUSPENDED
    assert second.pending[0].payload["arguments"] == {"amount": 10000}
    with pytest.raises(InteractionError):
        getattr(first, decide)()  # its one request was decided already
    assert second.runner.interaction.decision(second.pending[0].id) is None
    second.reject()
    assert agent.run_sync(resume=second).ok
