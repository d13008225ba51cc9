"""Red team, guardrails given in Python to the agent placed in the tree (not named in the
config) against its hand-off targets and its sub-agents.

Fixed here: ``create_react_node(..., input_guardrails=..., output_guardrails=...,
tool_output_guardrails=...)`` held only that agent's own turns and calls. Its model handed
the conversation to an agent without them (whose answer then went out unchecked, whose
tool results reached its model unchecked, and who took the next user message unchecked), or
called a sub-agent whose tools' results reached the sub-agent's model unchecked; the same
guardrails named in ``guard.guardrails`` held there. Now an agent's own guardrails hold every
agent of its team and every sub-agent it calls, as the configured ones do.
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager, Tripwire
from jianmu.errors import GuardrailTripped, InteractionError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, handoff
from jianmu.nodes.react import create_react_node
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
SECRET = "SECRET-7731"


@tool
def fetch(url: str) -> str:
    """Fetch a page.

    Args:
        url: the address.
    """
    return f"the key is {SECRET}"


def no_secret(ctx: Any, value: Any) -> Tripwire | None:
    return Tripwire("a secret") if SECRET in str(value) else None


def start(text: str = "go") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": text}]})


def tool_texts(llm: ScriptedLLM, turn: int) -> list[str]:
    return [m.content or "" for m in llm.requests[turn].messages if m.role == "tool"]


def triage_over(billing: Any, **guardrails: Any) -> Any:
    llm = ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}]])
    return create_react_node(llm, [handoff(billing)], name="triage", **guardrails)


async def test_a_hand_off_target_answers_under_the_first_agents_output_guardrails() -> None:
    billing = create_react_node(ScriptedLLM([f"here: {SECRET}"]), [], name="billing")
    state = start()
    result = await ReactiveRunner(triage_over(billing, output_guardrails=[no_secret]),
                                  state).run()
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, GuardrailTripped)
    assert SECRET not in str(state.get("final_answer"))


async def test_a_hand_off_targets_tool_results_pass_the_first_agents_guardrails() -> None:
    billing_llm = ScriptedLLM([[{"name": "fetch", "arguments": {"url": "u"}}], "done"])
    billing = create_react_node(billing_llm, [fetch], name="billing")
    result = await ReactiveRunner(
        triage_over(billing, tool_output_guardrails=[no_secret]), start()
    ).run()
    assert result.ok
    [_handed, fetched] = tool_texts(billing_llm, 1)
    assert SECRET not in fetched and "withheld" in fetched


async def test_the_next_user_message_passes_the_first_agents_input_guardrails() -> None:
    billing = create_react_node(ScriptedLLM(["first", "second"]), [], name="billing")
    runner = ReactiveRunner(triage_over(billing, input_guardrails=[no_secret]), start())
    assert (await runner.run()).ok
    runner.send(f"remember {SECRET}")
    result = await runner.run()
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, GuardrailTripped)


async def test_a_sub_agents_tool_results_pass_the_callers_own_guardrails() -> None:
    sub_llm = ScriptedLLM([[{"name": "fetch", "arguments": {"url": "u"}}], "nothing"])
    sub = create_react_node(sub_llm, [fetch], name="researcher")
    lead_llm = ScriptedLLM([[{"name": "researcher", "arguments": {"input": "x"}}], "ok"])
    lead = create_react_node(
        lead_llm, [agent_tool(sub, name="researcher", description="Researches.")],
        name="lead", tool_output_guardrails=[no_secret],
    )
    assert (await ReactiveRunner(lead, start()).run()).ok
    [seen] = tool_texts(sub_llm, 1)
    assert SECRET not in seen and "withheld" in seen


async def test_a_sub_agent_answers_under_the_callers_own_output_guardrails() -> None:
    sub_llm = ScriptedLLM([f"found {SECRET}"])
    sub = create_react_node(sub_llm, [], name="researcher")
    lead_llm = ScriptedLLM([[{"name": "researcher", "arguments": {"input": "x"}}], "ok"])
    lead = create_react_node(
        lead_llm, [agent_tool(sub, name="researcher", description="Researches.")],
        name="lead", output_guardrails=[no_secret],
    )
    assert (await ReactiveRunner(lead, start()).run()).ok
    [seen] = tool_texts(lead_llm, 1)
    assert SECRET not in seen and "guardrail" in seen


# -- a call id that names another call's question -----------------------------------------------
PAID: list[int] = []


@tool(read_only=False, confirm=True)
def pay(amount: int) -> str:
    """Pay (a person approves first).

    Args:
        amount: how much.
    """
    PAID.append(amount)
    return "paid"


@pytest.mark.parametrize("order", [("ask", "pay"), ("pay", "ask")])
async def test_a_call_id_cannot_name_another_calls_question(order: tuple[str, str]) -> None:
    """Fixed here: a question's request id is ``ask:<call id>``; a model that gave its
    ``pay`` call the id ``ask:x`` beside an ``ask_user`` call ``x`` made both ask under one
    id: the person's approval of the payment was read as the question's decision, which then
    never asked (the run hung until its timeout). Now ``:`` in a model's call id is escaped,
    as ``/`` is, so no call id reads as a request of another kind."""
    from jianmu.tools import ToolSet

    PAID.clear()
    calls = {"ask": {"id": "x", "name": "ask_user", "arguments": {"question": "Pay 5?"}},
             "pay": {"id": "ask:x", "name": "pay", "arguments": {"amount": 5}}}
    llm = ScriptedLLM([[calls[k] for k in order], "done"])
    state = start()
    runner = ReactiveRunner(create_react_node(llm, [pay, *ToolSet.resolve(["ask_user"])]), state)
    result = await runner.run(timeout=30)
    kinds = []
    while result.status is RunStatus.SUSPENDED:
        [request] = result.pending
        kinds.append(request.kind)
        if request.kind == "question":
            runner.answer(request.id, "yes")
        else:
            runner.approve(request.id)
        result = await runner.run(timeout=30)
    assert result.ok, result.status
    assert sorted(kinds) == ["question", "tool_call"] and PAID == [5]
    assert "yes" in [m.content for m in state.get("messages") if m.role == "tool"]


# -- a deny rule on a hand-off ------------------------------------------------------------------
@pytest.mark.parametrize("rule", ["transfer_to_billing", "TRANSFER_TO_BILLING",
                                  " transfer_to_billing "])
@pytest.mark.parametrize("spelling", ["transfer_to_billing", "TRANSFER_TO_BILLING"])
async def test_a_deny_rule_holds_for_a_hand_off(rule: str, spelling: str) -> None:
    """Fixed here: hand-off calls never reach the executor, so the guard never saw them: with
    ``tool_policy: {transfer_to_billing: deny}`` the hand-off was offered and made. Now a
    hand-off whose tool the policy denies is not offered, and a call to it is no hand-off (the
    executor refuses it as a tool it does not have)."""
    billing_llm = ScriptedLLM(["billing answered"])
    billing = create_react_node(billing_llm, [], name="billing")
    denied = Constraints.model_validate({"guard": {"tool_policy": {rule: "deny"}}})
    triage_llm = ScriptedLLM([[{"name": spelling, "arguments": {}}], "triage answered"])
    triage = create_react_node(triage_llm, [handoff(billing)], name="triage",
                               constraints=denied)
    state = start()
    assert (await ReactiveRunner(triage, state).run()).ok
    assert state.get("active_agent") == "triage" and billing_llm.requests == []
    assert state.get("final_answer") == "triage answered"
    assert "transfer_to_billing" not in [t["function"]["name"]
                                         for t in triage_llm.requests[0].tools or []]


@pytest.mark.parametrize("guard", [
    {"tool_policy": {"transfer_to_billing": "confirm"}},
    {"default_policy": "deny"},
])
async def test_a_hand_off_nobody_could_approve_is_not_made(guard: dict[str, Any]) -> None:
    """A confirm rule cannot be asked for a hand-off (it never reaches the executor): the
    safe choice is no hand-off, as with a default that denies what no rule allows."""
    billing_llm = ScriptedLLM(["billing answered"])
    billing = create_react_node(billing_llm, [], name="billing")
    triage_llm = ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}], "triage"])
    triage = create_react_node(triage_llm, [handoff(billing)], name="triage",
                               constraints=Constraints.model_validate({"guard": guard}))
    state = start()
    assert (await ReactiveRunner(triage, state).run()).ok
    assert state.get("active_agent") == "triage" and billing_llm.requests == []


async def test_a_hand_off_allowed_by_name_under_a_deny_default_is_made() -> None:
    billing = create_react_node(ScriptedLLM(["billing answered"]), [], name="billing")
    guard = {"default_policy": "deny", "tool_policy": {"transfer_to_billing": "allow"}}
    triage = create_react_node(ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}]]),
                               [handoff(billing)], name="triage",
                               constraints=Constraints.model_validate({"guard": guard}))
    state = start()
    assert (await ReactiveRunner(triage, state).run()).ok
    assert state.get("final_answer") == "billing answered"


# -- one call id in two parallel branches -------------------------------------------------------
def two_branches() -> tuple[ReactiveRunner, StateManager]:
    import py_trees

    from jianmu import ToolExecutor

    left, right = ToolExecutor("left", tools=[pay]), ToolExecutor("right", tools=[pay])
    left.namespace, right.namespace = "left", "right"
    root = py_trees.composites.Parallel(
        "both", policy=py_trees.common.ParallelPolicy.SuccessOnAll(), children=[left, right]
    )
    state = StateManager(AgentState, {})
    return ReactiveRunner(root, state), state


async def test_one_approval_never_runs_the_same_call_of_two_branches() -> None:
    """Fixed here: two branches whose models gave their calls one id (``c1``, the same
    payment) asked under that one id; the person saw one request, approved it, and both
    branches paid. Now each branch's call is asked under an id of its own, qualified by its
    namespace (``left/c1``, ``right/c1``): one approval runs one branch's call, and the bare
    ``c1``, which names both, decides nothing."""
    PAID.clear()
    runner, state = two_branches()
    call = {"id": "c1", "name": "pay", "arguments": {"amount": 5}}
    state.scope("left").update({"actions": [call]})
    state.scope("right").update({"actions": [call]})
    result = await runner.run(timeout=30)
    assert sorted(r.id for r in result.pending) == ["left/c1", "right/c1"]
    with pytest.raises(InteractionError, match="names 2 requests"):
        runner.approve("c1")
    runner.approve("left/c1")
    assert (await runner.run(timeout=30)).status is RunStatus.SUSPENDED  # right/c1 still waits
    runner.reject("right/c1")
    assert (await runner.run(timeout=30)).ok
    assert PAID == [5]


# -- a streamed answer and the guardrails -------------------------------------------------------
async def streamed_text(agent: Any, text: str = "go") -> tuple[str, Any]:
    """The text a reader of the run's events could see, and the run's result."""
    pieces, result = [], None
    async for event in ReactiveRunner(agent, start(text)).stream():
        if event.name != "run.finished":
            pieces.append(repr(event.fields))
        if event.name == "run.finished":
            result = event.fields["result"]
    return "".join(pieces), result


@pytest.mark.parametrize("stream", [None, True])
async def test_a_streamed_answer_is_not_read_before_the_output_guardrails(
    stream: bool | None,
) -> None:
    """Fixed here: a streamed run emitted the answer's text as ``llm.call.delta`` events while
    the model wrote it, so a reader had the answer the output guardrail then refused. Now a
    turn is not streamed while an output guardrail holds it (its answer comes out checked)."""
    agent = create_react_node(ScriptedLLM([f"the key is {SECRET}"]), [],
                              output_guardrails=[no_secret], stream=stream)
    text, result = await streamed_text(agent)
    assert result.status is RunStatus.FAILURE and SECRET not in text


async def test_a_streamed_reply_is_not_read_before_the_input_guardrails() -> None:
    """The reply to a message is asked while the input guardrails check it: its deltas wait
    for them, or a reader would have the answer to a message they refuse."""
    import asyncio

    answered = asyncio.Event()

    class Model(ScriptedLLM):
        async def send(self, request: Any) -> Any:
            reply = await super().send(request)
            answered.set()  # the guardrail below decides only once the model has answered
            return reply

    async def after_the_reply(ctx: Any, value: Any) -> Tripwire | None:
        await answered.wait()
        return no_secret(ctx, value)

    agent = create_react_node(Model(["here it is: hunter2"]), [],
                              input_guardrails=[after_the_reply], stream=True)
    text, result = await streamed_text(agent, f"say {SECRET}")
    assert result.status is RunStatus.FAILURE and "hunter2" not in text


async def test_a_run_without_guardrails_still_streams() -> None:
    text, result = await streamed_text(create_react_node(ScriptedLLM(["a b c"]), []))
    assert result.ok and "{'text': 'c'}" in text  # the answer's deltas
