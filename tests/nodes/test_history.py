"""History processors: what is sent is shaped, what is stored never changes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jianmu import ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.llm import Message, ScriptedLLM
from jianmu.nodes import (
    AgentState,
    MessageHistory,
    create_react_node,
    estimate_message_tokens,
    summarize_history,
    token_counter,
    trim_history,
)
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return f"value of {key}"


def call(i: int, *names: str) -> Message:
    return Message.assistant(tool_calls=[
        {"id": f"c{i}_{n}", "name": "lookup", "arguments": {"key": n}} for n in names])


def result(i: int, name: str) -> Message:
    return Message.tool(f"value of {name}", tool_call_id=f"c{i}_{name}", name="lookup")


def pairs_whole(messages: Sequence[Message]) -> bool:
    """Every tool result follows the call that asked for it; every call has all its results."""
    asked: dict[str, int] = {}
    answered: set[str] = set()
    for index, m in enumerate(messages):
        for c in m.tool_calls:
            asked[c.id] = index
        if m.role == "tool":
            if m.tool_call_id not in asked or asked[m.tool_call_id] > index:
                return False
            answered.add(m.tool_call_id or "")
    return set(asked) == answered


def tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_message_tokens(m) for m in messages)


# -- trim_history on its own -------------------------------------------------------------------


def history() -> list[Message]:
    return [
        Message.user("the task: find a, b and c"),
        call(1, "a"), result(1, "a"),
        Message.assistant("found a"),
        Message.user("and b and c?"),
        call(2, "b", "c"), result(2, "b"), result(2, "c"),
        Message.assistant("b and c found"),
    ]


async def test_trim_keeps_system_first_user_and_the_newest_whole_turns() -> None:
    stored = history()
    view = MessageHistory([Message.system("be brief")], stored)
    cost = tokens(stored[5:]) + tokens([Message.system("be brief"), stored[0]])
    sent = await trim_history(max_tokens=cost + 1)(view)
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert sent[1] is stored[0] and pairs_whole(sent)
    # one token fewer: the call with two results cannot be cut in half; it goes whole
    sent = await trim_history(max_tokens=cost - 1)(view)
    assert [m.role for m in sent] == ["system", "user", "assistant"] and pairs_whole(sent)
    assert len(stored) == 9  # nothing stored changed


async def test_trim_drops_results_whose_call_is_gone_and_calls_missing_a_result() -> None:
    stored = [Message.user("go"), result(0, "x"), Message.assistant("hm"),
              call(3, "p", "q"), result(3, "p")]  # q has not answered yet
    sent = await trim_history(max_tokens=10_000)(MessageHistory([], stored))
    assert [m.role for m in sent] == ["user", "assistant"] and pairs_whole(sent)


async def test_the_count_form_and_keep_first_user_off() -> None:
    stored = history()
    sent = await trim_history(max_messages=4, keep_first_user=False)(MessageHistory([], stored))
    assert sent == stored[5:]  # the two-result call and its answer: 4 messages, whole
    sent = await trim_history(max_messages=3)(MessageHistory([], stored))
    assert sent == [stored[0], stored[-1]]  # the first user, then what fits whole


def test_the_offline_estimate_counts_cjk_emoji_and_odd_text_near_a_real_tokenizer() -> None:
    # a byte-level tokenizer (cl100k, o200k, Claude's) spends about a token per CJK
    # character and one or more per emoji: a token per four characters let a Chinese
    # history through trim_history(max_tokens=N) four times over
    chinese = "我们明天在北京开会讨论项目的进展情况" * 50  # 900 characters
    assert estimate_message_tokens(Message.user(chinese)) >= len(chinese)
    emoji = "😀👍🎉" * 100
    assert estimate_message_tokens(Message.user(emoji)) >= len(emoji)
    mixed = "Meet at 会议室 tomorrow 🙂"
    assert estimate_message_tokens(Message.user(mixed)) > estimate_message_tokens(
        Message.user("Meet at xyz tomorrow x"))
    # English stays a token per four characters; no text is free, nothing odd raises
    assert estimate_message_tokens(Message.user("abc " * 100)) == 100 + 4
    assert estimate_message_tokens(Message.user("a")) == 1 + 4
    assert estimate_message_tokens(Message.user("\ud800 lone")) > 4
    # base64, hex and minified JSON split finer than prose: a token per three characters
    blob = "iVBORw0KGgoAAAANSUhEUgAAB4AAAAQ4CAIAAABnsVYU" * 4_000
    assert estimate_message_tokens(Message.user(blob)) >= len(blob) // 3
    assert estimate_message_tokens(Message.user("word " * 1_000)) == 1_250 + 4  # prose
    # trimmed to a budget, a Chinese history sends about what the budget says, not 4x it
    turns = [Message.user(chinese[:100]) if i % 2 == 0 else Message.assistant(chinese[:100])
             for i in range(40)]
    sent = trim_history(max_tokens=1_000, keep_first_user=False).trim(turns)
    assert sum(len(m.content or "") for m in sent) <= 1_000


def _png(width: int, height: int) -> str:
    """A PNG's first bytes, its size in the header, as base64."""
    import base64
    import struct
    import zlib

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", 13) + b"IHDR" + header + struct.pack(">I", zlib.crc32(
        b"IHDR" + header))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk + bytes(64)).decode()


def test_a_screenshot_counts_what_a_model_charges_for_it_not_a_flat_85() -> None:
    from jianmu.tools.calls import MediaPart

    # Claude charges about 1,600 tokens for a 1920x1080 screenshot, GPT-4o about 1,100:
    # counted 85 each, a history of screenshots went through a budget many times over
    shot = MediaPart(kind="image", mime_type="image/png", data=_png(1920, 1080))
    message = Message.tool("the screen", tool_call_id="c1", media=[shot])
    assert estimate_message_tokens(message) >= 1_500
    icon = MediaPart(kind="image", mime_type="image/png", data=_png(32, 32))
    assert 85 <= estimate_message_tokens(Message(role="user", content="x", media=[icon])) < 400
    assert token_counter(str.split)(message) >= 1_500  # a plugged text counter too
    turns: list[Message] = [Message.user("watch the screen")]
    for i in range(30):
        turns += [call(i, "s"), Message.tool("shot", tool_call_id=f"c{i}_s", media=[shot])]
    turns.append(Message.assistant("seen"))
    sent = trim_history(max_tokens=8_000).trim(turns)
    assert 1 <= sum(len(m.media) for m in sent) <= 5 and pairs_whole(sent)


def test_the_thinking_a_tool_loop_sends_back_counts_against_the_budget() -> None:
    # Anthropic takes back the thinking of each tool-use turn since the user's last message
    # (and counts it as input), as DeepSeek's reasoning_content: uncounted, a loop of long
    # thoughts went through trim_history's budget (and past the model's context)
    thought = [{"type": "thinking", "thinking": "Let me weigh it. " * 250, "signature": "s"}]
    turns: list[Message] = [Message.user("an old question"), Message.assistant("an old answer"),
                            Message.user("the task")]
    for i in range(12):
        turns += [Message(role="assistant", tool_calls=call(i, "k").tool_calls,
                          reasoning=thought), result(i, "k")]
    sent = trim_history(max_tokens=6_000).trim(turns)
    loop = [m for m in sent if m.reasoning]
    assert 1 <= len(loop) <= 6 and pairs_whole(sent)  # about 1,060 tokens a turn
    # the thinking of turns before the user's last message is not sent back: not counted
    old = [Message.user("first"),
           *[m for i in range(12) for m in (Message(role="assistant", tool_calls=call(
               i, "k").tool_calls, reasoning=thought), result(i, "k"))],
           Message.assistant("done"), Message.user("now this")]
    assert len(trim_history(max_tokens=6_000).trim(old)) == len(old)


def test_a_counter_can_be_plugged_in() -> None:
    counter = token_counter(str.split)  # a "tokenizer": words
    assert counter(Message.user("one two three")) == 3 + 4
    with pytest.raises(ValueError, match="max_tokens or max_messages"):
        trim_history()
    with pytest.raises(ValueError, match="max_tokens must be an integer >= 1"):
        trim_history(0)


def test_the_view_reads_like_a_list_and_cannot_be_changed() -> None:
    stored = history()
    view = MessageHistory([Message.system("s")], stored)
    assert len(view) == 10 and view[0].role == "system" and view[-1] is stored[-1]
    assert view[1:3] == stored[0:2] and view[-2:] == stored[-2:]
    extra = Message.user("z")
    assert view + [extra] == [Message.system("s"), *stored, extra]  # noqa: RUF005
    assert view.copy() == list(view)
    with pytest.raises(TypeError):
        view[1] = Message.user("x")  # type: ignore[index]


# -- through the runner ------------------------------------------------------------------------


def test_a_500_turn_conversation_with_200_tool_calls_fits_every_request() -> None:
    budget = 400
    script: list[Any] = []
    for turn in range(500):
        if turn % 5 in (0, 3):  # 200 turns call a tool first
            script.append([{"name": "lookup", "arguments": {"key": f"k{turn}"}}])
        script.append(f"answer {turn}")
    llm = ScriptedLLM(script)
    agent = create_react_node(llm, [lookup], system_prompt="You answer in one line.",
                              history=[trim_history(max_tokens=budget)])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "turn 0"}]})
    runner = ReactiveRunner(agent, state)
    for turn in range(500):
        if turn:
            runner.send(f"turn {turn}")
        assert runner.run_sync(timeout=60).ok
    stored = state.get("messages")
    assert [m.content for m in stored if m.role == "user"] == [f"turn {t}" for t in range(500)]
    assert len(stored) == 500 + 500 + 2 * 200 and pairs_whole(stored)
    assert len(llm.requests) == 700
    for request in llm.requests:
        sent = list(request.messages)
        assert tokens(sent) <= budget, sent
        assert pairs_whole(sent)
        assert sent[0].role == "system" and sent[1].content == "turn 0"  # the task stays
    assert llm.requests[-1].messages[-1].content == "turn 499"


async def test_max_messages_is_trims_count_form() -> None:
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"key": "a"}}],
                       [{"name": "lookup", "arguments": {"key": "b"}},
                        {"name": "lookup", "arguments": {"key": "c"}}], "done"])
    agent = create_react_node(llm, [lookup], max_messages=4)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    assert (await ReactiveRunner(agent, state).run()).ok
    last = list(llm.requests[-1].messages)
    # the task, then the newest call with both results; the older pair goes whole
    assert [m.role for m in last] == ["user", "assistant", "tool", "tool"]
    assert pairs_whole(last) and last[0].content == "go"
    assert len(state.get("messages")) == 1 + 2 + 3 + 1


async def test_processors_compose_sync_and_async() -> None:
    seen: list[int] = []

    def count(messages: Sequence[Message]) -> list[Message]:
        seen.append(len(messages))
        return list(messages)

    async def shout(messages: Sequence[Message]) -> list[Message]:
        return [m.model_copy(update={"content": (m.content or "").upper()})
                if m.role == "user" else m for m in messages]

    llm = ScriptedLLM(["ok"])
    agent = create_react_node(llm, [], system_prompt="sys", history=[count, shout])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    assert (await ReactiveRunner(agent, state).run()).ok
    assert seen == [2]  # the system prompt and the stored message
    assert [m.content for m in llm.requests[0].messages] == ["sys", "HI"]
    assert state.get("messages")[0].content == "hi"  # stored as it was


async def test_a_processor_that_raises_fails_the_run_naming_it() -> None:
    def broken(messages: Sequence[Message]) -> list[Message]:
        raise RuntimeError("no budget table")

    llm = ScriptedLLM(["never"])
    agent = create_react_node(llm, [], history=[broken])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    result = await ReactiveRunner(agent, state).run()
    assert result.status is RunStatus.FAILURE
    assert "HistoryProcessorError" in (result.error or "")
    assert "history processor" in (result.error or "") and "broken" in (result.error or "")
    assert "RuntimeError: no budget table" in (result.error or "")
    assert llm.requests == [] and len(state.get("messages")) == 1  # nothing sent, nothing lost


@pytest.mark.parametrize("returned", ["text", [{"role": "user", "content": "x"}], None])
async def test_a_processor_that_returns_no_messages_is_named(returned: Any) -> None:
    def odd(messages: Sequence[Message]) -> Any:
        return returned

    agent = create_react_node(ScriptedLLM(["x"]), [], history=[odd])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    result = await ReactiveRunner(agent, state).run()
    assert result.status is RunStatus.FAILURE
    assert "HistoryProcessorError: history processor" in (result.error or "")
    assert ".odd'" in (result.error or "")


def test_a_history_entry_that_is_not_a_processor_is_refused_when_built() -> None:
    with pytest.raises(TypeError, match=r"history=\[\.\.\.\] takes processors"):
        create_react_node(ScriptedLLM([]), [], history=["trim"])  # type: ignore[list-item]


# -- summarize_history -------------------------------------------------------------------------


def _summarizing(summarizer: ScriptedLLM, answers: list[str], budget: int) -> Any:
    return create_react_node(
        ScriptedLLM(answers), [], name="chat",
        history=[summarize_history(summarizer, max_tokens=budget, keep_last=2)],
    )


def _talk(runner: ReactiveRunner, turns: Sequence[str]) -> None:
    for text in turns:
        runner.send(text)
        assert runner.run_sync(timeout=30).ok


def test_a_summary_is_made_once_per_overflow_and_kept_in_the_state() -> None:
    summarizer = ScriptedLLM(["S1: the user counts.", "S2: still counting."])
    agent = _summarizing(summarizer, [f"reply {i} " + "x" * 40 for i in range(12)], budget=120)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "count"}]})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner = ReactiveRunner(agent, state, tracer_provider=provider)
    events: list[Any] = []
    runner.ctx.events.subscribe("history.*", events.append)
    assert runner.run_sync(timeout=30).ok
    turns = iter(f"turn {i}" for i in range(1, 12))
    while len(summarizer.requests) == 0:
        _talk(runner, [next(turns)])
    summary = state.get("history_summaries")["summary"]
    made_at = len(state.get("messages"))
    assert summary.text == "S1: the user counts." and 0 < summary.upto < made_at
    usage_after_summary = state.get("usage").total_tokens
    # the next turn reuses it: no second summary until the history overflows again
    _talk(runner, [next(turns)])
    assert len(summarizer.requests) == 1
    sent = agent.llm_node.llm.requests[-1].messages  # type: ignore[union-attr]
    assert sent[0].content == "Summary of the conversation so far:\nS1: the user counts."
    assert state.get("usage").total_tokens > usage_after_summary
    while len(summarizer.requests) == 1:
        _talk(runner, [next(turns)])
    assert "S1: the user counts." in (summarizer.requests[1].messages[1].content or "")
    assert state.get("history_summaries")["summary"].text == "S2: still counting."
    assert len([e for e in events if e.name == "history.summarized"]) == 2
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("summarize_history")]
    assert len(spans) == 2 and spans[0].parent is not None  # inside the run's span
    assert len([m for m in state.get("messages") if m.role == "user"]) > 3  # all kept


def test_the_summary_is_reused_after_a_restore(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    summarizer = ScriptedLLM(["S1: counting."])
    agent = _summarizing(summarizer, ["r0 " + "y" * 40] * 6, budget=100)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "count"}]})
    runner = ReactiveRunner(agent, state, checkpointer=SQLiteCheckpointer(db), run_id="sum1")
    assert runner.run_sync(timeout=30).ok
    turn = 0
    while not summarizer.requests:
        turn += 1
        _talk(runner, [f"t{turn}"])
    later = ScriptedLLM([])
    restored = ReactiveRunner.restore(_summarizing(later, ["r1"], budget=100),
                                      SQLiteCheckpointer(db), "sum1",
                                      state_manager=StateManager(AgentState))
    restored.send("one more")
    assert restored.run_sync(timeout=30).ok
    assert later.requests == []  # the kept summary served; nobody summarized again
    answered = restored.root.llm_node.llm.requests[0].messages  # type: ignore[attr-defined]
    assert answered[0].content == "Summary of the conversation so far:\nS1: counting."


def test_a_conversation_continued_by_agent_history_is_not_summarized_anew_each_run() -> None:
    from jianmu import Agent

    # each Agent.run starts a fresh state: the summary kept there was lost, and every run
    # summarized the whole older history again (a model call per run, its prompt growing
    # with the conversation until the summarizer's own context overflowed)
    summarizer = ScriptedLLM([f"S{i}: counting." for i in range(40)])
    processor = summarize_history(summarizer, max_tokens=60, keep_last=2)
    agent = Agent(ScriptedLLM([f"Answer {i}." for i in range(40)]),
                  history_processors=[processor])
    history: Sequence[Message] | None = None
    for turn in range(20):
        result = agent.run_sync(f"question number {turn} with some words", history=history)
        assert result.ok, result.error
        history = result.messages
    assert len(history or ()) == 40
    assert len(summarizer.requests) <= 10  # once per overflow, not once per run
    # each summary folds the last one and the turns since, not the whole conversation
    transcripts = [len(r.messages[1].content or "") for r in summarizer.requests]
    assert max(transcripts) < 3 * transcripts[0]
    # what is sent still covers the conversation: the summary, then the newest turns
    sent = agent.llm.requests[-1].messages  # type: ignore[union-attr]
    assert (sent[0].content or "").startswith("Summary of the conversation so far:\nS")
    assert sent[-1].content == "question number 19 with some words"


def test_summarize_then_trim_compose() -> None:
    summarizer = ScriptedLLM(["S: counting."])
    llm = ScriptedLLM([f"reply {i} " + "z" * 40 for i in range(8)])
    agent = create_react_node(llm, [], history=[
        summarize_history(summarizer, max_tokens=120, keep_last=2),
        trim_history(max_tokens=90),
    ])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "count"}]})
    runner = ReactiveRunner(agent, state)
    assert runner.run_sync(timeout=30).ok
    _talk(runner, [f"t{i}" for i in range(1, 8)])
    assert len(summarizer.requests) >= 1
    for request in llm.requests:
        assert tokens(list(request.messages)) <= 90 or len(request.messages) <= 3
        assert pairs_whole(list(request.messages))
    assert len(state.get("messages")) == 16
