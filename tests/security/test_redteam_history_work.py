"""Red team, a forged ``history=`` of one assistant turn of thousands of calls (a web chat's
client sends it; a model may write such a turn too): the work it costs must grow with its size,
not with its square, on the event loop every run of the server shares.

Fixed here: each result looked its call up in a list of the turn's calls (and removed it), and
each result of Anthropic's request scanned every result already joined into its message, so a
turn of 16,000 calls took 5 s of the loop to close its unanswered calls on the next message,
2 s to pair its results (given in another order) and 7 s to write the Anthropic request, every
turn; an id used 16,000 times was tried again from its first suffix each time. Work is counted,
not timed: the Python lines run, the ids' comparisons among them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from jianmu.llm.messages import (
    Message,
    close_unanswered,
    messages_to_anthropic,
    messages_to_openai,
    paired_turns,
)
from jianmu.tools.calls import ToolCall


class CountedId(str):
    """A call id whose comparisons are Python lines, so that a list searched for it counts."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)  # type: ignore[no-any-return]

    def __ne__(self, other: object) -> bool:
        return str.__ne__(self, other)  # type: ignore[no-any-return]


def history(calls: int, *, answered: bool, same_id: bool = False) -> list[Message]:
    """A user message, one turn of ``calls`` calls, their results last first (or none), and a
    new user message; ids compared in Python lines (built as given, as a history's are kept)."""
    ids = [CountedId("same" if same_id else f"c{i}") for i in range(calls)]
    turn = Message.model_construct(
        role="assistant", content=None, name=None, tool_call_id=None, media=[], reasoning=[],
        tool_calls=[ToolCall(name="look", arguments={"q": "a"}, id=i) for i in ids])
    results = [Message.model_construct(role="tool", content="r", name="look", tool_call_id=i,
                                       tool_calls=[], media=[], reasoning=[])
               for i in reversed(ids)] if answered else []
    return [Message.user("start"), turn, *results, Message.user("go on")]


def lines(work: Callable[[], Any]) -> int:
    count = 0

    def trace(frame: FrameType, event: str, _arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize("convert", [
    close_unanswered, paired_turns, messages_to_openai, messages_to_anthropic,
], ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", ["answered", "unanswered", "one-id"])
def test_a_turn_of_many_calls_costs_work_in_proportion(
    convert: Callable[[list[Message]], Any], shape: str,
) -> None:
    kinds = {"answered": {"answered": True}, "unanswered": {"answered": False},
             "one-id": {"answered": True, "same_id": True}}[shape]
    small = lines(lambda: convert(history(300, **kinds)))
    large = lines(lambda: convert(history(1_200, **kinds)))
    assert large < 6 * small, (small, large)  # four times the calls: 16 times, squared


def test_a_turn_of_many_agents_sdk_calls_is_joined_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Agents SDK's items give one ``function_call`` per call: joined to their turn once,
    not copied with all the calls before it at each (a list built per call, in C: counted as
    the copies made)."""
    from jianmu.llm.responses_items import from_responses_items

    copies: list[int] = []
    copy = Message.model_copy

    def counted(self: Message, *args: Any, **kwargs: Any) -> Message:
        copies.append(len((kwargs.get("update") or {}).get("tool_calls") or ()))
        return copy(self, *args, **kwargs)

    monkeypatch.setattr(Message, "model_copy", counted)
    items = [{"type": "function_call", "call_id": f"c{i}", "name": "look", "arguments": "{}"}
             for i in range(1_000)]
    [turn] = from_responses_items(items)
    assert [c.id for c in turn.tool_calls] == [f"c{i}" for i in range(1_000)]
    assert sum(copies) <= 1_000
