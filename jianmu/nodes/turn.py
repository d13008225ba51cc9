"""What one model turn writes to the state: tool calls to run, an answer (checked against the
output type), or a hand-off to another agent (`turn_update`, with the reply's canonical calls).
Calls to the answer tools and to hand-off tools never reach the executor: each gets its one tool
message here, so every call in the history keeps its result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jianmu.llm.messages import Message
from jianmu.nodes.output import Checked, OutputSpec, extract_json
from jianmu.tools.calls import ToolCall

if TYPE_CHECKING:
    from jianmu.nodes.handoffs import Handoff
    from jianmu.state import StateView

__all__ = ("TurnUpdate", "turn_update")

_ANSWERED = "Final answer received."
_NOT_RUN = "Not run: {reason}."


@dataclass
class TurnUpdate:
    """The state update of one turn, and the error to fail with after writing it."""

    values: dict[str, Any]
    error: Exception | None = None
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Events to emit once the update is written."""
    refused_answer: str | None = None
    """The text of an answer its output type refused: written all the same, to be told why,
    or quoted by the error of the last try, which the output guardrails judge first."""
    beside: str | None = None
    """Text the model wrote beside its typed answer (prose by the answer tool's call, words
    around a JSON answer): written with the answer, so the output guardrails judge it too."""


def _not_run(calls: Sequence[ToolCall], skip: ToolCall, reason: str) -> list[Message]:
    """A tool message for every call but ``skip``: the turn ended before they ran."""
    text = _NOT_RUN.format(reason=reason)
    return [Message.tool(text, tool_call_id=c.id, name=c.name) for c in calls if c is not skip]


def turn_update(
    message: Message,
    calls: list[ToolCall],
    *,
    state: StateView,
    output: OutputSpec | None,
    handoffs: Sequence[Handoff],
    agent: str | None,
) -> TurnUpdate:
    """The update for a turn whose reply is ``message`` with canonical ``calls``.

    Without an output type or hand-offs it is the plain ReAct step: the calls go to
    ``actions``, or the text becomes ``final_answer``.
    """
    if output is None and not handoffs:  # the plain ReAct step, every turn of most agents
        if calls:
            return TurnUpdate({"messages": [message], "actions": calls})
        return TurnUpdate({"messages": [message], "actions": [],
                           "final_answer": message.content or "", "done": True})
    if output is not None and output.mode == "tool":
        answer = next((c for c in calls if c.name in output.tool_names), None)
        if answer is not None:
            return _checked(message, calls, output.check_call(answer), output, state, answer)
    by_tool = {h.tool.name: h for h in handoffs}
    transfer = next((c for c in calls if c.name in by_tool), None)
    if transfer is not None:
        return _handoff(message, calls, transfer, by_tool[transfer.name], agent)
    if calls:
        return TurnUpdate({"messages": [message], "actions": calls})
    text = message.content or ""
    if output is None:
        return TurnUpdate({"messages": [message], "actions": [], "final_answer": text,
                           "done": True})
    return _checked(message, calls, output.text_answer(text), output, state, None)


def _checked(
    message: Message,
    calls: list[ToolCall],
    checked: Checked,
    output: OutputSpec,
    state: StateView,
    answer: ToolCall | None,
) -> TurnUpdate:
    """An answer that validated ends the loop; one that did not is told why, or fails the
    loop once its retries are used up."""
    if checked.ok:
        replies = [] if answer is None else [
            Message.tool(_ANSWERED, tool_call_id=answer.id, name=answer.name),
            *_not_run(calls, answer, "the final answer was given in the same turn"),
        ]
        return TurnUpdate({
            "messages": [message, *replies], "actions": [], "final_answer": checked.raw,
            "final_output": checked.value, "done": True, "failed_outputs": 0,
        }, events=[("output.validated", {"type": output.type_name})],
            beside=_beside(message, checked, answer))
    failed = (state.get("failed_outputs") or 0) + 1
    prompt = output.retry_prompt(checked, called=answer is not None)
    if answer is not None:
        replies = [
            Message.tool(prompt, tool_call_id=answer.id, name=answer.name),
            *_not_run(calls, answer, "the final answer was not accepted"),
        ]
    else:
        replies = [Message.user(prompt)]
    update = TurnUpdate(
        {"messages": [message, *replies], "actions": [], "failed_outputs": failed},
        refused_answer=checked.raw,
        # a refused text answer is judged whole (``refused_answer``); by the tool's call, its
        # prose is apart
        beside=None if answer is None else _beside(message, checked, answer),
        events=[("output.invalid", {
            "type": output.type_name, "attempt": failed,
            "problems": [f"{p}: {m}" for p, m in checked.problems],
        })],
    )
    if failed > output.retries:
        update.error = output.failure(checked, failed)
    return update


def _beside(message: Message, checked: Checked, answer: ToolCall | None) -> str | None:
    """The text of a typed answer's turn beyond the answer itself, None if there is none: the
    prose beside the answer tool's call, or a text answer whole when it holds more than its
    JSON (a bare JSON answer, fenced or not, is the typed object the guardrails judge)."""
    if answer is not None:
        text = message.content or ""
        return text if text.strip() else None
    raw = checked.raw
    if isinstance(checked.value, str) and checked.value == raw:
        return None  # the text is the answer, judged as it
    leftover = raw.replace(extract_json(raw), "", 1).strip(" \t\r\n`")
    return None if not leftover or leftover.lower() == "json" else raw


def _handoff(
    message: Message, calls: list[ToolCall], transfer: ToolCall, handoff: Handoff,
    agent: str | None,
) -> TurnUpdate:
    """The conversation goes to the hand-off's agent: one tool message says so."""
    target = handoff.agent_name
    said = Message.tool(f"Transferred to {target}.", tool_call_id=transfer.id,
                        name=transfer.name)
    others = _not_run(calls, transfer, f"the conversation was handed to {target}")
    return TurnUpdate(
        {"messages": [message, said, *others], "actions": [], "active_agent": target},
        events=[("agent.handoff", {"source": agent, "target": target,
                                   "tool": transfer.name, "call_id": transfer.id})],
    )
