"""`GuardedTurn`: the guardrails of an agent's model turn (`jianmu.guard.guardrails`).

The input guardrails read the user messages the turn answers while the model is asked
(`_beside`: a trip cancels the call), those that say ``run_in_parallel = False`` before it is
(`_first_passed`: a trip sends nothing); the output ones read its answer, or the text so far of
one the token limit cut off; a trip fails the node, and the user messages the input ones
refused are withheld in the conversation (`WITHHELD`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any

from py_trees.common import Status

from jianmu.constraints import Constraints
from jianmu.errors import GuardrailTripped, JianmuError, OutputTruncatedError
from jianmu.guard.guardrails import (
    Guardrail,
    configured_guardrails,
    run_guardrails,
    runs_first,
)
from jianmu.llm.messages import Message
from jianmu.runtime.async_node import AsyncNode
from jianmu.runtime.eager import started_task

if TYPE_CHECKING:
    from jianmu.llm.provider import LLMResponse
    from jianmu.nodes.turn import TurnUpdate

__all__ = (
    "WITHHELD", "GuardedTurn", "latest_user_messages", "still_checking", "tripped_at_once",
)


class GuardedTurn(AsyncNode):
    """An async node whose model turn passes guardrails (`jianmu.nodes.AgentLLMNode`)."""

    input_guardrails: tuple[Guardrail, ...] = ()
    """Guardrails of the user messages the turn answers."""
    output_guardrails: tuple[Guardrail, ...] = ()
    """Guardrails of the final answer (the typed one with ``output``)."""
    output: Any = None
    """The answer's type, if typed."""
    _passes: list[tuple[Message, tuple[Guardrail, ...]] | None]
    """One cell: the latest user message the input guardrails passed, and which ones did;
    shared by the agents of a hand-off team, who answer one conversation, so a message one
    passed is not checked again by the next (a moderation service paid again)."""
    _gate: asyncio.Future[None] | None = None
    """Done once the input guardrails that run before the model is asked passed (`runs_first`);
    ``None`` when none of this turn's does."""
    _checked_turn = False
    """Whether a guardrail checks this turn's text: then it is not streamed."""
    _checked_later = False
    """Whether a guardrail checks this turn's text once the model answered (an output one, a
    caller's tool-output one): then it is not streamed, whatever the input ones did."""

    async def _judge(self, turn: TurnUpdate, checks: asyncio.Future[GuardrailTripped | None] | None,
                     constraints: Constraints) -> GuardrailTripped | None:
        """The trip of the turn's guardrails: the input ones (every one passed before any call
        is written), then for an answer the output ones; None when they all passed."""
        tripped = None if checks is None else await checks
        # half an answer, cut off at the token limit, is written and kept in the error too;
        # so is the last one its output type refused (the error quotes it). One refused
        # before is told why, not judged: a guardrail of the typed object fails on its text
        cut = turn.error.text if isinstance(turn.error, OutputTruncatedError) \
            else turn.refused_answer if turn.error is not None else None
        if tripped is None and (turn.values.get("done") or cut is not None) and (
            self.output_guardrails or constraints.guard.guardrails.output
            or self.ctx.guardrails.get("output")
        ):
            tripped = await self._check_output(constraints, turn.values, cut)
            if tripped is None and turn.beside is not None:  # written with it: judged too
                tripped = await self._check_output(constraints, turn.values, turn.beside)
        return tripped

    def _check_input(
        self, constraints: Constraints
    ) -> asyncio.Future[GuardrailTripped | None] | None:
        """The input guardrails on the latest user messages (`latest_user_messages`), started
        as a task, its first step taken now (``None``: none, or the latest is the one they
        already passed): guardrails that answer at once are done before the model is asked."""
        self._gate = None
        unanswered = latest_user_messages(self.state.get("messages") or [])
        if not unanswered:
            return None
        guardrails = configured_guardrails("input", self.input_guardrails, constraints,
                                           self.ctx.guardrails)
        passed = self._passes[0]
        if passed is not None and passed[0] is unanswered[-1] and passed[1] == guardrails:
            return None
        first = tuple(g for g in guardrails if runs_first(g))
        if first:  # the model is asked once they passed: their trip sends nothing
            self._gate = asyncio.get_running_loop().create_future()
        return started_task(self._input_checked(
            guardrails, unanswered, constraints.guard.guardrails.timeout_s, first))

    def _input_passed(self, constraints: Constraints) -> None:
        """The latest user message as the input guardrails passed it (a sealed turn they
        passed, replayed without running them), so no later turn checks it again."""
        latest = next(
            (m for m in reversed(self.state.get("messages") or []) if m.role == "user"), None
        )
        if latest is not None:
            self._passes[0] = (latest, configured_guardrails(
                "input", self.input_guardrails, constraints, self.ctx.guardrails))

    async def _input_checked(
        self, guardrails: Sequence[Guardrail], messages: Sequence[Message],
        timeout: float | None, first: Sequence[Guardrail] = (),
    ) -> GuardrailTripped | None:
        """The first trip of ``guardrails`` on ``messages``; those of them in ``first`` (run
        before the model is asked) on every message before the others, the gate opened then.
        The note of what passed keeps ``guardrails`` as configured, which the next turn's are
        compared with."""
        gate = self._gate
        groups = (guardrails,) if not first else (
            first, tuple(g for g in guardrails if not runs_first(g)))
        for group in groups:
            for message in messages:  # each, oldest first: the model reads them all
                found = await run_guardrails("input", group, self.ctx, message.content or "",
                                             self.events, timeout=timeout)
                if found is not None:
                    return GuardrailTripped(found[0], found[1].reason, "input",
                                            info=found[1].info)
            if gate is not None and not gate.done():  # the model may be asked now
                gate.set_result(None)
        self._passes[0] = (messages[-1], tuple(guardrails))
        return None

    async def _first_passed(self, checks: asyncio.Future[GuardrailTripped | None]) -> None:
        """Return once the input guardrails that run before the model is asked passed
        (`runs_first`); raise their trip, so the request never goes out."""
        gate, self._gate = self._gate, None
        if gate is not None and not gate.done() and not checks.done():
            try:
                await asyncio.wait((gate, checks), return_when=asyncio.FIRST_COMPLETED)
            except BaseException:  # halted, the run cancelled: the turn stops
                checks.cancel()
                raise
        found = _tripwire(checks)
        if found is not None:
            raise found
        # passed before the model was asked: its text streams, unless others still check it
        self._checked_turn = self._checked_later or still_checking(checks)

    async def _beside(
        self, reply: Awaitable[LLMResponse], checks: asyncio.Future[GuardrailTripped | None]
    ) -> LLMResponse:
        """The model's reply, asked while the input guardrails run; a trip that comes first
        cancels the call (as `asyncio.timeout` does: no task of its own for the call) and is
        raised."""
        if checks.done() and _tripwire(checks) is None:  # passed at once (`started_task`)
            return await reply
        task = asyncio.current_task()
        racing = True

        def trip(done: asyncio.Future[GuardrailTripped | None]) -> None:
            if racing and task is not None and _tripwire(done) is not None:
                task.cancel()

        checks.add_done_callback(trip)
        try:
            return await reply
        except BaseException as exc:
            found = _tripwire(checks)
            if found is not None:  # a trip is the turn's failure, whatever the call did
                if not isinstance(exc, asyncio.CancelledError):
                    raise found from exc
                if task is not None and task.uncancel() == 0:  # our cancel, not a halt
                    raise found from None
            checks.cancel()  # the call failed, or the node was halted: the turn stops
            raise
        finally:
            racing = False

    async def _check_output(
        self, constraints: Constraints, values: dict[str, Any], text: str | None = None
    ) -> GuardrailTripped | None:
        """The trip of the output guardrails on ``text`` (a cut-off or refused answer's, the
        prose beside a typed one), else on the answer (the typed object with an output type)."""
        guardrails = configured_guardrails("output", self.output_guardrails, constraints,
                                           self.ctx.guardrails)
        value = text if text is not None else values.get(
            "final_output") if self.output is not None else values.get("final_answer")
        found = await run_guardrails("output", guardrails, self.ctx, value, self.events,
                                     timeout=constraints.guard.guardrails.timeout_s)
        return None if found is None else GuardrailTripped(found[0], found[1].reason, "output",
                                                           info=found[1].info)

    def _tripped(self, exc: JianmuError) -> Status:
        """Fail the node with ``exc``: the run fails with it (`RunResult.exception`). The user
        messages the input guardrails refused are withheld in the conversation (`WITHHELD`):
        the next message sent is answered, and no later turn sends the refused ones."""
        self.error = exc
        self.feedback_message = str(exc)
        if isinstance(exc, GuardrailTripped) and exc.kind == "input":
            messages = list(self.state.get("messages") or [])
            refused = {id(m) for m in latest_user_messages(messages)}
            if refused:
                self.state.replace({"messages": [
                    Message.user(WITHHELD) if id(m) in refused else m for m in messages]})
        return Status.FAILURE


WITHHELD = "[withheld: the input guardrails refused this message]"
"""What stands in the conversation for user messages the input guardrails refused."""


def latest_user_messages(messages: Sequence[Message]) -> list[Message]:
    """The latest user message with those sent before it since the model's turn before them:
    what the model answers (two sent before a run, or one a guardrail refused and the one
    sent after it), oldest first."""
    found: list[Message] = []
    for message in reversed(messages):
        if message.role == "user":
            found.append(message)
        elif message.role == "assistant" and found:
            break
    return found[::-1]


def still_checking(checks: asyncio.Future[GuardrailTripped | None] | None) -> bool:
    """Whether the input guardrails' ``checks`` have yet to pass the turn's messages: its text
    is then not streamed. Ones that passed at once (a sync guardrail, say) hold nothing back."""
    if checks is None:
        return False
    return not checks.done() or checks.cancelled() or checks.exception() is not None \
        or checks.result() is not None


def tripped_at_once(
    checks: asyncio.Future[GuardrailTripped | None] | None,
) -> GuardrailTripped | None:
    """The trip of input guardrails that answered at once (a sync guardrail: `started_task`
    took their first step), known before the model is asked: then it is not asked, and the
    message they refused never reaches its vendor. ``None`` while they run, or if they passed."""
    return None if checks is None else _tripwire(checks)


def _tripwire(checks: asyncio.Future[GuardrailTripped | None]) -> GuardrailTripped | None:
    """The trip of finished input guardrails, if they tripped (``None`` while they run)."""
    if not checks.done() or checks.cancelled() or checks.exception() is not None:
        return None
    return checks.result()
