"""What a user porting an agent from the OpenAI SDK, pydantic-ai or the OpenAI Agents SDK
hands `jianmu.Agent`: histories in their shapes, and what they read back."""

from __future__ import annotations

from typing import Any

from jianmu import Agent, ScriptedLLM, StateManager
from jianmu.nodes import AgentState

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

