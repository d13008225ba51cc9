"""What a model call in flight has spent, for a call stopped before its reply came.

A model call that is cancelled (the run stopped or timed out, the node pre-empted) after its
request went out was billed: the prompt, and whatever the model wrote before the connection
closed. The agent node puts an `InFlight` in `IN_FLIGHT` for each call it makes; the HTTP
client's hooks (`jianmu.llm._http`) say on it whether the request went out, and a stream's
assembler is kept on it to tell what came (a usage the server already sent, the text and
tool-call arguments so far). Nothing here runs per stream chunk: the assembler is read only
once the call was stopped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from jianmu.llm.messages import Usage

__all__ = ("IN_FLIGHT", "InFlight", "Received", "another_model", "answered", "passed_over",
           "request_answered", "request_sent", "request_starts", "watch_stream", "watched")

_T = TypeVar("_T")


class Received(Protocol):
    """A stream's assembler, as a stopped call reads it."""

    def received(self) -> tuple[Usage | None, int]:
        """The usage the server sent so far (``None``: none yet) and the characters of the
        reply's text, reasoning and tool-call arguments received."""
        ...


class InFlight:
    """One model call as its request and its answer went (no ``__init__``: made per turn)."""

    sent: bool | None = None
    """Whether the request went out: ``None`` when the provider says nothing of it (a
    provider of the host's own: then a stopped call counts as sent)."""
    stream: Received | None = None
    """The assembler of the answer's stream, once the answer began."""
    text_chars: int = 0
    """The characters of text deltas the caller read (a stream without an assembler here)."""
    messages: Any = None
    """The messages the call asked with."""
    tools: Any = None
    """The toolset offered with them."""
    refused: int | None = None
    """The HTTP status of the last answer that refused the request (a 429, a 503) while the
    call goes on (its retries): what a call that timed out meanwhile was waiting for."""
    model: str | None = None
    """The model a `FallbackLLM` asks now (`another_model`), which a stopped call is counted
    under; ``None``: the node's own model."""
    count_passed: Callable[[InFlight, str], object] | None = None
    """How the caller counts what a model that a `FallbackLLM` passed over spent (the call
    as that model left it, and the model's name): no reply of it will say so."""

    def release(self) -> None:
        """Let go of what the call was asked with, once it is over: a timer an HTTP library
        set during the call keeps a copy of the task's context (this call in it) until its
        deadline, and with it the messages, the tools and the run they lead to."""
        self.messages = self.tools = self.stream = self.count_passed = None


IN_FLIGHT: ContextVar[InFlight | None] = ContextVar("jianmu_llm_in_flight", default=None)
"""The call the current task makes (set by the agent node, per call)."""


def watched() -> None:
    """A provider that reports its requests begins a call: not sent until its hooks say."""
    call = IN_FLIGHT.get()
    if call is not None:
        call.sent = False


def another_model(model: str | None = None) -> None:
    """A `FallbackLLM` asks its next model (``model``, by name): what the one before said of
    its request is not this one's (a provider of the host's own says nothing: sent, once
    asked)."""
    call = IN_FLIGHT.get()
    if call is not None:
        call.model = model
        call.sent = None
        call.stream = None
        call.refused = None


def passed_over(model: str) -> None:
    """A `FallbackLLM` leaves ``model``, which failed: when the server took its request and
    did not refuse it (billed, as a stopped call is), the caller counts what it spent now,
    and the call holds nothing of it after (a last model's failure is not counted again)."""
    call = IN_FLIGHT.get()
    if call is not None and call.sent is True and call.count_passed is not None:
        call.count_passed(call, model)
        call.sent = False
        call.stream = None


def request_starts() -> None:
    """A request (the first, a retry, another model's after a fallback) is about to be sent:
    what an earlier attempt received is not this one's."""
    call = IN_FLIGHT.get()
    if call is not None:
        call.sent = False
        call.stream = None


def request_sent() -> None:
    """The request's body went out whole: the server has it, and bills it."""
    call = IN_FLIGHT.get()
    if call is not None:
        call.sent = True


def request_answered(success: bool, status: int | None = None) -> None:
    """The status line came: an error status (``status``) bills nothing (the retry that may
    follow is a request of its own), and is kept as the call's last refusal."""
    call = IN_FLIGHT.get()
    if call is not None:
        call.refused = None if success else status
        if not success:
            call.sent = False


def watch_stream(assembler: Received) -> None:
    """The answer's stream began: its assembler tells what came, if the call is stopped."""
    call = IN_FLIGHT.get()
    if call is not None:
        call.stream = assembler


async def answered(ask: Callable[[], Awaitable[_T]]) -> _T:
    """``await ask()``, its call then no longer in flight: a durable step's, whose recording
    may be stopped after the reply came (then the replay counts it, not the stopped call)."""
    reply = await ask()
    call = IN_FLIGHT.get()
    if call is not None:
        call.sent = False
    return reply
