"""Agents with agents, through `ReactiveRunner`: hand-offs (a triage agent passes the conversation
to a specialist) and `agent_tool` (a sub-agent as a tool, under the caller's guard, budget,
approvals and checkpoints)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from jianmu import Constraints, ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.errors import HandoffError, ToolValidationError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node, handoff
from jianmu.tools import ToolSet, tool
from tests.support import agents_app

pytestmark = pytest.mark.anyio


class Refund(BaseModel):
    order: str
    amount: float


@tool
def lookup_order(order: str) -> str:
    """Look an order up.

    Args:
        order: the order's id.
    """
    return f"{order}: 30 EUR, paid"


def start_chat(text: str = "I want my money back for order A1.") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": text}]})


def calls(name: str, **arguments: Any) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": arguments}]


def team(billing_script: list[Any], triage_script: list[Any]) -> tuple[Any, ScriptedLLM,
                                                                        ScriptedLLM]:
    billing_llm = ScriptedLLM(billing_script)
    billing = create_react_node(
        billing_llm, [lookup_order, handoff("triage", description="Anything but billing.")],
        name="billing", system_prompt="You handle refunds.", output_type=Refund,
    )
    triage_llm = ScriptedLLM(triage_script)
    triage = create_react_node(
        triage_llm, [handoff(billing, description="Refunds and invoices.")],
        name="triage", system_prompt="You route customers.",
    )
    return triage, triage_llm, billing_llm


BILLING = [calls("lookup_order", order="A1"), calls("final_result", order="A1", amount=30)]
TRIAGE = [calls("transfer_to_billing")]


async def test_triage_hands_the_conversation_to_billing() -> None:
    triage, triage_llm, billing_llm = team(BILLING, TRIAGE)
    state = start_chat()
    events: list[Any] = []
    runner = ReactiveRunner(triage, state)
    runner.ctx.events.subscribe("agent.*", events.append)
    result = await runner.run()
    assert result.ok and result.output == Refund(order="A1", amount=30)
    assert state.get("active_agent") == "billing"
    offered = triage_llm.requests[0].tools
    assert [t["function"]["name"] for t in offered] == ["transfer_to_billing"]
    assert "Refunds and invoices." in offered[0]["function"]["description"]
    # billing answers with its own prompt, tools and output type, on the same conversation
    first = billing_llm.requests[0]
    assert first.messages[0].content == "You handle refunds."
    assert first.messages[1].content == "I want my money back for order A1."
    assert sorted(first.tool_names) == ["final_result", "lookup_order", "transfer_to_triage"]
    # the hand-off is one message in the history, and the transfer call has its result
    history = state.get("messages")
    assert [(m.role, m.content) for m in history[1:3]] == [
        ("assistant", None), ("tool", "Transferred to billing.")]
    assert history[2].tool_call_id == history[1].tool_calls[0].id
    assert [(e.fields["source"], e.fields["target"]) for e in events
            if e.name == "agent.handoff"] == [("triage", "billing")]


async def test_the_next_user_turn_continues_with_the_agent_that_answered_last() -> None:
    billing_more = [*BILLING, calls("final_result", order="A2", amount=5)]
    triage, triage_llm, billing_llm = team(billing_more, TRIAGE)
    state = start_chat()
    runner = ReactiveRunner(triage, state)
    assert (await runner.run()).ok
    runner.send("And order A2?")
    second = await runner.run()
    assert second.ok and second.output == Refund(order="A2", amount=5)
    assert len(triage_llm.requests) == 1  # triage was not asked again
    assert billing_llm.requests[-1].messages[-1].content == "And order A2?"


def test_the_last_agent_is_kept_across_a_restore(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    triage, _, _ = team(BILLING, TRIAGE)
    runner = ReactiveRunner(triage, start_chat(), checkpointer=SQLiteCheckpointer(db), run_id="h1")
    assert runner.run_sync(timeout=30).ok
    triage2, triage_llm, billing_llm = team([calls("final_result", order="A9", amount=1)], [])
    restored = ReactiveRunner.restore(triage2, SQLiteCheckpointer(db), "h1",
                                      state_manager=StateManager(AgentState))
    assert restored.state.get("active_agent") == "billing"
    assert restored.state.get("final_output") == Refund(order="A1", amount=30)  # its type
    restored.send("One more: A9.")
    result = restored.run_sync(timeout=30)
    assert result.ok and result.output == Refund(order="A9", amount=1)
    assert triage_llm.requests == [] and len(billing_llm.requests) == 1


async def test_a_specialist_hands_back_and_triage_answers() -> None:
    triage, _triage_llm, _billing_llm = team(
        [calls("transfer_to_triage")], [*TRIAGE, "Happy to help with anything else."])
    state = start_chat("Billing? No, I have a question about opening hours.")
    result = await ReactiveRunner(triage, state).run()
    assert result.ok and state.get("final_answer") == "Happy to help with anything else."
    assert state.get("active_agent") == "triage" and result.output is None


async def test_a_hand_off_cycle_is_bounded_by_the_iteration_cap() -> None:
    loop_billing = [calls("transfer_to_triage")] * 10
    loop_triage = [calls("transfer_to_billing")] * 10
    billing = create_react_node(ScriptedLLM(loop_billing), [handoff("triage")], name="billing")
    triage_llm = ScriptedLLM(loop_triage)
    triage = create_react_node(triage_llm, [handoff(billing)], name="triage", max_iterations=5)
    result = await ReactiveRunner(triage, start_chat()).run()
    assert result.status is RunStatus.FAILURE and "max_iterations=5" in (result.error or "")
    billing_llm = billing.llm_node.llm  # type: ignore[union-attr]
    assert len(triage_llm.requests) + len(billing_llm.requests) == 5  # type: ignore[attr-defined]


async def test_other_calls_in_the_handing_turn_are_not_run() -> None:
    triage, _, _ = team(BILLING, [[{"name": "transfer_to_billing", "arguments": {}},
                                   {"name": "transfer_to_billing", "arguments": {}}]])
    state = start_chat()
    assert (await ReactiveRunner(triage, state).run()).ok
    replies = [m for m in state.get("messages")[:4] if m.role == "tool"]
    assert [m.content for m in replies] == [
        "Transferred to billing.", "Not run: the conversation was handed to billing."]


async def test_a_hand_off_the_model_invents_is_an_unknown_tool() -> None:
    triage, _, _ = team(BILLING, [calls("transfer_to_sales"), *TRIAGE])
    state = start_chat()
    assert (await ReactiveRunner(triage, state).run()).ok
    said = state.get("messages")[2].content or ""
    # pointed to the hand-off it was offered, though no executor runs that tool
    assert said == ("Error: unknown tool 'transfer_to_sales'; did you mean "
                    "'transfer_to_billing'? available tools: transfer_to_billing")
    assert state.get("active_agent") == "billing"  # the next turn's real hand-off went on


async def test_an_unknown_tool_is_told_every_tool_the_model_was_offered() -> None:
    # the answer tool and the hand-offs too, which the model node runs, not the executor
    triage_llm = ScriptedLLM([calls("final_answer", order="A1", amount=30),
                              calls("final_result", order="A1", amount=30)])
    billing = create_react_node(ScriptedLLM(["x"]), [], name="billing")
    triage = create_react_node(triage_llm, [lookup_order, handoff(billing)], name="triage",
                               output_type=Refund)
    state = start_chat()
    result = await ReactiveRunner(triage, state).run()
    assert result.ok and result.output == Refund(order="A1", amount=30)
    offered = [t["function"]["name"] for t in triage_llm.requests[0].tools]
    assert offered == ["lookup_order", "final_result", "transfer_to_billing"]
    said = next(m.content for m in state.get("messages") if m.role == "tool")
    assert said == f"Error: unknown tool 'final_answer'; available tools: {', '.join(offered)}"


def test_a_hand_off_to_an_agent_outside_the_team_is_refused() -> None:
    alone = create_react_node(ScriptedLLM(["x"]), [handoff("nobody")], name="solo")
    runner = ReactiveRunner(alone, start_chat())
    with pytest.raises(HandoffError, match=r"'solo' hands off to 'nobody'.*\(solo\)"):
        runner.run_sync(timeout=30)
    assert runner.state.get("messages")[0].role == "user"  # nothing lost


def test_bad_hand_offs_are_refused_when_built() -> None:
    with pytest.raises(TypeError, match="takes an agent built by create_react_node"):
        handoff(object())
    one = create_react_node(ScriptedLLM([]), [], name="twin")
    two = create_react_node(ScriptedLLM([]), [], name="twin")
    with pytest.raises(HandoffError, match="two agents of one team are named 'twin'"):
        create_react_node(ScriptedLLM([]), [handoff(one), handoff(two, name="other")],
                          name="lead")


REPO = Path(__file__).resolve().parents[2]


def start(text: str = "Research tides.") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": text}]})


@tool
def search(query: str) -> str:
    """Search.

    Args:
        query: what to look for.
    """
    return f"found {query}"


def lead_with(sub: Any, lead_script: list[Any], **kwargs: Any) -> tuple[Any, ScriptedLLM]:
    llm = ScriptedLLM(lead_script)
    tool_ = agent_tool(sub, name="researcher", description="Researches.", **kwargs)
    return create_react_node(llm, [tool_], name="lead"), llm


async def test_the_sub_agents_answer_is_the_observation_and_its_usage_the_runs() -> None:
    sub_llm = ScriptedLLM([calls("search", query="tides"), "Tides: twice a day."])
    sub = create_react_node(sub_llm, [search], name="researcher")
    lead, _lead_llm = lead_with(sub, [calls("researcher", input="tides?"), "Twice a day."])
    state = start()
    events: list[Any] = []
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner = ReactiveRunner(lead, state, tracer_provider=provider)
    runner.ctx.events.subscribe("*", events.append)
    result = await runner.run()
    assert result.ok and state.get("final_answer") == "Twice a day."
    observation = state.get("messages")[2]
    assert observation.role == "tool" and observation.content == "Tides: twice a day."
    # the sub-agent started from the call's input, in its own namespace
    assert [m.content for m in sub_llm.requests[0].messages] == ["tides?"]
    assert state.namespaces() == ["researcher/call_1"]
    assert state.scope("researcher/call_1").get("final_answer") == "Tides: twice a day."
    # its tokens are the run's: the root adds both models' usage
    sub_usage = sum(e.fields["input_tokens"] + e.fields["output_tokens"] for e in events
                    if e.name == "llm.call.completed" and "researcher[" in (e.node or ""))
    lead_usage = sum(e.fields["input_tokens"] + e.fields["output_tokens"] for e in events
                     if e.name == "llm.call.completed" and "researcher[" not in (e.node or ""))
    assert sub_usage > 0 and state.get("usage").total_tokens == sub_usage + lead_usage
    # its events nest under the caller's executor; its run's end is not the run's end
    nested = [e for e in events if e.name == "tool.call.started" and e.fields["tool"] == "search"]
    assert nested[0].node == ("lead/lead.round/lead.tools/researcher[call_1]/researcher/"
                              "researcher.round/researcher.tools")
    assert [e.name for e in events if e.name.endswith(".finished")] == [
        "agent.finished", "run.finished"]
    # and its spans under the call's execute_tool span
    spans = {s.name: s for s in exporter.get_finished_spans()}
    invoke = spans["invoke_agent researcher"]
    assert invoke.parent is not None
    assert invoke.parent.span_id == spans["execute_tool researcher"].context.span_id
    assert spans["execute_tool search"].parent is not None


class Finding(BaseModel):
    topic: str
    sources: int


class Question(BaseModel):
    topic: str
    state: str  # a US state: a model's argument, never the runtime's


async def test_a_typed_sub_agent_answers_with_its_object_and_takes_a_typed_input() -> None:
    sub_llm = ScriptedLLM([calls("final_result", topic="tides", sources=3)])
    sub = create_react_node(sub_llm, [], name="researcher", output_type=Finding)
    lead, lead_llm = lead_with(
        sub, [calls("researcher", topic="tides", state="ME"), "Three sources."],
        input_type=Question,
    )
    state = start()
    result = await ReactiveRunner(lead, state).run()
    assert result.ok
    schema = lead_llm.requests[0].tools[0]["function"]["parameters"]
    assert sorted(schema["properties"]) == ["state", "topic"]
    assert json.loads(sub_llm.requests[0].messages[0].content or "") == {
        "topic": "tides", "state": "ME"}
    assert json.loads(state.get("messages")[2].content or "") == {"topic": "tides", "sources": 3}
    assert state.scope("researcher/call_1").get("final_output") == Finding(topic="tides",
                                                                           sources=3)


async def test_bad_input_is_an_observation_with_its_path() -> None:
    sub = create_react_node(ScriptedLLM([]), [], name="researcher")
    lead, _ = lead_with(sub, [calls("researcher", topic=5), "I see."], input_type=Question)
    state = start()
    assert (await ReactiveRunner(lead, state).run()).ok
    said = state.get("messages")[2].content or ""
    assert "$.topic" in said and "$.state" in said and state.namespaces() == []


async def test_a_sub_agent_that_fails_is_an_observation_and_the_caller_goes_on() -> None:
    sub = create_react_node(ScriptedLLM([]), [], name="researcher")  # its model has no reply
    lead, _lead_llm = lead_with(sub, [calls("researcher", input="x"), "It failed; I answer."])
    state = start()
    result = await ReactiveRunner(lead, state).run()
    assert result.ok and state.get("final_answer") == "It failed; I answer."
    said = state.get("messages")[2].content or ""
    assert said.startswith("Error: agent 'researcher' failed:")
    assert "ran out of responses" in said


async def test_an_approval_inside_the_sub_agent_suspends_the_whole_run(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    lead = agents_app.build(log, agents_app.RESEARCHER, agents_app.LEAD)
    state = start()
    runner = ReactiveRunner(lead, state)
    first = await runner.run()
    assert first.status is RunStatus.SUSPENDED
    (request,) = first.pending
    assert request.id == "researcher/call_1/call_2"
    assert request.summary == 'researcher > write_note({"text": "tides: twice a day"})'
    assert request.payload["agent_path"] == ["researcher"] and request.payload["tool"] == \
        "write_note"
    assert log.read_text().splitlines() == ["search tides"]
    runner.approve(request.id)
    second = await runner.run()
    assert second.ok and state.get("final_answer") == agents_app.LEAD[1]
    assert log.read_text().splitlines() == ["search tides", "write_note tides: twice a day"]
    assert state.get("messages")[2].content == "Tides come twice a day."


async def test_a_rejection_inside_the_sub_agent_reaches_its_model(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    researcher = [agents_app.RESEARCHER[0], agents_app.RESEARCHER[1], "No note then."]
    lead = agents_app.build(log, researcher, [agents_app.LEAD[0], "Fine."])
    runner = ReactiveRunner(lead, start())
    first = await runner.run()
    runner.reject(first.pending[0].id, "not now")
    assert (await runner.run()).ok
    assert log.read_text().splitlines() == ["search tides"]
    assert runner.state.get("messages")[2].content == "No note then."


def test_a_run_restored_in_another_process_resumes_the_sub_agent(tmp_path: Path) -> None:
    log, db = tmp_path / "calls.log", tmp_path / "runs.sqlite"
    lead = agents_app.build(log, agents_app.RESEARCHER, agents_app.LEAD)
    runner = ReactiveRunner(lead, start(), checkpointer=SQLiteCheckpointer(db), run_id="sub1")
    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    script = textwrap.dedent(f"""
        from pathlib import Path
        from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
        from jianmu.nodes import AgentState
        from tests.support import agents_app

        # the models say only what is left of their scripts: what they said is in the state
        lead = agents_app.build(Path({str(log)!r}), agents_app.RESEARCHER[2:],
                                agents_app.LEAD[1:])
        runner = ReactiveRunner.restore(lead, SQLiteCheckpointer({str(db)!r}), "sub1",
                                        state_manager=StateManager(AgentState))
        print([r.id for r in runner.pending])
        runner.approve("researcher/call_1/call_2")
        result = runner.run_sync(timeout=30)
        print(result.status.value, runner.state.get("final_answer"))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines == ["['researcher/call_1/call_2']", f"success {agents_app.LEAD[1]}"]
    # the search before the suspension did not run again; the approved write ran once
    assert log.read_text().splitlines() == ["search tides", "write_note tides: twice a day"]


def test_a_sub_agent_suspended_under_the_old_path_part_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call id of digits alone (``1``) hangs the sub-agent's tree at ``researcher[#1]``; a
    run suspended by a version that wrote ``researcher[1]`` (its root's name in the record)
    still goes on from where it stood, running nothing twice."""
    from jianmu.nodes import agents

    log, db = tmp_path / "calls.log", tmp_path / "runs.sqlite"
    numbered = [[{"id": "1", **agents_app.LEAD[0][0]}], agents_app.LEAD[1]]
    monkeypatch.setattr(agents, "agent_part", lambda name, label: f"{name}[{label}]")
    runner = ReactiveRunner(agents_app.build(log, agents_app.RESEARCHER, numbered), start(),
                            checkpointer=SQLiteCheckpointer(db), run_id="old")
    first = runner.run_sync(timeout=30)
    assert [r.id for r in first.pending] == ["researcher/1/call_2"]
    assert first.pending[0].node.split("/")[3] == "researcher[1]"
    monkeypatch.undo()
    restored = ReactiveRunner.restore(
        agents_app.build(log, agents_app.RESEARCHER[2:], numbered[1:]), SQLiteCheckpointer(db),
        "old", state_manager=StateManager(AgentState))
    restored.approve("researcher/1/call_2")
    assert restored.run_sync(timeout=30).ok
    assert log.read_text().splitlines() == ["search tides", "write_note tides: twice a day"]


async def test_the_callers_constraints_are_the_outer_layer() -> None:
    @tool(read_only=False)
    def wipe(target: str) -> str:
        """Wipe.

        Args:
            target: what.
        """
        return "wiped"

    loose = Constraints.model_validate({"guard": {"max_tool_calls": 50}})
    sub_llm = ScriptedLLM([calls("wipe", target="all"), calls("search", query="a"),
                           calls("search", query="b"), calls("search", query="c"), "done"])
    sub = create_react_node(sub_llm, [search, wipe], name="researcher", constraints=loose)
    llm = ScriptedLLM([calls("researcher", input="go"), "ok"])
    caller = Constraints.model_validate(
        {"guard": {"max_tool_calls": 2, "tool_policy": {"wipe": "deny"}}})
    lead = create_react_node(
        llm, [agent_tool(sub, name="researcher", description="Researches.")], name="lead",
        constraints=caller,
    )
    state = start()
    assert (await ReactiveRunner(lead, state).run()).ok
    # denied for the caller: not offered to the sub-agent, and refused when called anyway
    assert "wipe" not in [t["function"]["name"] for t in sub_llm.requests[0].tools]
    sub_messages = [m.content or "" for m in sub_llm.requests[-1].messages if m.role == "tool"]
    assert "unknown tool 'wipe'" in sub_messages[0] or "denied" in sub_messages[0]
    # the run's max_tool_calls holds for the sub-agent's calls, whatever the sub-agent's own
    # (looser) layer says: the lead's call to it is one of the two, so the second search is over
    assert sub_messages[1] == "found a"
    assert all("max_tool_calls" in m for m in sub_messages[2:4])
    assert state.get("guard_ledger").calls_made == 2


async def test_the_callers_budget_stops_the_sub_agent() -> None:
    sub_llm = ScriptedLLM([calls("search", query=str(i)) for i in range(20)])
    sub = create_react_node(sub_llm, [search], name="researcher", max_iterations=50)
    llm = ScriptedLLM([calls("researcher", input="go"), "out of budget"])
    lead = create_react_node(
        llm, [agent_tool(sub, name="researcher", description="Researches.")], name="lead",
        constraints=Constraints.model_validate({"guard": {"budget": {"total_tokens": 600}}}),
        max_iterations=50,
    )
    state = start()
    result = await ReactiveRunner(lead, state).run()
    said = state.get("messages")[2].content or ""
    assert said.startswith("Error: agent 'researcher' failed:") and "token budget" in said
    assert len(sub_llm.requests) < 20
    assert result.status is RunStatus.FAILURE or state.get("final_answer") == "out of budget"


async def test_a_skill_node_is_a_sub_agent_too(tmp_path: Path) -> None:
    from jianmu.config import parse_config
    from jianmu.skills import SkillCatalog, SkillNode

    folder = tmp_path / "skills" / "research"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: research\ndescription: Research a topic.\ntools: [search]\n---\n"
        "Search before you answer.\n")
    sub_llm = ScriptedLLM([calls("search", query="tides"), "Twice a day (skill)."])
    skill = SkillNode("Research", ["research"], sub_llm, tools=[search],
                      catalog=SkillCatalog([tmp_path / "skills"], custom_tools=[search]))
    lead, _ = lead_with(skill, [calls("researcher", input="tides?"), "Done."])
    state = start()
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    assert (await ReactiveRunner(lead, state, config=config).run()).ok
    assert state.get("messages")[2].content == "Twice a day (skill)."
    assert sub_llm.requests[0].messages[-1].content == "tides?"  # the skill read its input
    assert state.get("final_answer") == "Done."  # the lead's, not overwritten by the skill


async def test_one_skill_tree_serves_call_after_call_each_in_its_namespace(
    tmp_path: Path,
) -> None:
    """The skill compiles once; each call's run moves it into the call's namespace."""
    from jianmu import StateView
    from jianmu.config import parse_config
    from jianmu.skills import SkillCatalog, SkillNode
    from jianmu.tools import Injected

    where: list[str | None] = []

    @tool
    def look(query: str, state: Injected[StateView]) -> str:
        """Look something up.

        Args:
            query: what to look for.
        """
        where.append(state.namespace)
        return f"found {query}"

    folder = tmp_path / "skills" / "research"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: research\ndescription: Research a topic.\ntools: [look]\n---\nLook.\n")

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "user":
            return calls("look", query=messages[-1].content)
        return "saw " + ", ".join(m.content for m in messages if m.role == "user")

    skill = SkillNode("Research", ["research"], ScriptedLLM([reply] * 4), tools=[look],
                      catalog=SkillCatalog([tmp_path / "skills"], custom_tools=[look]))
    lead, _ = lead_with(skill, [calls("researcher", input="A"), calls("researcher", input="B"),
                                "Done."])
    state = start()
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    assert (await ReactiveRunner(lead, state, config=config).run()).ok
    assert [m.content for m in state.get("messages") if m.role == "tool"] == ["saw A", "saw B"]
    assert where == [f"researcher/call_{n}.skill_runtime.Research_0_0" for n in (1, 2)]


def test_a_skill_trees_second_call_waiting_for_a_person_goes_on_after_a_restore(
    tmp_path: Path,
) -> None:
    from jianmu.config import parse_config
    from jianmu.skills import SkillCatalog, SkillNode

    ran: list[str] = []

    @tool(read_only=False, confirm=True)
    def look(query: str) -> str:
        """Look something up (a person approves first).

        Args:
            query: what to look for.
        """
        ran.append(query)
        return f"found {query}"

    folder = tmp_path / "skills" / "research"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: research\ndescription: Research a topic.\ntools: [look]\n---\nLook.\n")

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "user":
            return calls("look", query=messages[-1].content)
        return "saw " + ", ".join(m.content for m in messages if m.role in ("user", "tool"))

    def lead(script: list[Any]) -> Any:
        skill = SkillNode("Research", ["research"], ScriptedLLM([reply] * 4), tools=[look],
                          catalog=SkillCatalog([tmp_path / "skills"], custom_tools=[look]))
        return lead_with(skill, script)[0]

    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    db = tmp_path / "runs.sqlite"
    runner = ReactiveRunner(
        lead([calls("researcher", input="A"), calls("researcher", input="B")]), start(),
        config=config, checkpointer=SQLiteCheckpointer(db), run_id="s1")
    first = runner.run_sync(timeout=30)
    runner.approve(first.pending[0].id)
    second = runner.run_sync(timeout=30)
    assert [r.id for r in second.pending] == [
        "researcher/call_2/skill_runtime.Research_0_0/call_2"]
    restored = ReactiveRunner.restore(lead(["Done."]), SQLiteCheckpointer(db), "s1",
                                      state_manager=StateManager(AgentState), config=config)
    restored.approve(second.pending[0].id)
    assert restored.run_sync(timeout=30).ok and ran == ["A", "B"]
    assert [m.content for m in restored.state.get("messages") if m.role == "tool"] == [
        "saw A, found A", "saw B, found B"]


async def test_a_skill_agent_that_fails_leaves_its_debug_snapshot(tmp_path: Path) -> None:
    """Its run id and namespace name the call with '/': the snapshot's folder was not found."""
    from jianmu.config import parse_config
    from jianmu.skills import SkillCatalog, SkillNode

    folder = tmp_path / "skills" / "research"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: research\ndescription: Research a topic.\ntools: [search]\n---\n"
        "Search.\n")

    def broken(_messages: list[Any]) -> Any:
        raise RuntimeError("the model is down")

    skill = SkillNode("Research", ["research"], ScriptedLLM([broken]), tools=[search],
                      catalog=SkillCatalog([tmp_path / "skills"], custom_tools=[search]))
    lead, _ = lead_with(skill, [calls("researcher", input="tides?"), "Done."])
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    runner = ReactiveRunner(lead, start(), config=config, run_id="r1")
    written: list[Any] = []
    runner.ctx.events.subscribe("skill.debug_snapshot*", written.append)
    assert (await runner.run()).ok
    assert [e.name for e in written] == ["skill.debug_snapshot"]
    snapshot = json.loads(Path(written[0].fields["path"]).read_text())
    assert snapshot["namespace"] == "researcher/call_1.skill_runtime.Research_0_0"
    assert snapshot["state"]["messages"][-1]["content"] == "tides?"


async def test_a_factory_serves_parallel_calls_each_with_its_own_tree() -> None:
    started = asyncio.Event()
    seen: list[str] = []

    @tool
    async def slow(query: str) -> str:
        """Wait for the other call.

        Args:
            query: the topic.
        """
        seen.append(query)
        if len(seen) == 2:
            started.set()
        await asyncio.wait_for(started.wait(), 20)  # both calls are in flight at once
        return f"slow {query}"

    def researcher() -> Any:
        def reply(messages: list[Any]) -> Any:
            topic = messages[-1].content
            return calls("slow", query=topic) if messages[-1].role == "user" else f"{topic}!"

        return create_react_node(ScriptedLLM([reply, reply]), [slow], name="researcher")

    tool_ = agent_tool(researcher, name="researcher", description="Researches.")
    assert tool_.parallel_safe is True
    llm = ScriptedLLM([[{"name": "researcher", "arguments": {"input": "a"}},
                        {"name": "researcher", "arguments": {"input": "b"}}], "both"])
    state = start()
    assert (await ReactiveRunner(create_react_node(llm, [tool_]), state).run()).ok
    assert sorted(seen) == ["a", "b"]
    assert [m.content for m in state.get("messages") if m.role == "tool"] == [
        "slow a!", "slow b!"]
    assert sorted(state.namespaces()) == ["researcher/call_1", "researcher/call_2"]


async def test_a_function_that_hands_back_one_tree_fails_the_parallel_call() -> None:
    """Two calls at once bound one tree to two runs: one answered '' without a word."""
    gate = asyncio.Event()

    @tool
    async def wait(query: str) -> str:
        """Wait until the other call was refused.

        Args:
            query: the topic.
        """
        await asyncio.wait_for(gate.wait(), 20)
        return f"waited {query}"

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "user":
            return calls("wait", query=messages[-1].content)
        return f"{messages[-1].content}!"

    shared = create_react_node(ScriptedLLM([reply, reply]), [wait], name="researcher")
    tool_ = agent_tool(lambda: shared, name="researcher", description="Researches.")

    def lead_reply(messages: list[Any]) -> Any:
        return [{"name": "researcher", "arguments": {"input": topic}} for topic in "ab"]

    state = start()
    runner = ReactiveRunner(create_react_node(ScriptedLLM([lead_reply, "both"]), [tool_]), state)
    runner.ctx.events.subscribe("tool.call.failed", lambda _event: gate.set())
    assert (await runner.run(timeout=60)).ok
    said = [m.content for m in state.get("messages") if m.role == "tool"]
    assert said[0] == "waited a!" and "returned the tree another call is running" in said[1]


async def test_a_sub_agent_of_a_sub_agent_names_the_whole_path(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    inner = create_react_node(
        ScriptedLLM([calls("write_note", text="deep"), "noted"]),
        agents_app.logged_tools(log), name="scribe",
    )
    middle = create_react_node(
        ScriptedLLM([calls("scribe", input="note it"), "scribe noted it"]),
        [agent_tool(inner, name="scribe", description="Writes notes.")], name="researcher",
    )
    lead, _ = lead_with(middle, [calls("researcher", input="go"), "all done"])
    runner = ReactiveRunner(lead, start())
    first = await runner.run()
    (request,) = first.pending
    assert request.id == "researcher/call_1/scribe/call_1/call_1"
    assert request.summary.startswith("researcher > scribe > write_note(")
    runner.approve(request.id)
    assert (await runner.run()).ok and runner.state.get("final_answer") == "all done"
    assert log.read_text().splitlines() == ["write_note deep"]


def test_bad_definitions_are_refused() -> None:
    sub = create_react_node(ScriptedLLM([]), [], name="x")
    with pytest.raises(ToolValidationError, match="bad name"):
        agent_tool(sub, name="bad name", description="d")
    with pytest.raises(TypeError, match="takes a behaviour tree"):
        agent_tool("not an agent", name="x", description="d")  # type: ignore[arg-type]
    with pytest.raises(ToolValidationError, match="input_type"):
        agent_tool(sub, name="x", description="d", input_type=object())


async def test_an_agent_tool_is_registered_like_any_tool() -> None:
    """Its schema's names are its input type's, which a registry took for missing parameters
    of its ``run``."""
    from pydantic import Field

    from jianmu.tools.registry import ToolRegistry

    class Topic(BaseModel):
        topic: str = Field(description="What to research.")

    sub = create_react_node(ScriptedLLM(["Tides: twice a day."]), [], name="researcher")
    registry = ToolRegistry([agent_tool(sub, name="researcher", description="Researches."),
                             agent_tool(sub, name="typed", description="T.",
                                        input_type=Topic)])
    lead = create_react_node(ScriptedLLM([calls("researcher", input="tides?"), "Done."]),
                             ToolSet.view(registry), name="lead")
    state = start()
    assert (await ReactiveRunner(lead, state).run()).ok
    assert state.get("messages")[2].content == "Tides: twice a day."


async def test_call_ids_that_differ_only_in_punctuation_get_namespaces_of_their_own() -> None:
    def researcher() -> Any:
        def reply(messages: list[Any]) -> str:
            return f"about {messages[-1].content}"

        return create_react_node(ScriptedLLM([reply]), [], name="researcher")

    tool_ = agent_tool(researcher, name="researcher", description="Researches.")
    llm = ScriptedLLM([[{"id": "a.b", "name": "researcher", "arguments": {"input": "one"}},
                        {"id": "a_b", "name": "researcher", "arguments": {"input": "two"}}],
                       "done"])
    state = start()
    assert (await ReactiveRunner(create_react_node(llm, [tool_]), state).run()).ok
    assert [m.content for m in state.get("messages") if m.role == "tool"] == [
        "about one", "about two"]  # the second is not the first's answer again
    assert sorted(state.namespaces()) == ["researcher/a%2Eb", "researcher/a_b"]


async def test_any_tree_that_sets_final_answer_is_a_sub_agent() -> None:
    import py_trees

    from jianmu import AsyncNode

    class Shout(AsyncNode):
        async def update_async(self) -> Any:
            said = self.state.get("messages")[-1].content
            self.state.update({"final_answer": said.upper()})

    tree = py_trees.composites.Sequence("shouter", memory=True, children=[Shout("shout")])
    lead, _ = lead_with(tree, [calls("researcher", input="quiet please"), "Heard."])
    state = start()
    assert (await ReactiveRunner(lead, state).run()).ok
    assert state.get("messages")[2].content == "QUIET PLEASE"
    assert state.get("final_answer") == "Heard."


@pytest.mark.parametrize("checkpointed", [False, True])
async def test_a_batch_waiting_on_a_sub_agent_keeps_the_calls_that_finished(
    tmp_path: Path, checkpointed: bool
) -> None:
    log = tmp_path / "calls.log"
    researcher = create_react_node(ScriptedLLM(agents_app.RESEARCHER),
                                   agents_app.logged_tools(log), name="researcher")
    llm = ScriptedLLM([
        [{"name": "search", "arguments": {"query": "moon"}},
         {"name": "researcher", "arguments": {"input": "tides?"}}],
        "Both done.",
    ])
    lead = create_react_node(
        llm, [search, agent_tool(researcher, name="researcher", description="Researches.")],
        name="lead",
    )
    state = start()
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.sqlite") if checkpointed else None
    runner = ReactiveRunner(lead, state, checkpointer=checkpointer)
    first = await runner.run()
    assert first.status is RunStatus.SUSPENDED
    runner.approve(first.pending[0].id)
    assert (await runner.run()).ok
    results = [(m.tool_call_id, m.content) for m in state.get("messages") if m.role == "tool"]
    assert results == [("call_1", "found moon"), ("call_2", "Tides come twice a day.")]
    assert log.read_text().splitlines() == ["search tides", "write_note tides: twice a day"]


async def test_a_sub_agent_waiting_for_an_answer_is_said_to_wait_for_one() -> None:
    """A sub-agent's question was reported as "waits for approval of ask:..." (the
    ``tool.call.suspended`` reason the studio's timeline and the CLI show): a question waits
    for an answer."""
    from jianmu import Agent
    from jianmu.tools import ToolSet

    asker = Agent(ScriptedLLM([[{"name": "ask_user", "arguments": {"question": "Which card?"}}],
                               "ok"]), tools=ToolSet.resolve(["ask_user"]).tools, name="asker")
    lead = Agent(ScriptedLLM([[{"name": "asker", "arguments": {"input": "pay"}}], "done"]),
                 tools=[asker.as_tool()], name="lead")
    reasons = [event.fields["reason"] async for event in lead.stream("go")
               if event.name == "tool.call.suspended"]
    assert reasons[-1] == "agent 'asker' waits for an answer to ask:call_1", reasons
