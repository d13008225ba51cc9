"""What a durable run records of a model turn that a guardrail may refuse (a sealed turn).

A durable run records each model turn as a step, so that a recovered run replays it and never
asks the model again. The record is read by people (`DurableEngine.steps`, the studio) and
stays in the database: a turn that a guardrail judges is therefore one step, whose model calls
(continuations included) and guardrails run inside it, and whose record holds only the outcome:

- passed: a `PassedTurn`, the replies (more than one when a cut-off answer was continued);
- refused: a `RefusedTurn`, which guardrail refused it and why and what the turn spent, never
  the reply. A recovered run replays the refusal, asking neither the model nor the guardrails.

The guardrails that judge a turn: the node's input guardrails (of the user's message, whose
reply a trip discards) and output guardrails (of the answer), and for a sub-agent's answer its
caller's tool-output guardrails, which `AgentTool` hands the sub-run as an `AnswerJudge`; a
withheld answer ends the sub-run with the trip, and the caller reads the same refusal it would
have made itself. A worker that dies while they decide leaves nothing recorded: the turn is asked
again, as any step in flight is (a step runs at least once).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jianmu.errors import GuardrailTripped
from jianmu.llm.messages import Message, Usage
from jianmu.llm.provider import LLMResponse
from jianmu.nodes.cut_off import continue_messages, joined_reply

__all__ = ("AnswerJudge", "PassedTurn", "RefusedTurn", "joined", "parts_of")

AnswerJudge = Callable[[Any], Awaitable[GuardrailTripped | None]]
"""A sub-agent's answer (its ``final_output``, else its ``final_answer``) -> the trip of the
caller's tool-output guardrails on it as the call's result, or None when they pass it."""


def joined(parts: Sequence[tuple[LLMResponse, list[Message]]]) -> LLMResponse:
    """The reply of a turn made of ``parts``: the one reply, or the continued ones joined."""
    return parts[0][0] if len(parts) == 1 else joined_reply([part for part, _ in parts])


def parts_of(replies: Sequence[LLMResponse],
             messages: list[Message]) -> list[tuple[LLMResponse, list[Message]]]:
    """Each recorded reply with what it was asked, as the turn asked it: ``messages``, then
    for each continuation the request to go on from the text so far."""
    parts: list[tuple[LLMResponse, list[Message]]] = []
    text = ""
    for reply in replies:
        parts.append((reply, messages if not parts else continue_messages(messages, text)))
        text += reply.text
    return parts


@dataclass(frozen=True)
class PassedTurn:
    """A judged turn its guardrails passed: its replies, in order."""

    replies: tuple[LLMResponse, ...]

    @property
    def message(self) -> Message:
        """The turn's reply message (as a model step shows it: the studio's timeline)."""
        return joined([(r, []) for r in self.replies]).message

    @property
    def usage(self) -> Usage | None:
        """What the turn's calls spent, as the server said (None: unknown)."""
        return joined([(r, []) for r in self.replies]).usage


@dataclass(frozen=True)
class RefusedTurn:
    """A judged turn a guardrail refused: the refusal in place of the reply, which is not kept."""

    guardrail: str
    reason: str
    kind: str
    """Which guardrails refused it: ``input``, ``output``, or ``tool_output`` (a sub-agent's
    answer, withheld by its caller's)."""
    model: str
    """The model that answered."""
    usage: Usage
    """What the turn spent (counted against budgets on replay too)."""
    tool_calls: tuple[str, ...] = ()
    """The names of the tools the refused reply called (none of them ran)."""

    @classmethod
    def of(cls, tripped: GuardrailTripped, model: str, usage: Usage,
           tool_calls: Sequence[str] = ()) -> RefusedTurn:
        """The record of a turn that ``tripped``."""
        return cls(tripped.guardrail, tripped.reason, tripped.kind, model, usage,
                   tuple(tool_calls))

    def tripped(self) -> GuardrailTripped:
        """The error the node fails with, as when the guardrail tripped."""
        return GuardrailTripped(self.guardrail, self.reason, self.kind)

    def __str__(self) -> str:
        return (f"refused by {self.kind} guardrail {self.guardrail!r} ({self.reason}); "
                "the reply is not kept")
