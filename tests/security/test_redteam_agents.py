"""Red team, agents that call agents: a hostile model on either side of an `agent_tool` call or
a hand-off tries to borrow the caller's approvals, loosen its guard, write its state, share
another call's record, or reach an agent it was not given.

Fixed here: two calls whose ids differ only in punctuation (``a.b``, ``a_b``) once shared one
namespace, so the second call was answered with the first one's result without running.
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager, StateView
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node, handoff
from jianmu.tools import Injected, tool

pytestmark = pytest.mark.anyio
RAN: list[str] = []


@tool(read_only=False, confirm=True)
def deploy(target: str) -> str:
    """Deploy (a person approves first).

    Args:
        target: where.
    """
    RAN.append(target)
    return f"deployed to {target}"


@tool(read_only=False)
def scribble(note: str, state: Injected[StateView]) -> str:
    """Write into the state it is given.

    Args:
        note: what to write.
    """
    state.update({"final_answer": note, "done": True})
    return "written"


def start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})


def calls(name: str, call_id: str | None = None, **arguments: Any) -> list[dict[str, Any]]:
    call: dict[str, Any] = {"name": name, "arguments": arguments}
    if call_id:
        call["id"] = call_id
    return [call]


def lead(sub: Any, script: list[Any], tools: tuple[Any, ...] = (), **kwargs: Any) -> Any:
    helper = agent_tool(sub, name="helper", description="Helps.")
    return create_react_node(ScriptedLLM(script), [*tools, helper], name="lead", **kwargs)


async def test_the_callers_approval_does_not_approve_the_sub_agents_same_call() -> None:
    RAN.clear()
    # the sub-agent replays the id and arguments of the call the person approved for the lead
    sub = create_react_node(ScriptedLLM([calls("deploy", "call_1", target="prod"), "done"]),
                            [deploy], name="helper")
    runner = ReactiveRunner(lead(sub, [calls("deploy", "call_1", target="prod"),
                                       calls("helper", "call_2", input="again"), "ok"],
                                 tools=(deploy,)), start())
    first = await runner.run()
    assert [r.id for r in first.pending] == ["call_1"]
    runner.approve("call_1")
    second = await runner.run()
    # the lead's deploy ran; the sub-agent's must be asked for on its own, under its path
    assert RAN == ["prod"] and second.status is RunStatus.SUSPENDED
    assert [r.id for r in second.pending] == ["helper/call_2/call_1"]
    runner.reject("helper/call_2/call_1", "no")
    assert (await runner.run()).ok and RAN == ["prod"]


async def test_a_sub_agent_cannot_loosen_the_callers_guard() -> None:
    RAN.clear()
    anything = Constraints.model_validate({"guard": {"tool_policy": {"deploy": "allow"}}})
    sub_llm = ScriptedLLM([calls("deploy", target="prod"), "tried"])
    sub = create_react_node(sub_llm, [deploy], name="helper", constraints=anything)
    denied = Constraints.model_validate({"guard": {"tool_policy": {"deploy": "deny"}}})
    state = start()
    result = await ReactiveRunner(lead(sub, [calls("helper", input="x"), "ok"],
                                       constraints=denied), state).run()
    assert result.ok and RAN == []
    assert "deploy" not in [t["function"]["name"] for t in sub_llm.requests[0].tools]


async def test_a_sub_agent_without_a_person_to_ask_is_denied_not_allowed() -> None:
    RAN.clear()
    sub = create_react_node(ScriptedLLM([calls("deploy", target="prod"), "tried"]), [deploy],
                            name="helper")
    runner = ReactiveRunner(lead(sub, [calls("helper", input="x"), "ok"]), start(),
                            interactive=False)
    assert (await runner.run()).ok and RAN == []


async def test_a_sub_agents_tools_write_only_its_own_namespace() -> None:
    sub = create_react_node(ScriptedLLM([calls("scribble", note="HACKED"), "sub done"]),
                            [scribble], name="helper")
    state = start()
    assert (await ReactiveRunner(lead(sub, [calls("helper", input="x"), "lead done"]),
                                 state).run()).ok
    assert state.get("final_answer") == "lead done"
    # what it wrote stayed in the sub-agent's namespace: only its own answer could change
    assert [m.role for m in state.get("messages")] == ["user", "assistant", "tool", "assistant"]


async def test_call_ids_that_collide_once_escaped_never_share_a_record() -> None:
    def fresh() -> Any:
        def reply(messages: list[Any]) -> str:
            return f"answer to {messages[-1].content}"

        return create_react_node(ScriptedLLM([reply]), [], name="helper")

    llm_calls = [{"id": i, "name": "helper", "arguments": {"input": i}}
                 for i in ("a.b", "a_b", "a/b", "a%2Eb")]
    state = start()
    tool_ = agent_tool(fresh, name="helper", description="Helps.")
    agent = create_react_node(ScriptedLLM([llm_calls, "ok"]), [tool_], name="lead")
    assert (await ReactiveRunner(agent, state).run()).ok
    answers = [m.content for m in state.get("messages") if m.role == "tool"]
    assert answers == [f"answer to {i}" for i in ("a.b", "a_b", "a/b", "a%2Eb")]
    assert len(set(state.namespaces())) == 4


async def test_a_model_cannot_hand_off_to_an_agent_it_was_not_given() -> None:
    admin = create_react_node(ScriptedLLM(["admin answers"]), [], name="admin")
    billing = create_react_node(ScriptedLLM(["billing answers"]), [handoff(admin)],
                                name="billing")
    triage_llm = ScriptedLLM([calls("transfer_to_admin"), "triage answers"])
    triage = create_react_node(triage_llm, [handoff(billing)], name="triage")
    state = start()
    assert (await ReactiveRunner(triage, state).run()).ok
    # admin is in the team (billing may hand to it), but triage was not given that hand-off
    assert "unknown tool 'transfer_to_admin'" in (state.get("messages")[2].content or "")
    assert state.get("active_agent") == "triage" and state.get("final_answer") == \
        "triage answers"
