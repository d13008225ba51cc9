"""`jianmu.Agent`: the one-object face over create_react_node + StateManager + ReactiveRunner."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import py_trees
import pytest
from pydantic import BaseModel

from jianmu import Agent, AgentResult, ReactiveRunner, ScriptedLLM, StateManager, tool
from jianmu.errors import (
    ApprovalEditError,
    ConfigError,
    InteractionError,
    OutputValidationError,
    ToolValidationError,
)
from jianmu.nodes import AgentState, ReActLoop, create_react_node, handoff
from jianmu.runtime import RunStatus
from jianmu.runtime.checkpoint import SQLiteCheckpointer
from jianmu.runtime.events import Event
from jianmu.tools.builtin import ask_user

pytestmark = pytest.mark.anyio


@tool
def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


class Forecast(BaseModel):
    city: str
    sunny: bool


def script(*answer: Any) -> ScriptedLLM:
    return ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Oslo"}}], *answer])


def test_run_sync_answers_in_one_line() -> None:
    llm = script("It is sunny in Oslo.")
    agent = Agent(llm, tools=[lookup], system_prompt="Answer briefly.")
    result = agent.run_sync("Weather in Oslo?")
    assert isinstance(result, AgentResult) and result.ok
    assert result.output == "It is sunny in Oslo."
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert (result.usage.requests, result.usage.tool_calls) == (2, 1)
    sent = llm.requests[0]
    assert sent.messages[0].role == "system" and sent.messages[0].content == "Answer briefly."
    assert sent.tool_names == ["lookup"]


def test_output_type_gives_the_typed_answer() -> None:
    llm = script([{"name": "final_result", "arguments": {"city": "Oslo", "sunny": True}}])
    result = Agent(llm, tools=[lookup], output_type=Forecast).run_sync("Oslo?")
    assert result.output == Forecast(city="Oslo", sunny=True)
    assert result.raise_for_status() is result


def test_a_typed_answer_that_never_fits_raises_with_details() -> None:
    bad = [{"name": "final_result", "arguments": {"city": 3}}]
    agent = Agent(ScriptedLLM([bad] * 3), output_type=Forecast)
    result = agent.run_sync("Oslo?")
    assert result.status is RunStatus.FAILURE and result.output is None
    with pytest.raises(OutputValidationError) as raised:
        result.raise_for_status()
    assert "$.sunny" in {path for path, _ in raised.value.problems}


def test_history_continues_a_conversation() -> None:
    llm = ScriptedLLM(["Hello Ada.", "You are Ada."])
    agent = Agent(llm)
    first = agent.run_sync("I am Ada.")
    second = agent.run_sync("Who am I?", history=first.messages)
    assert second.output == "You are Ada."
    assert [(m.role, m.content) for m in llm.requests[-1].messages] == [
        ("user", "I am Ada."), ("assistant", "Hello Ada."), ("user", "Who am I?")]
    assert len(first.messages) == 2  # the first run's result is not changed


@pytest.mark.parametrize("output_type", [None, Forecast])
def test_a_history_that_holds_the_system_prompt_is_not_sent_it_twice(output_type: Any) -> None:
    # a conversation ported from pydantic-ai's all_messages(), or an OpenAI messages list,
    # starts with the system prompt the agent sends anyway
    answer: Any = "Hi." if output_type is None else [
        {"name": "final_result", "arguments": {"city": "Oslo", "sunny": True}}]
    llm = ScriptedLLM([answer])
    agent = Agent(llm, system_prompt="Answer briefly.", output_type=output_type)
    history = [{"role": "system", "content": "Answer briefly."},
               {"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi."}]
    agent.run_sync("And Oslo?", history=history)
    sent = [m.role for m in llm.requests[0].messages]
    assert sent == ["system", "user", "assistant", "user"]
    assert llm.requests[0].messages[0].content.startswith("Answer briefly.")
    limited = Agent(ScriptedLLM([answer]), system_prompt="Answer briefly.",
                    output_type=output_type, history_processors=[lambda messages: messages])
    limited.run_sync("And Oslo?", history=history)
    assert [m.role for m in limited.llm.requests[0].messages] == sent  # type: ignore[union-attr]


def test_an_approval_suspends_and_the_run_resumes_after_it() -> None:
    @tool(confirm=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        return f"deployed to {target}"

    llm = ScriptedLLM([[{"name": "deploy", "arguments": {"target": "prod"}}], "Deployed."])
    agent = Agent(llm, tools=[deploy])
    paused = agent.run_sync("Ship it.")
    assert paused.status is RunStatus.SUSPENDED and paused.output is None
    assert [r.payload["tool"] for r in paused.pending] == ["deploy"]
    assert paused.raise_for_status() is paused
    paused.approve()
    done = agent.run_sync(resume=paused)
    assert done.ok and done.output == "Deployed."
    assert done.messages[2].content == "deployed to prod"
    with pytest.raises(ValueError, match="not waiting"):
        agent.run_sync(resume=done)
    with pytest.raises(ValueError, match="this agent"):
        Agent(ScriptedLLM(["x"])).run_sync(resume=paused)


def test_a_result_edits_an_approval_and_answers_a_question() -> None:
    """`AgentResult` decides as the runner does: an edit (``arguments=``), and an answer to a
    question, which approving refused with "answer it with answer(...)", a method it lacked."""
    @tool(confirm=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        return f"deployed to {target}"

    llm = ScriptedLLM([
        [{"name": "ask_user", "arguments": {"question": "Where to?"}}],
        [{"name": "deploy", "arguments": {"target": "prod"}}],
        "Deployed.",
    ])
    agent = Agent(llm, tools=[deploy, ask_user])
    paused = agent.run_sync("Ship it.")
    [question] = paused.pending
    assert question.kind == "question"
    with pytest.raises(InteractionError, match="answer"):
        paused.approve()
    paused.answer("staging, not prod")
    paused = agent.run_sync(resume=paused)
    assert [r.payload["tool"] for r in paused.pending] == ["deploy"]
    with pytest.raises(ApprovalEditError):
        paused.approve(arguments={"target": 3})  # nothing recorded: it still waits
    paused.approve(arguments={"target": "staging"})
    done = agent.run_sync(resume=paused)
    assert done.ok and done.output == "Deployed."
    tool_texts = [m.content or "" for m in done.messages if m.role == "tool"]
    assert tool_texts[0] == "staging, not prod"
    assert "edited" in tool_texts[1] and tool_texts[1].endswith("deployed to staging")


def test_a_suspended_run_resumes_in_another_process_from_its_checkpoint(tmp_path: Path) -> None:
    @tool(confirm=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        return f"deployed to {target}"

    def agent(*script: Any) -> Agent:  # what each process builds, by the same code
        return Agent(ScriptedLLM(list(script)), tools=[deploy], system_prompt="Ship.",
                     checkpointer=SQLiteCheckpointer(tmp_path / "runs.db"))

    first = agent([{"name": "deploy", "arguments": {"target": "prod"}}]).run_sync("Ship it.")
    assert first.status is RunStatus.SUSPENDED
    # another process: the run as its checkpoint left it, waiting for the same request
    later = agent("Deployed.")
    paused = later.restore(first.run_id)
    assert paused.status is RunStatus.SUSPENDED
    assert [r.id for r in paused.pending] == [r.id for r in first.pending]
    assert (paused.usage.requests, [m.role for m in paused.messages]) == (1, ["user", "assistant"])
    paused.approve()
    done = later.run_sync(resume=paused)
    assert done.ok and done.output == "Deployed." and done.usage.requests == 2
    assert later.restore(first.run_id).output == "Deployed."  # a finished run: its answer
    with pytest.raises(ValueError, match="checkpointer"):
        Agent(ScriptedLLM(["x"])).restore(first.run_id)


async def test_a_resume_refused_while_another_goes_on_leaves_the_tree_held() -> None:
    gate, deploying = asyncio.Event(), asyncio.Event()

    @tool(confirm=True)
    async def deploy(target: str) -> str:
        """Deploy (waits for the gate).

        Args:
            target: where.
        """
        deploying.set()
        await gate.wait()
        return f"deployed to {target}"

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "user":
            if messages[0].content == "Ship it.":
                return [{"name": "deploy", "arguments": {"target": "prod"}}]
            return f"Hello, {messages[-1].content}"
        return f"Done: {messages[-1].content}."

    agent = Agent(ScriptedLLM([reply] * 4), tools=[deploy])
    paused = await agent.run("Ship it.")
    paused.approve()
    going = asyncio.create_task(agent.run(resume=paused))
    await deploying.wait()
    with pytest.raises(RuntimeError, match="already running"):
        await agent.run(resume=paused)  # a double click: refused...
    # ...and the tree the first resume runs on is still its own: a new run gets another
    other = await asyncio.wait_for(agent.run("Ada"), 60)
    assert other.output == "Hello, Ada" and other.runner.root is not paused.runner.root
    gate.set()
    assert (await going).output == "Done: deployed to prod."


def test_a_rejection_reaches_the_model() -> None:
    @tool(confirm=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        return "deployed"

    llm = ScriptedLLM([[{"name": "deploy", "arguments": {"target": "prod"}}], "Not deployed."])
    agent = Agent(llm, tools=[deploy])
    paused = agent.run_sync("Ship it.")
    paused.reject(message="not on Friday")
    done = agent.run_sync(resume=paused)
    assert done.ok and "not on Friday" in (done.messages[2].content or "")


def test_as_node_is_the_tree_to_place_in_any_other() -> None:
    agent = Agent(script("sunny"), tools=[lookup], name="weather")
    node = agent.as_node()
    assert isinstance(node, ReActLoop) and node.name == "weather" and node is not agent.as_node()
    tree = py_trees.composites.Sequence("flow", memory=True, children=[node])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Oslo?"}]})
    result = ReactiveRunner(tree, state).run_sync(timeout=30)
    assert result.ok and state.get("final_answer") == "sunny"


def test_as_tool_makes_the_agent_another_agents_tool() -> None:
    researcher = Agent(script("Oslo is sunny."), tools=[lookup], name="researcher")
    lead = Agent(ScriptedLLM([
        [{"name": "research", "arguments": {"input": "Oslo?"}}], "Sunny, says research.",
    ]), tools=[researcher.as_tool("research", "Ask the researcher.")])
    result = lead.run_sync("Weather?")
    assert result.output == "Sunny, says research."
    assert result.messages[2].content == "Oslo is sunny."
    assert (result.usage.requests, result.usage.tool_calls) == (4, 2)


def test_as_tool_names_the_tool_after_any_agent_name() -> None:
    # as the Agents SDK's as_tool(): an agent's name need not be a tool name already
    researcher = Agent(ScriptedLLM(["Sunny."]), name="Research Assistant")
    assert researcher.as_tool().name == "research_assistant"
    with pytest.raises(ToolValidationError):
        researcher.as_tool("Research Assistant")  # a name given is the name, or refused


async def test_await_run_and_runs_at_once_each_get_their_own_tree() -> None:
    gate = asyncio.Event()
    started: list[str] = []

    @tool
    async def slow(name: str) -> str:
        """Wait until both runs have called it.

        Args:
            name: who waits.
        """
        started.append(name)
        if len(started) == 2:
            gate.set()
        await gate.wait()
        return name

    agent = Agent(ScriptedLLM(lambda_script()), tools=[slow])
    one, two = await asyncio.gather(agent.run("x"), agent.run("y"))
    assert (one.output, two.output) == ("done x", "done y") and sorted(started) == ["x", "y"]
    assert one.runner.root is not two.runner.root
    assert [m.content for m in one.messages if m.role == "tool"] == ["x"]


async def test_runs_at_once_that_hand_off_each_get_their_own_team() -> None:
    both = asyncio.Event()
    asked: list[str] = []

    @tool
    async def refund(order: str) -> str:
        """Refund an order (waits until both runs are inside it).

        Args:
            order: the order.
        """
        asked.append(order)
        if len(asked) == 2:
            both.set()
        await both.wait()
        return f"refunded {order}"

    def billing_reply(messages: list[Any]) -> Any:
        if messages[-1].role == "tool" and messages[-1].name == "refund":
            return f"Done: {messages[-1].content}."
        return [{"name": "refund", "arguments": {"order": messages[0].content}}]

    billing = create_react_node(ScriptedLLM([billing_reply] * 4), [refund], name="billing")
    triage = Agent(ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}]] * 2),
                   tools=[handoff(billing)], name="triage")
    # the hand-off target is part of each run's tree: two runs at once must not share it
    one, two = await asyncio.wait_for(asyncio.gather(triage.run("A1"), triage.run("B7")), 60)
    assert (one.output, two.output) == ("Done: refunded A1.", "Done: refunded B7.")
    first, second = triage.as_node(), triage.as_node()
    assert not {id(n) for n in first.iterate()} & {id(n) for n in second.iterate()}
    billing.executor.register_tool(lookup)  # type: ignore[union-attr]
    team = triage.as_node().children[0]
    assert [sorted(t.name for t in r.children[1].toolset) for r in team.children] == [
        [], ["lookup", "refund"]]


def test_an_agent_hands_off_to_another_agent() -> None:
    # as in the OpenAI Agents SDK: handoff(billing_agent), with no tree built by hand
    billing = Agent(ScriptedLLM(["Refunded A1."]), name="billing", system_prompt="Refunds.")
    triage = Agent(ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}]]),
                   tools=[handoff(billing, description="Refunds.")], name="triage")
    result = triage.run_sync("Refund A1?")
    assert result.output == "Refunded A1." and result.runner.state.get("active_agent") == "billing"
    assert billing.llm.requests[0].messages[0].content == "Refunds."  # type: ignore[union-attr]


async def test_the_output_is_the_answer_of_the_agent_that_answered() -> None:
    # a typed caller whose target answers in text: the text, in run() and in stream()
    def text_billing() -> Agent:
        return Agent(ScriptedLLM(["Billing here: refunded."]), name="billing")

    def typed_triage(target: Agent) -> Agent:
        return Agent(ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}]]),
                     tools=[handoff(target)], name="triage", output_type=Forecast)

    result = await typed_triage(text_billing()).run("Refund A1?")
    assert result.ok and result.output == "Billing here: refunded."
    events = [e async for e in typed_triage(text_billing()).stream("Refund A1?")]
    streamed = events[-1].fields["result"]
    assert streamed.ok and streamed.output == "Billing here: refunded."
    # a text caller whose target's Optional type gave None: None, not the raw JSON of it
    says_none = Agent(ScriptedLLM([[{"name": "final_result_NoneType",
                                     "arguments": {"response": None}}]]),
                      name="billing", output_type=Forecast | None)
    triage = Agent(ScriptedLLM([[{"name": "transfer_to_billing", "arguments": {}}]]),
                   tools=[handoff(says_none)], name="triage")
    result = await triage.run("Refund A1?")
    assert result.ok and result.output is None
    assert result.runner.state.get("final_answer") == '{"response": null}'


def lambda_script() -> list[Any]:
    """Replies that depend on the conversation: two runs of one agent at once."""

    def first(messages: list[Any]) -> Any:
        return [{"name": "slow", "arguments": {"name": messages[-1].content}}]

    def answer(messages: list[Any]) -> Any:
        return f"done {messages[0].content}"

    return [first, first, answer, answer]


async def test_stream_yields_the_runs_events_and_ends_with_the_agents_result() -> None:
    agent = Agent(script("It is sunny in Oslo today."), tools=[lookup])
    events: list[Event] = [e async for e in agent.stream("Oslo?")]
    assert [e.name for e in events].count("run.finished") == 1
    result = events[-1].fields["result"]
    assert isinstance(result, AgentResult) and result.output == "It is sunny in Oslo today."
    text = "".join(e.fields["text"] for e in events if e.name == "llm.call.delta")
    assert text == result.output
    assert [e.fields["tool"] for e in events if e.name == "tool.call.completed"] == ["lookup"]


async def test_leaving_an_agents_stream_early_cancels_its_run() -> None:
    running, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def wait_forever(what: str) -> str:
        """Wait.

        Args:
            what: the thing.
        """
        running.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return what

    agent = Agent(ScriptedLLM([[{"name": "wait_forever", "arguments": {"what": "x"}}], "no"]),
                  tools=[wait_forever])
    before = asyncio.all_tasks()
    async with contextlib.aclosing(agent.stream("go")) as events:
        async for event in events:
            if event.name == "tool.call.started":
                await running.wait()
                break
    assert cancelled.is_set() and asyncio.all_tasks() == before
    # the run is over: the agent runs again
    assert (await agent.run("again")).output == "no"


async def test_run_sync_inside_a_loop_says_to_await() -> None:
    with pytest.raises(RuntimeError, match="await"):
        Agent(ScriptedLLM(["x"])).run_sync("hi")


def test_a_prompt_is_needed() -> None:
    with pytest.raises(ValueError, match="prompt"):
        Agent(ScriptedLLM(["x"])).run_sync()


async def test_an_agents_stream_orders_its_events_and_keeps_up_with_a_slow_reader() -> None:
    answering = asyncio.Event()

    def answer(messages: list[Any]) -> str:
        answering.set()  # the last turn: every event before it is queued for the reader
        return "It is sunny in Oslo today."

    agent = Agent(script(answer), tools=[lookup])
    got: list[Event] = []
    async for event in agent.stream("Oslo?"):
        got.append(event)
        if len(got) == 1:
            await answering.wait()  # a reader busy elsewhere: the run goes on without it
    names = [e.name for e in got]
    steps = [n for n in names if n in ("llm.call.started", "llm.call.completed",
                                       "tool.call.started", "tool.call.completed")]
    assert steps == ["llm.call.started", "llm.call.completed", "tool.call.started",
                     "tool.call.completed", "llm.call.started", "llm.call.completed"]
    assert names[-1] == "run.finished" and names.count("run.finished") == 1
    text = "".join(e.fields["text"] for e in got if e.name == "llm.call.delta")
    assert text == got[-1].fields["result"].output


async def test_an_agents_stream_stops_at_an_approval_and_goes_on_after_it() -> None:
    @tool(confirm=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        return f"deployed to {target}"

    llm = ScriptedLLM([[{"name": "deploy", "arguments": {"target": "prod"}}], "Deployed it."])
    agent = Agent(llm, tools=[deploy])
    first = [e async for e in agent.stream("Ship it.")]
    paused = first[-1].fields["result"]
    assert paused.status is RunStatus.SUSPENDED and "run.suspended" in [e.name for e in first]
    paused.approve()
    second = [e async for e in agent.stream(resume=paused)]
    names = [e.name for e in second]
    assert names.count("run.finished") == 1 and "tool.call.completed" in names
    assert second[-1].fields["result"].output == "Deployed it."


async def test_a_sub_agents_text_streams_in_the_lead_agents_stream() -> None:
    researcher = Agent(script("Oslo is sunny."), tools=[lookup], name="researcher")
    lead = Agent(ScriptedLLM([
        [{"name": "research", "arguments": {"input": "Oslo?"}, "id": "r1"}], "Sunny.",
    ]), tools=[researcher.as_tool("research", "Ask the researcher.")], name="lead")
    events = [e async for e in lead.stream("Weather?")]
    inner = "lead/lead.round/lead.tools/research[r1]/researcher/"
    text = "".join(e.fields["text"] for e in events
                   if e.name == "llm.call.delta" and (e.node or "").startswith(inner))
    assert text == "Oslo is sunny."
    assert [e.fields["tool"] for e in events if e.name == "tool.call.completed"] == [
        "lookup", "research"]
    assert [e.name for e in events].count("run.finished") == 1


async def test_a_plain_break_out_of_an_agents_stream_cancels_the_running_tool() -> None:
    running, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def wait_forever(what: str) -> str:
        """Wait.

        Args:
            what: the thing.
        """
        running.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return what

    agent = Agent(ScriptedLLM([[{"name": "wait_forever", "arguments": {"what": "x"}}]]),
                  tools=[wait_forever])
    before = asyncio.all_tasks()
    async for event in agent.stream("go"):
        if event.name == "tool.call.started":
            await running.wait()
            break
    await cancelled.wait()
    for _ in range(200):  # the dropped generator closes in a task of its own
        if asyncio.all_tasks() == before:
            break
        await asyncio.sleep(0)
    assert asyncio.all_tasks() == before


# -- what a user porting from pydantic-ai or LangGraph writes ----------------------------------
def test_a_provider_model_name_builds_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.model_server import ModelServer

    with ModelServer("Hello from the server.") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "not-needed")
        result = Agent("openai:test-model").run_sync("hi", timeout=30)
        assert result.ok and result.output == "Hello from the server."
        assert server.requests[0].body["model"] == "test-model"


def test_a_named_model_is_one_provider_for_every_tree_of_the_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.support.model_server import ModelServer

    with ModelServer("Sunny.", "Rainy.", "Windy.") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "not-needed")
        researcher = Agent("openai:test-model", name="researcher")
        # each call of the tool runs a fresh tree of the researcher: all on one provider,
        # so on one kept-alive connection, not a client (and its sockets) left per tree
        lead = Agent(ScriptedLLM([
            [{"name": "researcher", "arguments": {"input": city}}] for city in "ABC"
        ] + ["Done."]), tools=[researcher.as_tool()])
        assert lead.run_sync("Weather?", timeout=30).ok
        assert len(server.requests) == 3 and len(server.connections) == 1


@pytest.mark.parametrize(("llm", "error", "said"), [
    ("gpt-4o", ConfigError, "names no provider"),
    ("openai:", ConfigError, "names no model"),
    (":gpt-4o", ConfigError, "names no provider"),
    ("nobody:model", ConfigError, "no model provider named 'nobody'"),
    (42, TypeError, "llm must be a model provider"),
])
def test_a_model_that_is_not_one_is_refused_when_the_agent_is_made(
    llm: Any, error: type[Exception], said: str,
) -> None:
    with pytest.raises(error, match=said):
        Agent(llm)


def test_a_system_prompt_that_is_not_text_is_refused_when_the_agent_is_made() -> None:
    with pytest.raises(TypeError, match="system_prompt must be text, got int"):
        Agent(ScriptedLLM(["hi"]), system_prompt=5)  # type: ignore[arg-type]


@pytest.mark.parametrize(("given", "said"), [
    ("instructions", "system_prompt="), ("model_settings", "llm_params="),
    ("max_turns", "max_iterations="),
    ("handoffs", "handoff("), ("colour", "Agent() got an unexpected keyword"),
])
def test_a_keyword_of_another_framework_is_refused_with_jianmus_spelling(
    given: str, said: str
) -> None:
    with pytest.raises(TypeError, match=f"Agent\\(\\) .*{given}") as raised:
        Agent(ScriptedLLM(["hi"]), **{given: "x"})
    assert said in str(raised.value)


def test_plain_functions_are_tools() -> None:
    def weather(city: str) -> str:
        """The weather of a city.

        Args:
            city: the city.
        """
        return f"sunny in {city}"

    llm = ScriptedLLM([[{"name": "weather", "arguments": {"city": "Oslo"}}], "Sunny."])
    agent = Agent(llm, tools=[weather])
    result = agent.run_sync("weather in Oslo?")
    assert result.ok and result.output == "Sunny."
    assert [m.content for m in result.messages if m.role == "tool"] == ["sunny in Oslo"]
    assert agent.tools[0].name == "weather"  # made a tool once, for every run


def test_output_type_str_takes_the_text_answer() -> None:
    result = Agent(ScriptedLLM(["Just text."]), output_type=str).run_sync("q")
    assert result.ok and result.output == "Just text."
    assert not [m for m in result.messages if m.role == "user"][1:]  # never asked again


def test_a_union_holding_str_takes_text_or_its_other_members_tool() -> None:
    as_text = Agent(ScriptedLLM(["Not a number."]), output_type=int | str).run_sync("q")
    assert as_text.ok and as_text.output == "Not a number."
    llm = ScriptedLLM([[{"name": "final_result", "arguments": {"response": 42}}]])
    as_int = Agent(llm, output_type=int | str).run_sync("q")
    assert as_int.ok and as_int.output == 42
    assert [t["function"]["name"] for t in llm.requests[0].tools] == ["final_result"]


def test_a_list_of_types_is_one_of_them_as_in_pydantic_ai() -> None:
    # pydantic-ai's output_type=[Forecast, str]: a Forecast, or a text answer as it is
    as_text = Agent(ScriptedLLM(["No idea."]), output_type=[Forecast, str]).run_sync("q")
    assert as_text.ok and as_text.output == "No idea."
    llm = ScriptedLLM([[{"name": "final_result", "arguments": {"city": "Oslo", "sunny": True}}]])
    typed = Agent(llm, output_type=[Forecast, str]).run_sync("q")
    assert typed.output == Forecast(city="Oslo", sunny=True)
    llm = ScriptedLLM([[{"name": "final_result_int", "arguments": {"response": 3}}]])
    assert Agent(llm, output_type=(Forecast, int)).run_sync("q").output == 3


def test_raise_for_status_returns_the_results_own_type() -> None:
    """``agent.run_sync(...).raise_for_status().approve()`` type-checks: it returns ``Self``
    (an `AgentResult` from an agent), as it returns the result itself at run time."""
    import typing

    from jianmu.runtime import RunResult

    assert typing.get_type_hints(RunResult.raise_for_status)["return"] is typing.Self
    paused = Agent(ScriptedLLM([[{"name": "ask_user", "arguments": {"question": "Which?"}}]]),
                   tools=[ask_user]).run_sync("Go.")
    assert paused.raise_for_status() is paused and isinstance(paused, AgentResult)


@pytest.mark.parametrize(("name", "key", "url"), [
    ("openai:gpt-4o", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
])
def test_a_named_model_without_a_key_or_server_is_refused_when_the_agent_is_made(
    monkeypatch: pytest.MonkeyPatch, name: str, key: str, url: str,
) -> None:
    # a new user's first Agent("openai:gpt-4o") without $OPENAI_API_KEY went to the vendor
    # keyless, retried, and failed with a connection or 401 error that named no variable
    monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv(url, raising=False)
    with pytest.raises(ConfigError, match=f"set \\${key}.*\\${url}"):
        Agent(name)


def test_a_named_model_whose_sdk_is_missing_says_so_before_asking_for_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # with neither the SDK nor the key, the key was asked for first: set, it only led to the
    # next error
    import sys

    from jianmu.errors import MissingExtraError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` fails: not installed
    with pytest.raises(MissingExtraError, match=r"pip install 'jianmu\[openai\]'"):
        Agent("openai:gpt-4o")
