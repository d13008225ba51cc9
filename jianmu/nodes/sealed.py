"""What a durable run records of a model turn that a guardrail may refuse (a sealed turn).

A durable run records each model turn as a step, so that a recovered run replays it and never
asks the model again. The record is read by people (`DurableEngine.steps`, the studio) and
stays in the database: a turn that a guardrail judges (the node's input or output guardrails;
a sub-agent's answer, which its caller's tool-output guardrails judge) is therefore recorded
only once they have decided, as one step, holding only what they passed:

- passed: a `PassedTurn`, the replies (more than one when a cut-off answer was continued);
- refused: a `RefusedTurn`, which guardrail refused it and why and what the turn spent, never
  the reply; a recovered run replays the refusal, asking neither the model nor the guardrails;
- a sub-agent's answer, while its caller's tool-output guardrails still have to judge it: not
  recorded here. The caller records the call once judged (`StepRecorder.settle`), holding the
  answer or the refusal that replaced it, and a recovered caller replays that record without
  running the sub-agent again.

A worker that dies while the guardrails decide leaves nothing recorded: the turn is asked again,
as any step in flight is (a step runs at least once).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from jianmu.errors import GuardrailTripped
from jianmu.llm.messages import Message, Usage
from jianmu.llm.provider import LLMResponse
from jianmu.nodes.cut_off import continue_messages, joined_reply

__all__ = ("PassedTurn", "RefusedTurn", "joined", "parts_of", "recorded")

T = TypeVar("T")


async def recorded(factory: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
    """``factory()``'s result, to be recorded as it is (`StepRecorder.settle`): a sub-agent's
    answer its caller's guardrails judged (the refusal, when they withheld it)."""
    return await factory(), True


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
    """Which guardrails refused it: ``input`` or ``output``."""
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
