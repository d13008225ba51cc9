"""Red team, hand-offs: the agent placed in the tree denies a tool; the agent it hands the
conversation to offers that tool and its model calls it, in every spelling.

Fixed here: a hand-off target ran under its own constraints only, so a triage agent whose
guard denied ``deploy`` handed off to a billing agent that deployed. Now every agent of a
team runs under the first agent's layer as well as its own.
"""

from __future__ import annotations

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node, handoff
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
RAN: list[str] = []


@tool(read_only=False)
def deploy(target: str) -> str:
    """Deploy.

    Args:
        target: where.
    """
    RAN.append(target)
    return "deployed"


@pytest.mark.parametrize("spelling", ["deploy", "DEPLOY", " deploy", "ｄｅｐｌｏｙ"])
async def test_a_handed_to_agent_cannot_run_what_the_first_agent_denies(spelling: str) -> None:
    RAN.clear()
    admin_llm = ScriptedLLM([[{"name": spelling, "arguments": {"target": "prod"}}], "admin"])
    admin = create_react_node(admin_llm, [deploy], name="admin")
    billing_llm = ScriptedLLM([[{"name": "transfer_to_admin", "arguments": {}}]])
    billing = create_react_node(billing_llm, [deploy, handoff(admin)], name="billing")
    denied = Constraints.model_validate({"guard": {"tool_policy": {"deploy": "deny"}}})
    triage = create_react_node(ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}]]),
                               [handoff(billing)], name="triage", constraints=denied)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    assert (await ReactiveRunner(triage, state).run()).ok
    assert state.get("active_agent") == "admin" and RAN == []
    for llm in (billing_llm, admin_llm):
        assert "deploy" not in [t["function"]["name"] for t in llm.requests[0].tools]
