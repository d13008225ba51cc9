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
