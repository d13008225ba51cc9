"""A conversation goes on: `ReactiveRunner.send` adds the user's next turn, the next run answers
it with the whole history, also after a restore in another process and through a SkillNode."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager
from jianmu.llm import Message
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import tool

REPO = Path(__file__).resolve().parents[2]


@tool
def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def _texts(messages: list[Message]) -> list[tuple[str, str | None]]:
    return [(m.role, m.content) for m in messages if m.role in ("user", "assistant")]


def test_two_turns_continue_one_conversation() -> None:
    llm = ScriptedLLM([
        [{"name": "lookup", "arguments": {"city": "Oslo"}}], "Oslo is sunny.",
        "Yes, take sunglasses.",
    ])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Oslo?"}]})
    runner = ReactiveRunner(create_react_node(llm, [lookup]), state)
    first = runner.run_sync(timeout=30)
    assert first.ok and state.get("final_answer") == "Oslo is sunny."
    runner.send("Sunglasses?")
    assert state.get("final_answer") is None and state.get("done") is False
    second = runner.run_sync(timeout=30)
    assert second.ok and state.get("final_answer") == "Yes, take sunglasses."
    sent = llm.requests[-1].messages
    assert _texts(sent) == [
        ("user", "Oslo?"), ("assistant", None), ("assistant", "Oslo is sunny."),
        ("user", "Sunglasses?"),
    ]
    assert [m.role for m in state.get("messages")] == [
        "user", "assistant", "tool", "assistant", "user", "assistant"]


def test_send_refuses_while_waiting_for_approval() -> None:
    @tool(confirm=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        return "deployed"

    llm = ScriptedLLM([[{"name": "deploy", "arguments": {"target": "prod"}}], "done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "ship it"}]})
    runner = ReactiveRunner(create_react_node(llm, [deploy]), state)
    assert runner.run_sync(timeout=30).status.value == "suspended"
    with pytest.raises(RuntimeError, match="waits for approval"):
        runner.send("and then?")


def _agent(llm: ScriptedLLM) -> Any:
    return create_react_node(llm, [lookup], name="chat")


def test_a_restored_run_continues_the_conversation(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    llm = ScriptedLLM(["Hello Ada."])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "I am Ada."}]})
    first = ReactiveRunner(_agent(llm), state, checkpointer=SQLiteCheckpointer(db), run_id="chat1")
    assert first.run_sync(timeout=30).ok

    later = ScriptedLLM(["Your name is Ada."])
    restored = ReactiveRunner.restore(_agent(later), SQLiteCheckpointer(db), "chat1",
                                      state_manager=StateManager(AgentState))
    restored.send("What is my name?")
    assert restored.run_sync(timeout=30).ok
    assert restored.state.get("final_answer") == "Your name is Ada."
    assert _texts(later.requests[0].messages) == [
        ("user", "I am Ada."), ("assistant", "Hello Ada."), ("user", "What is my name?")]


def test_a_conversation_continues_in_another_process(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "I am Ada."}]})
    runner = ReactiveRunner(_agent(ScriptedLLM(["Hello Ada."])), state,
                            checkpointer=SQLiteCheckpointer(db), run_id="chat2")
    assert runner.run_sync(timeout=30).ok
    script = textwrap.dedent(f"""
        from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager
        from jianmu.nodes import AgentState, create_react_node
        llm = ScriptedLLM(["Your name is Ada."])
        runner = ReactiveRunner.restore(
            create_react_node(llm, [], name="chat"), SQLiteCheckpointer({str(db)!r}), "chat2",
            state_manager=StateManager(AgentState))
        runner.send("What is my name?")
        assert runner.run_sync(timeout=30).ok
        seen = [(m.role, m.content) for m in llm.requests[0].messages]
        print(seen)
        print(runner.state.get("final_answer"))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == str([("user", "I am Ada."), ("assistant", "Hello Ada."),
                             ("user", "What is my name?")])
    assert lines[-1] == "Your name is Ada."


def test_a_skill_node_conversation_continues(tmp_path: Path) -> None:
    from jianmu.skills import SkillCatalog
    from jianmu.skills.node import SkillNode

    folder = tmp_path / "weather"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: weather\ndescription: Answer weather questions.\ntools: [lookup]\n---\n"
        "Look the weather up before you answer.\n"
    )
    llm = ScriptedLLM([
        [{"name": "lookup", "arguments": {"city": "Oslo"}}], "Oslo is sunny.",
        "Still sunny.",
    ])
    node = SkillNode("Weather", ["weather"], llm,
                     catalog=SkillCatalog([tmp_path], custom_tools=[lookup]), tools=[lookup])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Oslo?"}]})
    runner = ReactiveRunner(node, state)
    assert runner.run_sync(timeout=30).ok
    runner.send("And now?")
    assert runner.run_sync(timeout=30).ok
    assert state.get("final_answer") == "Still sunny."
    assert _texts(llm.requests[-1].messages)[-3:] == [
        ("user", "Oslo?"), ("assistant", "Oslo is sunny."), ("user", "And now?")]
    assert _texts(state.get("messages")) == [
        ("user", "Oslo?"), ("assistant", "Oslo is sunny."), ("user", "And now?"),
        ("assistant", "Still sunny.")]


def test_a_turn_of_a_long_conversation_costs_what_a_turn_of_a_short_one_does() -> None:
    from jianmu import trim_history

    # counted in Python calls of jianmu's own code, never in time: each new user message
    # read the whole history again (the calls left without a result), so the 200th turn of
    # a conversation sent through trim_history cost more than the 10th
    turns = 200
    script: list[Any] = []
    for t in range(turns):
        script += [[{"name": "lookup", "arguments": {"city": f"c{t}"}},
                    {"name": "lookup", "arguments": {"city": f"d{t}"}}], f"Answer {t}."]
    agent = create_react_node(ScriptedLLM(script), [lookup], system_prompt="Be brief.",
                              history=[trim_history(300)])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(agent, state)
    calls: dict[int, int] = {}

    def counted() -> int:
        seen = [0]

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and "/jianmu/" in frame.f_code.co_filename.replace("\\", "/"):
                seen[0] += 1

        sys.setprofile(profile)
        try:
            assert runner.run_sync(timeout=30).ok
        finally:
            sys.setprofile(None)
        return seen[0]

    for turn in range(turns):
        if turn in (10, turns - 1):
            calls[turn] = counted()
        else:
            assert runner.run_sync(timeout=30).ok
        runner.send(f"question {turn}")
    assert len(state.get("messages")) == 5 * turns + 1
    assert calls[turns - 1] <= calls[10] * 1.02, calls
