"""What a user porting an agent from the OpenAI SDK, pydantic-ai or the OpenAI Agents SDK
hands `jianmu.Agent`: histories in their shapes, and what they read back."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from jianmu import Agent, RunContext, ScriptedLLM, SQLiteCheckpointer, StateManager, tool
from jianmu.constraints import Constraints
from jianmu.nodes import AgentState
from jianmu.runtime import RunStatus
from jianmu.tools.calls import is_tool_name

# ``completion.choices[0].message.model_dump()`` of the openai SDK: keys a Message lacks, null
OPENAI_SDK_TURN = {
    "content": None, "refusal": None, "role": "assistant", "annotations": [], "audio": None,
    "function_call": None, "reasoning_content": "The user wants Oslo's weather.",
    "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'}}],
}
OPENAI_HISTORY: list[dict[str, Any]] = [
    {"role": "developer", "content": "Answer briefly."},
    {"role": "user", "content": "Weather in Oslo?"},
    OPENAI_SDK_TURN,
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "assistant", "content": "Sunny.", "refusal": None, "audio": None,
     "function_call": None, "tool_calls": None, "annotations": []},
    {"role": "user", "content": "Tell me a secret."},
    {"role": "assistant", "content": None, "refusal": "I can't share that."},
]


def test_an_openai_chat_history_continues_as_the_sdk_dumped_it() -> None:
    llm = ScriptedLLM(["Still sunny."])
    result = Agent(llm).run_sync("And now?", history=OPENAI_HISTORY)
    assert result.ok, result.exception
    sent = llm.requests[0].messages
    assert [(m.role, m.content) for m in sent] == [
        ("system", "Answer briefly."), ("user", "Weather in Oslo?"), ("assistant", None),
        ("tool", "sunny"), ("assistant", "Sunny."), ("user", "Tell me a secret."),
        ("assistant", "I can't share that."), ("user", "And now?")]
    assert sent[2].tool_calls[0].arguments == {"city": "Oslo"}
    assert sent[2].reasoning == [
        {"type": "reasoning_content", "text": "The user wants Oslo's weather."}]


def test_the_agent_state_takes_an_openai_chat_history_as_its_docstring_says() -> None:
    state = StateManager(AgentState, {"messages": OPENAI_HISTORY[:3]})
    assert [m.role for m in state.get("messages")] == ["system", "user", "assistant"]
    state.update({"messages": [OPENAI_HISTORY[4]]})
    assert state.get("messages")[-1].content == "Sunny."


def test_a_reply_without_usage_is_counted_as_an_estimate_and_the_result_says_so() -> None:
    """The run's ``usage`` had the estimate's tokens with nothing in it saying so: only an
    ``llm.usage_unknown`` event, which ``run_sync`` never shows, told them from a bill."""
    from jianmu.llm import OpenAIProvider
    from tests.support.model_server import ModelServer, Turn

    def llm(server: ModelServer) -> OpenAIProvider:
        return OpenAIProvider("m", base_url=server.openai_url, api_key="k")

    with ModelServer() as server:
        server.add(Turn(calls=[{"name": "research", "arguments": {"input": "Oslo?"}}]),
                   Turn(text="Oslo is sunny.", usage=None), Turn(text="Sunny."))
        researcher = Agent(llm(server), name="researcher")
        lead = Agent(llm(server), tools=[researcher.as_tool("research")], name="lead")
        result = lead.run_sync("Weather?", timeout=30)
        assert result.ok and result.output == "Sunny."
        usage = result.usage
        assert (usage.requests, usage.estimated_requests) == (3, 1)
        assert usage.input_tokens > 20 and usage.output_tokens > 10  # 2 counted + 1 estimated

        server.add(Turn(text="Counted."))
        assert lead.run_sync("Again?", timeout=30).usage.estimated_requests == 0



# ``result.to_input_list()`` of the OpenAI Agents SDK: Responses API items, a turn's calls and
# their results each an item of their own
AGENTS_SDK_HISTORY: list[dict[str, Any]] = [
    {"content": "Weather in Oslo and Rome?", "role": "user"},
    {"id": "rs_1", "summary": [], "type": "reasoning"},
    {"id": "msg_0", "content": [{"annotations": [], "text": "Looking.", "type": "output_text"}],
     "role": "assistant", "status": "completed", "type": "message"},
    {"arguments": '{"city":"Oslo"}', "call_id": "call_a", "name": "lookup",
     "type": "function_call", "id": "fc_1", "status": "completed"},
    {"arguments": '{"city":"Rome"}', "call_id": "call_b", "name": "lookup",
     "type": "function_call", "id": "fc_2", "status": "completed"},
    {"call_id": "call_a", "output": "sunny", "type": "function_call_output"},
    {"call_id": "call_b", "output": "rainy", "type": "function_call_output"},
    {"id": "msg_1", "content": [{"annotations": [], "text": "Oslo sunny, Rome rainy.",
                                 "type": "output_text"}],
     "role": "assistant", "status": "completed", "type": "message"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks."}]},
]


def test_an_agents_sdk_input_list_continues_the_conversation() -> None:
    llm = ScriptedLLM(["You're welcome."])
    result = Agent(llm).run_sync("And Paris?", history=AGENTS_SDK_HISTORY)
    assert result.ok, result.exception
    sent = llm.requests[0].messages
    assert [(m.role, m.content, m.tool_call_id) for m in sent] == [
        ("user", "Weather in Oslo and Rome?", None), ("assistant", "Looking.", None),
        ("tool", "sunny", "call_a"), ("tool", "rainy", "call_b"),
        ("assistant", "Oslo sunny, Rome rainy.", None), ("user", "Thanks.", None),
        ("user", "And Paris?", None)]
    assert [(c.id, c.arguments) for c in sent[1].tool_calls] == [
        ("call_a", {"city": "Oslo"}), ("call_b", {"city": "Rome"})]


def test_an_agents_sdk_item_no_chat_message_stands_for_is_refused_by_its_type() -> None:
    hosted = {"id": "ws_1", "status": "completed", "type": "web_search_call"}
    with pytest.raises(ValueError, match="web_search_call"):
        Agent(ScriptedLLM(["x"])).run_sync("Hi.", history=[*AGENTS_SDK_HISTORY, hosted])


def _model(name: str, module: str, **fields: type) -> Any:
    return type(name, (BaseModel,), {"__annotations__": fields, "__module__": module})


def test_each_member_of_a_union_answer_gets_a_tool_of_its_own() -> None:
    """Two members whose names clash (``Item`` of two modules) were offered as one tool, the
    first member lost; a long one (``list[pkg.module.LongName]``) made a name over 64
    characters, which failed the run."""
    api_item = _model("Item", "shop.api", sku=int)
    db_item = _model("Item", "shop.db", row=str)
    escalate = _model("CustomerSupportEscalationResponse", "support.schemas.responses", v=int)
    resolve = _model("CustomerSupportResolutionResponse", "support.schemas.responses", w=str)
    for output_type in (api_item | db_item, list[escalate] | list[resolve]):
        llm = ScriptedLLM(["x"] * 3)
        Agent(llm, output_type=output_type).run_sync("q")
        names = llm.requests[0].tool_names
        assert len(names) == len(set(names)) == 2, names
        assert all(is_tool_name(n) for n in names), names
    first = ScriptedLLM([[{"name": "final_result_Item", "arguments": {"sku": 7}}]])
    assert Agent(first, output_type=api_item | db_item).run_sync("q").output == api_item(sku=7)
    second = ScriptedLLM([[{"name": "final_result_Item_2", "arguments": {"row": "r"}}]])
    assert Agent(second, output_type=api_item | db_item).run_sync("q").output == db_item(row="r")
    answer = [{"name": "final_result_list_CustomerSupportResolutionResponse",
               "arguments": {"response": [{"w": "done"}]}}]
    result = Agent(ScriptedLLM([answer]), output_type=list[escalate] | list[resolve]).run_sync("q")
    assert result.output == [resolve(w="done")]


def test_a_history_with_reused_or_odd_call_ids_reaches_anthropic_with_unique_valid_ids() -> None:
    """Anthropic refuses a request whose ``tool_use`` ids repeat ("ids must be unique") or do
    not match ``^[a-zA-Z0-9_-]+$``: a history from a server that numbers calls per reply
    (``call_0`` each turn), from Kimi (``functions.lookup:0``), or with an id Jianmu made
    unique in a run (``call_0.1``) was sent as it was."""
    from jianmu.llm import AnthropicProvider
    from tests.support.model_server import ModelServer

    def turn(call_id: str, city: str) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "lookup", "arguments": f'{{"city": "{city}"}}'}}]},
            {"role": "tool", "tool_call_id": call_id, "content": f"sunny in {city}"},
        ]

    history = [{"role": "user", "content": "Oslo, Rome, Paris, Bern?"},
               *turn("call_0", "Oslo"), *turn("call_0", "Rome"),
               *turn("functions.lookup:0", "Paris"), *turn("call_0.1", "Bern"),
               {"role": "assistant", "content": "All sunny."}]
    with ModelServer("Still sunny.") as server:
        llm = AnthropicProvider("m", base_url=server.anthropic_url, api_key="k")
        result = Agent(llm).run_sync("And now?", history=history, timeout=30)
        assert result.ok, result.exception
        sent = server.requests[0].body["messages"]
    uses = [b["id"] for m in sent if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in sent if m["role"] == "user"
               and isinstance(m["content"], list) for b in m["content"]
               if b["type"] == "tool_result"]
    assert len(uses) == len(set(uses)) == 4 and uses == results
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", i) for i in uses), uses


def test_a_history_with_long_call_ids_reaches_openai_with_ids_of_40_characters_at_most() -> None:
    """OpenAI refuses a call id over 40 characters ("string too long"): a history from vLLM
    (``chatcmpl-tool-`` and 32 hex digits) was sent with its ids as they were."""
    from jianmu.llm import OpenAIProvider
    from tests.support.model_server import ModelServer

    long_ids = ["chatcmpl-tool-" + "0123456789abcdef" * 2, "chatcmpl-tool-" + "fedcba98" * 4]
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Oslo and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function",
             "function": {"name": "lookup", "arguments": '{"city": "x"}'}} for i in long_ids]},
        *({"role": "tool", "tool_call_id": i, "content": "sunny"} for i in long_ids),
        {"role": "assistant", "content": "Both sunny."}]
    with ModelServer("Still sunny.") as server:
        llm = OpenAIProvider("m", base_url=server.openai_url, api_key="k")
        assert Agent(llm).run_sync("And now?", history=history, timeout=30).ok
        sent = server.requests[0].body["messages"]
    calls = [c["id"] for c in sent[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in sent[2:4]] == calls
    assert len(set(calls)) == 2 and all(len(i) <= 40 for i in calls), calls


def test_a_prompt_given_as_an_agents_sdk_input_list_is_refused_naming_history() -> None:
    """``Runner.run(agent, items)`` takes the conversation as its input; ``agent.run(items)``
    was refused as "state key 'messages' ... at 0: Input should be a valid dictionary"."""
    agent = Agent(ScriptedLLM(["x"]))
    with pytest.raises(TypeError, match=r"history=.*prompt"):
        agent.run_sync([*AGENTS_SDK_HISTORY, {"role": "user", "content": "Next?"}])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prompt"):
        agent.run_sync(42)  # type: ignore[arg-type]


def test_an_agent_without_tools_continues_a_history_with_tool_calls_on_anthropic() -> None:
    """Anthropic refuses a request whose history holds ``tool_use`` blocks but that defines no
    tools ("Requests which include tool_use or tool_result blocks must define tools"): an
    agent without tools (a writer after a researcher) could not continue such a history."""
    from jianmu.llm import AnthropicProvider
    from tests.support.model_server import ModelServer

    with ModelServer("Oslo is sunny and Rome rainy.") as server:
        llm = AnthropicProvider("m", base_url=server.anthropic_url, api_key="k")
        writer = Agent(llm, system_prompt="Write it up.")
        assert writer.run_sync("Write it up.", history=AGENTS_SDK_HISTORY, timeout=30).ok
        body = server.requests[0].body
    assert [t["name"] for t in body["tools"]] == ["lookup"]
    assert body["tool_choice"] == {"type": "none"}  # offered so the history holds, never called


@pytest.mark.parametrize(("peer", "ours"), [
    ("final_output", "output"), ("data", "output"), ("all_messages", "messages"),
    ("to_input_list", "messages"),
])
def test_a_result_attribute_of_another_framework_says_jianmus_spelling(peer: str,
                                                                       ours: str) -> None:
    result = Agent(ScriptedLLM(["Hi."])).run_sync("Hello.")
    with pytest.raises(AttributeError, match=rf"{peer}.*result\.{ours}"):
        getattr(result, peer)
    with pytest.raises(AttributeError, match="no_such_thing") as raised:
        result.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
    assert "Jianmu" not in str(raised.value)


@pytest.mark.parametrize(("peer", "ours"), [
    ("run_stream", "agent.stream"), ("iter", "agent.stream"), ("run_streamed", "agent.stream"),
    ("run_stream_events", "agent.stream"), ("instructions", "agent.system_prompt"),
])
def test_an_agent_method_of_another_framework_says_jianmus_spelling(peer: str,
                                                                    ours: str) -> None:
    """A user porting from pydantic-ai (``run_stream``, ``iter``) or the Agents SDK
    (``Runner.run_streamed``) got a bare AttributeError, unlike a result's attribute."""
    agent = Agent(ScriptedLLM(["Hi."]))
    with pytest.raises(AttributeError, match=rf"'{peer}'.*Jianmu spells it {ours}"):
        getattr(agent, peer)
    with pytest.raises(AttributeError, match="no_such_thing") as raised:
        agent.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
    assert "Jianmu" not in str(raised.value)


@pytest.mark.parametrize("peer", ["stream_text", "stream_events", "get_output", "final_output"])
def test_a_streamed_results_method_of_another_framework_says_how_jianmu_reads_it(
    peer: str,
) -> None:
    """``async with agent.stream(q) as result: result.stream_text()`` (pydantic-ai) or
    ``result.stream_events()`` (the Agents SDK): the stream is read as it is, and the error
    says how (it was a bare AttributeError of an async generator)."""
    import asyncio

    async def read() -> None:
        agent = Agent(ScriptedLLM(["Hi."]))
        async with agent.stream("Hello.") as result:
            with pytest.raises(AttributeError, match=rf"'{peer}'.*async for event in agent"
                                                     r"\.stream.*llm\.call\.delta.*run\.finished"):
                getattr(result, peer)
            with pytest.raises(AttributeError, match="no_such_thing") as raised:
                result.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
            assert "Jianmu" not in str(raised.value)
            assert [event.name async for event in result][-1] == "run.finished"

    asyncio.run(read())


def test_new_messages_of_pydantic_ai_says_jianmus_spelling() -> None:
    result = Agent(ScriptedLLM(["Hi."])).run_sync("Hello.")
    with pytest.raises(AttributeError, match=r"new_messages.*result\.messages \(the whole"):
        result.new_messages  # noqa: B018


@pytest.mark.parametrize(("peer", "ours"), [
    ("message_history", "history="), ("model_settings", "llm_params="),
    ("usage_limits", "constraints="), ("max_turns", "max_iterations="),
    ("deps", "extras="), ("context", "extras="),
])
@pytest.mark.parametrize("method", ["run", "run_sync", "stream"])
def test_a_run_keyword_of_another_framework_says_jianmus_spelling(
    method: str, peer: str, ours: str,
) -> None:
    """pydantic-ai's ``agent.run_sync(q, message_history=result.all_messages())`` (the hint
    for ``all_messages`` leads there) got a bare "unexpected keyword argument"; the stream
    refuses it at once, not on its first event."""
    import asyncio

    agent = Agent(ScriptedLLM(["Hi."]))
    call = getattr(agent, method)
    with pytest.raises(TypeError, match=rf"Agent\.{method}\(\) got an unexpected keyword "
                                        rf"argument '{peer}'; Jianmu spells it .*{ours}"):
        made = call("Hello.", **{peer: []})
        if method == "run":
            asyncio.run(made)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'nonsense'$"):
        outcome = call("Hello.", nonsense=1)
        if method == "run":
            asyncio.run(outcome)
    assert agent.run_sync("Hello.").output == "Hi."


@tool
def whose_orders(ctx: RunContext) -> str:
    """The orders of the user the run acts for."""
    return f"{ctx.extras['user']}: {ctx.extras['db'][ctx.extras['user']]}"


def test_a_runs_dependencies_reach_its_tools_as_pydantic_ais_deps_do(tmp_path: Path) -> None:
    """pydantic-ai's ``agent.run(q, deps=...)`` and the Agents SDK's ``context=`` had no
    spelling: a tool could reach a client or the user only through what the agent was made
    with, the same for every run."""
    db = {"ada": ["A1"], "bob": ["B7"]}
    ask = [{"name": "whose_orders", "arguments": {}}]
    sub = Agent(ScriptedLLM([ask, lambda m: f"sub: {m[-1].content}"] * 2), tools=[whose_orders],
                name="sub")
    agent = Agent(ScriptedLLM([[*ask, {"name": "sub", "arguments": {"input": "yours?"}}],
                               lambda m: " | ".join(x.content for x in m if x.role == "tool")]
                              * 3), tools=[whose_orders, sub.as_tool()])
    assert agent.run_sync("Mine?", extras={"user": "ada", "db": db}).output == (
        "ada: ['A1'] | sub: ada: ['A1']")

    async def streamed() -> Any:
        async for event in agent.stream("Mine?", extras={"user": "bob", "db": db}):
            if event.name == "run.finished":
                return event.fields["result"].output
        return None

    assert asyncio.run(streamed()) == "bob: ['B7'] | sub: bob: ['B7']"
    with pytest.raises(TypeError, match=r"extras= takes a dict .* got list"):
        agent.run_sync("Mine?", extras=[("user", "ada")])  # type: ignore[arg-type]

    # a run restored in another process has none of the first one's clients: given again
    confirm = Constraints.model_validate({"guard": {"tool_policy": {"whose_orders": "confirm"}}})
    store = SQLiteCheckpointer(tmp_path / "runs.db")

    def made() -> Agent:
        return Agent(ScriptedLLM([ask, lambda m: m[-1].content]), tools=[whose_orders],
                     constraints=confirm, checkpointer=store)

    first = made().run_sync("Mine?", extras={"user": "ada", "db": db})
    assert first.status is RunStatus.SUSPENDED
    later = made()
    restored = later.restore(first.run_id, extras={"user": "ada"})
    restored.approve()
    assert later.run_sync(resume=restored, extras={"db": db}).output == "ada: ['A1']"


def test_an_agents_sdk_input_list_with_a_picture_continues_the_conversation() -> None:
    """The Agents SDK's ``input_image`` part (a data URL) was refused as a part of no known
    type: its whole history could not go on."""
    picture = "data:image/png;base64,iVBORw0KGgo="
    history = [
        {"role": "user", "content": [{"type": "input_text", "text": "What is this?"},
                                     {"type": "input_image", "image_url": picture,
                                      "detail": "auto"}]},
        {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "A dot.", "annotations": []}]},
    ]
    llm = ScriptedLLM(["Still a dot."])
    assert Agent(llm).run_sync("And now?", history=history).output == "Still a dot."
    asked = llm.requests[0].messages[0]
    assert asked.content == "What is this?" and asked.media[0].data_url() == picture
    with pytest.raises(ValueError, match="input_image' is not supported"):  # a file's id
        Agent(llm).run_sync("Hi", history=[{"role": "user", "content": [
            {"type": "input_image", "file_id": "file-123"}]}])


def test_a_pydantic_ai_tools_typed_run_context_says_how_jianmu_passes_deps() -> None:
    """``def tool(ctx: RunContext[Deps], ...)`` failed at import with "type 'RunContext' is
    not subscriptable", naming neither the annotation to write nor where deps go."""
    with pytest.raises(TypeError, match=r"annotate ctx: RunContext, .* extras=\{\.\.\.\}"):
        RunContext[dict]  # type: ignore[misc]
