"""`AgentLLMNode`: asks the model for the next step and writes its tool calls or answer.

A turn writes tool calls to run, an answer (checked against the output type), or a hand-off to
another agent (`jianmu.nodes.turn`, with the reply's canonical calls). Calls to the answer tools
(``final_result``) and to hand-off tools (``transfer_to_<agent>``) are the node's own: they
never reach the executor, and each gets its one tool message here, so every call in the
history keeps its result. In a durable run each model call is a recorded step; a turn that a
guardrail may refuse is recorded once they decided, never holding what they refused
(`jianmu.nodes.sealed`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, cast

from py_trees.common import Status

from jianmu.constraints import Constraints
from jianmu.errors import (
    GuardrailTripped,
    LLMError,
    ToolValidationError,
)
from jianmu.execution.runner import within
from jianmu.guard import visible_tools
from jianmu.guard.enforcer import allowed_unasked
from jianmu.guard.guardrails import Guardrail, given_guardrails
from jianmu.llm.fallback import FallbackLLM, fallback_events
from jianmu.llm.in_flight import IN_FLIGHT, InFlight, answered
from jianmu.llm.messages import Message, Usage, close_unanswered, coerce_messages
from jianmu.llm.provider import (
    BaseLLMProvider,
    ChatRequest,
    LLMProvider,
    LLMResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    can_stream,
    from_name,
    replays_stream,
    takes_requests,
)
from jianmu.nodes.cut_off import (
    CUT_OFF_POLICIES,
    CutOffPolicy,
    answer_cut_off,
    continue_messages,
    cut_off_answers,
    cut_off_calls,
    filtered_error,
    text_cut_off_event,
    truncated_error,
)
from jianmu.nodes.guarded_turn import GuardedTurn, still_checking, tripped_at_once
from jianmu.nodes.handoffs import refuse_shared_tools
from jianmu.nodes.history import (
    HistoryContext,
    MessageHistory,
    ProcessorInput,
    apply_history,
    counted_usage,
    history_processors,
)
from jianmu.nodes.output import OutputMode, OutputSpec, output_spec
from jianmu.nodes.sealed import AnswerJudge, PassedTurn, RefusedTurn, joined, parts_of
from jianmu.nodes.state import tokens_spent, usage_view
from jianmu.nodes.stopped_call import budget_spent, stopped_usage
from jianmu.nodes.tool_executor import ToolExecutor, preview, unique_ids
from jianmu.nodes.tool_spans import handoff_span
from jianmu.nodes.turn import TurnUpdate, turn_update
from jianmu.runtime.events import chat_attributes, failed, record_answer, span
from jianmu.tools.calls import ToolCall, name_key
from jianmu.tools.registry import ToolSet

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from jianmu.nodes.handoffs import Handoff

__all__ = (
    "AgentLLMNode",
    "TurnUpdate",
    "recent_messages",
    "turn_update",
)


_NO_SPAN = nullcontext()

_NO_LIMIT = nullcontext()
"""The scope of a turn when nobody traces: one serves every turn (it holds nothing)."""


def _reply_of(llm: Any, response: Any) -> LLMResponse:
    """``response``, once it is the `LLMResponse` a provider must return.

    Raises:
        LLMError: a provider of one's own returned something else (its text, a dict).
    """
    if isinstance(response, LLMResponse):
        return response
    # else "'str' object has no attribute 'cut_off'", far from the provider that erred
    raise LLMError(
        f"the model provider {type(llm).__name__} returned a {type(response).__name__}, not "
        "an LLMResponse: return LLMResponse(message=Message.assistant(text)) (from jianmu.llm)"
    )


def _no_answer(limit: float, call: InFlight | None = None) -> TimeoutError:
    refused = call.refused if call is not None else None
    # a call that waited to retry a refusal (429, 503): the refusal is what it waited for
    why = f"; the server's last answer was HTTP {refused}, a refusal it retries" if refused else ""
    return TimeoutError(f"the model did not answer within {limit:g} s (the agent node's "
                        f"timeout, llm.timeout: the limit on the whole call){why}")


def recent_messages(messages: Sequence[Message], limit: int | None) -> list[Message]:
    """The last ``limit`` messages, never starting with tool results cut from their call."""
    window = list(messages if limit is None else messages[-limit:])
    while window and window[0].role == "tool":
        window.pop(0)
    return window


def _one_request(usage: Any) -> Any:
    """A reply's usage, counting the call as one model request when it counts none itself."""
    if isinstance(usage, Usage) and not usage.requests:
        return dataclasses.replace(usage, requests=1)
    return usage


def _refuse_clashes(names: Sequence[str], own: Sequence[Any]) -> None:
    """Refuse a tool named like one the node answers itself (``final_result``,
    ``transfer_to_<agent>``): the model's call would never reach it.

    Raises:
        ToolValidationError: naming the tool.
    """
    taken = {name_key(n): n for n in names}  # names resolve by their case-insensitive key
    for tool in own:
        key = name_key(tool.name)
        given = taken.get(key) if key is not None else None
        if given is not None:
            raise ToolValidationError(given, [
                f"a tool named {given!r} is given, and the agent's "
                f"{'hand-off' if tool.name.startswith('transfer_to_') else 'answer'} tool has "
                "that name; rename the tool"
            ])


class AgentLLMNode(GuardedTurn):
    """Asks ``llm`` for one turn and writes it to the state.

    The request holds the system prompt (plus an injected skill prompt), the last
    ``max_messages`` messages and the schemas of the tools the model may see: those of
    ``tools`` (or of the executor it feeds) minus the tools whose policy is deny. The reply is
    appended to ``messages``; its tool calls go to ``actions``; with none, its text becomes
    ``final_answer`` and ``done`` is set. ``rounds`` and ``usage`` are updated for the loop's
    limits and the guard's budget; in a skill's namespace the usage also adds to the root's,
    the run's total that every budget reads. A failed call (after the provider's retries) is
    FAILURE with the error in an ``llm.call.failed`` event; it never crashes the run.

    Args:
        name: the node's name.
        llm: the model provider, or a ``"provider:model"`` name (``"openai:gpt-4o"``).
        tools: a `ToolSet`, a list of tools, or the `ToolExecutor` that will run the calls
            (then the model sees exactly what that executor may run).
        system_prompt: the system message.
        skill_prompt: instructions appended to the system prompt (a skill's body).
        max_messages: most recent messages sent; default the constraints' ``max_messages``.
        timeout: seconds one model call may take in all, its retries and a stream's whole
            reply included (with a `FallbackLLM`, each model it asks); default the config's
            ``llm.timeout``. The provider's own ``timeout`` is only the longest wait for a
            byte, which a server that keeps sending never reaches.
        params: extra request parameters (``temperature``, ...).
        stream: stream the reply (text deltas become ``llm.call.delta`` events); default
            (None): when the provider can stream and someone reads the text as it comes
            (``runner.stream()``, or a handler subscribed to ``llm.call.delta`` itself). Never
            a turn that output guardrails, or input guardrails still running, check.
        output_type: the answer's type (`jianmu.nodes.output`): the validated object goes to
            ``final_output``, and an answer that does not fit is sent back to the model.
        output_mode: ``"tool"`` (a ``final_result`` tool), ``"native"`` (the provider's
            structured output) or ``"text"`` (JSON text).
        output_retries: answers that may fail the check before `OutputValidationError`.
        history: processors that shape what is sent (`jianmu.nodes.history`); the stored
            messages never change. ``max_messages`` adds `trim_history`'s count form.
        handoffs: hand-offs the model may make (`jianmu.nodes.handoffs`; `create_react_node`
            takes them among the tools).
        input_guardrails: guardrails of the latest user message (`jianmu.guard.guardrails`),
            run while the model is asked; a trip fails the node with `GuardrailTripped` and
            writes none of the turn, so none of its calls runs.
        output_guardrails: guardrails of the final answer (the typed one with
            ``output_type``); a trip fails the node and the answer is not written.
        tool_output_guardrails: guardrails of each tool result, given to the `ToolExecutor`
            passed as ``tools`` (which runs them).
        on_cut_off: an answer (text, no tool call) that the token limit cut off is
            continued (``"continue"``: the model asked to go on, the parts joined), fails the
            node with `OutputTruncatedError` (``"fail"``) or is kept (``"accept"``); each cut
            is an ``llm.call.cut_off`` event (`jianmu.nodes.cut_off`). Default the config's
            ``llm.on_cut_off``.
        max_continuations: how often an answer is continued before it fails; default the
            config's ``llm.max_continuations``.

    Raises:
        ConfigError: ``output_mode="native"`` with a provider that has no structured output.
        ValueError: ``tool_output_guardrails`` without a `ToolExecutor` as ``tools``.
        HandoffError: two ``handoffs`` share a tool name.
    """

    eager_start = False  # it waits on a model, a thread or a person (`AsyncNode.eager_start`)

    records_own_steps = True
    node_kind = "model"

    def __init__(
        self,
        name: str = "AgentLLM",
        llm: LLMProvider | str | None = None,
        *,
        tools: ToolSet | ToolExecutor | Sequence[Any] | None = None,
        system_prompt: str = "",
        skill_prompt: str | None = None,
        max_messages: int | None = None,
        timeout: float | None = None,
        constraints: Constraints | None = None,
        params: dict[str, Any] | None = None,
        stream: bool | None = None,
        output_type: Any = None,
        output_mode: OutputMode = "tool",
        output_retries: int = 2,
        history: Sequence[ProcessorInput] | None = None,
        handoffs: Sequence[Handoff] = (),
        input_guardrails: Sequence[Guardrail] = (),
        output_guardrails: Sequence[Guardrail] = (),
        tool_output_guardrails: Sequence[Guardrail] = (),
        on_cut_off: CutOffPolicy | None = None,
        max_continuations: int | None = None,
    ) -> None:
        super().__init__(name)
        if on_cut_off is not None and on_cut_off not in CUT_OFF_POLICIES:
            raise ValueError(f"on_cut_off must be one of {', '.join(CUT_OFF_POLICIES)}, "
                             f"got {on_cut_off!r}")
        if max_continuations is not None and (
            isinstance(max_continuations, bool) or not isinstance(max_continuations, int)
            or max_continuations < 0
        ):
            raise ValueError(
                f"max_continuations must be an integer >= 0, got {max_continuations!r}")
        self.on_cut_off = on_cut_off
        self.max_continuations = max_continuations
        self.stream = stream
        self._checked_turn = False
        """Whether a guardrail checks this turn's text: then it is not streamed."""
        self.input_guardrails = given_guardrails("input", input_guardrails)
        """Guardrails of the user's message, before the configured ones."""
        self.output_guardrails = given_guardrails("output", output_guardrails)
        """Guardrails of the final answer, before the configured ones."""
        self._passes: list[tuple[Message, tuple[Guardrail, ...]] | None] = [None]
        """The user message the input guardrails last passed, and those guardrails: not
        checked again next turn, unless the guardrails changed (a skill loaded); one cell
        that the agents of a hand-off team share (`jianmu.nodes.handoffs.build_team`)."""
        if tool_output_guardrails:
            if not isinstance(tools, ToolExecutor):
                raise ValueError(
                    "tool_output_guardrails need the ToolExecutor that runs the calls as "
                    "tools=; or give them to ToolExecutor(tool_output_guardrails=...)"
                )
            tools.tool_output_guardrails = (
                *tools.tool_output_guardrails, *tool_output_guardrails
            )
        if isinstance(tools, ToolExecutor):  # its calls' sub-agents run under these too
            tools.llm_node = self
        if llm is None:
            raise ValueError("AgentLLMNode needs an llm (an LLMProvider such as OpenAIProvider)")
        if isinstance(llm, str):  # "openai:gpt-4o", as pydantic-ai's agents take it
            llm = from_name(llm)
        if isinstance(llm, type):  # its complete() would fail at the first turn, on `self`
            raise TypeError(f"llm must be a model provider, got the class {llm.__name__}: "
                            f"give an instance, {llm.__name__}(...)")
        if not callable(getattr(llm, "complete", None)):
            several = isinstance(llm, (list, tuple))  # pydantic-ai's FallbackModel(a, b)
            raise TypeError(
                f"llm must be a model provider (an LLMProvider such as OpenAIProvider) or a "
                f"'provider:model' name, got {type(llm).__name__}"
                + ("; models asked in turn are FallbackLLM([...])" if several else "")
            )
        if not isinstance(system_prompt, str):
            raise TypeError(f"system_prompt must be text, got {type(system_prompt).__name__}")
        self.llm = llm
        self._can_stream = can_stream(llm)
        self.tools = tools
        self.system_prompt = system_prompt
        self.skill_prompt = skill_prompt
        self.max_messages = max_messages
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.timeout = timeout
        self.constraints = constraints
        self.params = dict(params or {})
        self._system: tuple[tuple[str, str | None, str], Message | None] | None = None
        """The parts of the last system prompt, and its message (None: no prompt)."""
        self._closed_upto: tuple[int, Message] | None = None
        """How many stored messages `_close_unanswered` found whole last, and the last one."""
        self.output: OutputSpec | None = output_spec(output_type, output_mode, output_retries)
        """How the answer is asked for and checked (None: free text)."""
        if self.output is not None:
            self.params.update(self.output.request_params(llm))
        self.history = list(history or ())
        """The history processors given (``max_messages`` adds one when the turn is sent)."""
        refuse_shared_tools(handoffs)
        self.handoffs = list(handoffs)
        self.agent_name: str | None = None
        """The agent this node speaks for, in a team joined by hand-offs."""
        self.agent_label: str | None = None
        """The agent's name in traces (`create_react_node`'s ``name``); else the node's."""
        self._offered: tuple[ToolSet, ToolSet, list[Any]] | None = None
        self._visible: tuple[tuple[Any, ...], ToolSet] | None = None
        """What `visible_tools` last depended on (compared by identity), and its answer."""
        self._tools_sent: tuple[ToolSet, tuple[dict[str, Any], ...]] | None = None
        """The toolset last offered, and its tools as a request holds them."""
        self._processors: tuple[tuple[Any, ...], tuple[ProcessorInput, ...]] | None = None
        self._in_flight: InFlight | None = None  # the model call under way, until it answered
        self._answered: list[tuple[LLMResponse, list[Message]]] | None = None  # a stopped turn's
        history_processors(self.history, None)  # refuse a non-processor now, not mid-run
        given: Any = getattr(tools, "toolset", tools)  # an executor's, or the tools given
        if given is not None:
            if not isinstance(given, ToolSet):
                given = ToolSet.from_tools(given)
            own = [*(self.output.tools if self.output is not None else ()),
                   *(h.tool for h in self.handoffs)]
            if own:
                _refuse_clashes(given.names(), own)

    def bind(self, state_manager: Any, ctx: Any, path: str) -> None:
        """Attach the run; a typed answer restored as JSON becomes an object again."""
        super().bind(state_manager, ctx, path)
        output = self.output
        if output is None:
            return
        value = self.state.get("final_output")
        active = self.state.get("active_agent")
        if value is None or (self.handoffs_team and active not in (None, self.agent_name)):
            return
        revived = output.revive(value)
        if revived is not value:
            self.state.replace({"final_output": revived})

    @property
    def handoffs_team(self) -> bool:
        """Whether this node's agent is one of a team joined by hand-offs."""
        return self.agent_name is not None

    def offered_tools(self) -> ToolSet:
        """The tools the model sees: `visible_tools`, plus the answer tools and hand-offs."""
        visible = self.visible_tools()
        if self.output is None and not self.handoffs:  # most agents: nothing of the node's own
            return visible
        extra = [*(self.output.tools if self.output is not None else ()),
                 *(h.tool for h in self.allowed_handoffs())]
        if not extra:
            return visible
        cached = self._offered
        if cached is not None and cached[0] is visible and cached[2] == extra:
            return cached[1]
        _refuse_clashes(visible.names(), extra)
        offered = visible.with_tools(extra)
        self._offered = (visible, offered, extra)
        return offered

    def allowed_handoffs(self) -> list[Handoff]:
        """The hand-offs whose tool the guard's policy allows: a hand-off is a call too,
        though it never reaches the executor, so none that a rule denies or would have a
        person confirm (`allowed_unasked`)."""
        if not self.handoffs:
            return []
        guard = self.effective_constraints.guard
        return [h for h in self.handoffs if allowed_unasked(h.tool, guard)]

    def visible_tools(self) -> ToolSet:
        """The tools offered to the model (deny-policy tools removed).

        Worked out again only when what it depends on changes (an executor keeps its own):
        the tools given, what each says of itself (a tool changed makes a new `tool_spec`),
        the run, its constraints and roles. So a list of tools is one `ToolSet` across turns,
        its export made once, not rebuilt on every turn.
        """
        tools = self.tools
        if isinstance(tools, ToolExecutor):
            return tools.visible_toolset()
        ctx, constraints = self.ctx, self.effective_constraints
        members = tuple(tools) if tools is not None else ()
        key = (tools if isinstance(tools, ToolSet) else None, ctx, constraints,
               getattr(ctx, "user_roles", None), *members,
               *(getattr(t, "tool_spec", None) for t in members))
        seen = self._visible
        if seen is not None and len(seen[0]) == len(key) and all(
            a is b for a, b in zip(seen[0], key, strict=True)
        ):
            return seen[1]
        toolset = tools if isinstance(tools, ToolSet) else ToolSet.from_tools(members)
        visible = visible_tools(toolset, ctx, constraints)
        self._visible = (key, visible)
        return visible

    def request_messages(self) -> list[Message]:
        """The messages sent to the model on this turn."""
        limit = self.max_messages
        if limit is None:
            limit = self.effective_constraints.max_messages
        return self._with_head(self.state.get("messages") or [], limit)

    def _with_head(self, stored: Sequence[Message], limit: int | None) -> list[Message]:
        """The system message, then `recent_messages` of ``stored``: made as one list, not a
        window copied and then copied again behind the head (every turn, the whole history)."""
        start = 0 if limit is None else slice(-limit, None).indices(len(stored))[0]
        while start < len(stored) and stored[start].role == "tool":
            start += 1
        out = self._head()
        if not start and self._holds_prompt(stored):
            start = 1
        if start:
            out.extend(itertools.islice(stored, start, None))
        else:
            out += stored
        return out

    def _head(self) -> list[Message]:
        """The system message of a turn: the prompt, the skill's, the answer's form."""
        form = self.output.instructions() if self.output is not None else ""
        parts = (self.system_prompt, self.skill_prompt, form)
        made = self._system
        if made is None or made[0] != parts:  # one message per prompt, not one per turn
            system = "\n\n".join(p for p in parts if p)
            made = self._system = (parts, Message.system(system) if system else None)
        return [] if made[1] is None else [made[1]]

    def _holds_prompt(self, stored: Sequence[Message]) -> bool:
        """Whether the conversation starts with this node's system prompt (a history ported
        from pydantic-ai's ``all_messages()`` or an OpenAI message list), which the head sends
        anyway: sent twice, the model reads the prompt twice."""
        if not stored or not self.system_prompt:
            return False
        first = stored[0]
        return first.role == "system" and first.content in (
            self.system_prompt, *(m.content for m in self._head()))

    async def prepare_messages(self) -> list[Message]:
        """The messages of this turn, through the history processors (none: as
        `request_messages`, the last ``max_messages``).

        Raises:
            HistoryProcessorError: a processor failed (the message names it).
        """
        limit = self.max_messages
        if limit is None:
            limit = self.effective_constraints.max_messages
        if not self.history and limit is None:
            return self._with_head(self.state.get("messages") or [], None)
        key = (limit, tuple(self.history))
        made = self._processors
        if made is None or made[0] != key:  # made once, unless the list or the limit changed
            made = self._processors = (key, history_processors(self.history, limit))
        processors = made[1]
        stored = self.state.get("messages") or []
        if self._holds_prompt(stored):
            stored = stored[1:]
        run = HistoryContext(state=self.state, ctx=self.ctx, events=self.events, node=self.path,
                             spend=self._spend)
        return await apply_history(processors, MessageHistory(self._head(), stored), run)

    def _spend(self, usage: Any) -> None:
        """Add tokens spent beside the turn (a summary's) to this view's and the run's usage."""
        usage = _one_request(usage)
        self.state.update({"usage": usage})
        run_usage = usage_view(self)
        if run_usage.namespace != self.state.namespace:
            run_usage.update({"usage": usage})

    def _ask(self, messages: list[Message], toolset: ToolSet) -> Awaitable[LLMResponse]:
        """The model's reply to this turn, to await: the provider's own coroutine (no layer of
        ours around it), or `_streamed` over its stream."""
        llm, params = self.llm, self.params
        call = self._in_flight = InFlight()  # told by the provider what went out and came
        call.messages, call.tools = messages, toolset
        call.count_passed = self._count_passed
        IN_FLIGHT.set(call)
        streams = self.stream
        if streams is None:  # automatic: when someone reads the deltas (not a recorder of all)
            streams = self.events.asked_for("llm.call.delta")
        if streams and self._checked_turn:  # its text is read once the guardrails passed it
            streams = False
        if takes_requests(llm, stream=streams, params=params):
            # what the base `complete` would build, with the toolset's export made once
            # rather than every tool's on every turn
            request = ChatRequest(
                messages=tuple(coerce_messages(messages)),
                tools=self._request_tools(toolset),
                params=dict(params),
            )
            if not streams:
                return llm.send(request)
            if replays_stream(llm):  # a whole reply cut in pieces: no stream to go through
                return self._replayed(llm, request)
            return self._streamed(llm.send_stream(request))
        tools = list(toolset) or None
        if not streams:
            return llm.complete(messages, tools=tools, **params)
        if not self._can_stream:  # complete() alone: its answer one delta, as a base replays it
            return self._whole(llm.complete(messages, tools=tools, **params))
        return self._streamed(llm.stream(messages, tools=tools, **params))

    def _request_tools(self, toolset: ToolSet) -> tuple[dict[str, Any], ...]:
        """The request's tools: the toolset's export, as the tuple a request holds, made once
        per toolset (which never changes: a new set of tools is a new `ToolSet`) rather than
        copied on every turn."""
        made = self._tools_sent
        if made is None or made[0] is not toolset:
            made = self._tools_sent = (toolset, tuple(toolset.to_openai(include_deprecated=True)))
        return made[1]

    async def _replayed(self, llm: BaseLLMProvider, request: ChatRequest) -> LLMResponse:
        """The reply as the base ``send_stream`` would replay it, its ``text_pieces`` as
        ``llm.call.delta``: the same events, without a generator and an object per piece."""
        response = _reply_of(llm, await llm.whole_reply(request))
        text = response.text
        if text:
            self.events.emit_each("llm.call.delta", "text", llm.text_pieces(text))
        return response

    async def _whole(self, reply: Awaitable[LLMResponse]) -> LLMResponse:
        """The reply of a provider that cannot stream, its text one ``llm.call.delta``: a
        reader that prints the deltas (README's chat loop) printed nothing of it."""
        response = _reply_of(self.llm, await reply)
        if response.text:
            self.events.emit("llm.call.delta", text=response.text)
        return response

    async def _streamed(self, events: AsyncIterator[StreamEvent]) -> LLMResponse:
        """The reply at the end of a stream; its text deltas become ``llm.call.delta``."""
        emit = self.events.emit
        chars = 0
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    chars += len(event.text)
                    emit("llm.call.delta", text=event.text)
                elif isinstance(event, StreamDone):
                    return event.response
                elif not isinstance(event, ToolCallReady):  # else read as a stream without end
                    raise LLMError(
                        f"the model's stream yielded a {type(event).__name__}: a provider's "
                        "stream() yields TextDelta(text=...) pieces, then "
                        "StreamDone(response=LLMResponse(...)) (from jianmu.llm.provider)")
        except BaseException:
            if self._in_flight is not None:  # what a stopped call read (`stopped_usage`)
                self._in_flight.text_chars = chars
            raise
        finally:
            # closed here: a stream left open is closed by the loop's finalizer, a task and a
            # wake-up of the loop per model call
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        raise LLMError("the model's stream ended without a final response")

    def _asked(self, messages: list[Message], toolset: ToolSet,
               record: bool = True) -> Awaitable[LLMResponse]:
        """`_ask`, as a durable step in a durable run (unless not to ``record``: a sealed
        turn's step holds it): a turn the model answered is replayed, never asked again."""
        steps = self.ctx.steps
        if steps is None or not record:
            return self._ask(messages, toolset)
        return steps.run(f"model:{self.path or self.name}", functools.partial(
            answered, functools.partial(self._ask, messages, toolset)))

    def _canonical(self, response: LLMResponse, toolset: ToolSet) -> tuple[Message, list[ToolCall]]:
        """The reply's calls, canonical once for everything after: each name is the tool it
        resolves to among those offered (an unknown name stays as sent) and each id is unique
        in the run; the assistant message carries the same calls, so observations match it."""
        calls = unique_ids([toolset.canonical(c)[0] for c in response.tool_calls], self)
        if calls == list(response.message.tool_calls or ()):
            return response.message, calls
        return response.message.model_copy(update={"tool_calls": calls}), calls

    def settled(self) -> Status | None:
        """SUCCESS, asking nothing, when the last turn's calls never got their results: the
        run that made them was stopped (cancelled, timed out, interrupted) mid-batch. Its
        executor runs what did not finish first, as a halted batch does; asking the model
        again would send it a call with no result, which providers refuse."""
        actions = self.state.get("actions")
        if not actions or not isinstance(self.tools, ToolExecutor):
            return None
        last = next((m for m in reversed(self.state.get("messages") or ()) if m.role != "tool"),
                    None)
        if last is None or last.role != "assistant" or not last.tool_calls:
            return None
        made = {call.id for call in last.tool_calls}
        pending = {call.id for call in ToolCall.from_list(actions)}
        return Status.SUCCESS if pending <= made else None

    def _close_unanswered(self, stored: Sequence[Message]) -> None:
        """Answer as not run the calls that the conversation went on from (a run stopped
        during them, then ``send``; a history passed on): no provider takes a call without
        its result. The calls still pending are from before the new message: dropped (one
        already recorded, a call stopped as maybe done, keeps its result)."""
        recorded = self.state.get("observations") or {}
        start, whole = 0, self._closed_upto
        # only what came since the last check (from the turn the last one ended with): a
        # conversation's every new message read its whole history again
        if whole is not None and whole[0] <= len(stored) and stored[whole[0] - 1] is whole[1]:
            start = whole[0] - 1
            while start and stored[start].role == "tool":
                start -= 1
        closed = close_unanswered(stored[start:] if start else stored, recorded)
        if closed is not None:
            stored = [*stored[:start], *closed]
            self.state.replace({"messages": stored})
        self._closed_upto = (len(stored), stored[-1])
        if recorded:  # in the conversation now, or of calls it dropped
            self.state.update({"observations": {}})
        if self.state.get("actions"):
            self.state.replace({"actions": []})

    async def update_async(self) -> Status:
        """Call the model once and record its reply."""

        if isinstance(self.tools, ToolExecutor):
            await self.tools.prepare_tools()
        stored = self.state.get("messages")
        if stored and stored[-1].role == "user":  # a new message: what it left behind is over
            self._close_unanswered(stored)
        constraints = self.effective_constraints
        budget = constraints.guard.budget.total_tokens
        if budget is not None and tokens_spent(self) >= budget:  # spent by turns that never
            return self._tripped(budget_spent(self, budget))  # ended (pre-empted), or others
        messages = await self.prepare_messages()
        toolset = self.offered_tools()
        model = getattr(self.llm, "model", "") or "unknown"
        timeout = whole = self.timeout or self.ctx.config.llm.timeout
        each_model: AbstractContextManager[None] = _NO_LIMIT
        llm = self.llm
        # (its class's order, not isinstance: a protocol's subclass check is slow, every turn)
        if FallbackLLM in type(llm).__mro__:  # each model it asks has the whole timeout, and
            # one that does not answer in it is passed over, as it would be on a 503
            llm = cast(FallbackLLM, llm)
            each_model = llm.each_within(timeout)
            whole = timeout * len(llm.models)
        events, tracer = self.events, self.ctx.tracer
        if events.wants("llm.call.started"):  # the fields only when someone reads them
            events.emit("llm.call.started", model=model, messages=len(messages),
                        tools=toolset.names())
        scope: AbstractContextManager[Span | None] = _NO_SPAN if tracer is None else span(
            tracer, f"chat {model}", chat_attributes(
                self.llm, model, self.agent_name or self.agent_label or self.name), client=True,
        )
        guarded_input = bool(self.input_guardrails or constraints.guard.guardrails.input
                             or self.ctx.guardrails.get("input"))
        guarded_output = bool(self.output_guardrails or constraints.guard.guardrails.output
                              or self.ctx.guardrails.get("output"))
        # a sub-agent's answer, which its caller's tool-output guardrails judge (`AgentTool`)
        judge: AnswerJudge | None = getattr(self.ctx.runner, "answer_judge", None)
        # durable: a turn a guardrail may refuse is recorded once they decided
        sealed = self.ctx.steps is not None and (
            guarded_input or guarded_output or judge is not None)
        checks = None  # the input guardrails' task, run beside the model's call
        if guarded_input and not sealed:
            checks = self._check_input(constraints)
        # no deltas of a turn that a guardrail still has to pass: a reader would have the
        # answer to a message the input guardrails refuse, or an answer the output ones do,
        # or a sub-agent's answer that its caller's tool-output guardrails withhold
        later = getattr(self.ctx.runner, "is_sub_run", False) and bool(
            constraints.guard.guardrails.tool_output or self.ctx.guardrails.get("tool_output"))
        self._checked_later = later or guarded_output
        self._checked_turn = still_checking(checks) or self._checked_later
        refused: RefusedTurn | None = None
        with scope as current:
            try:
                # the loop timer that calls starting together share (`within`), as an
                # asyncio.timeout would, without a timer of its own per turn
                # a FallbackLLM says its switches here: entered when someone hears them
                with fallback_events.scope(events.emit, heard=events.wants("llm.fallback")), \
                        each_model:
                    if sealed:
                        record = await self._sealed(messages, toolset, whole, model,
                                                    constraints, guarded_input, judge)
                        if isinstance(record, RefusedTurn):
                            refused, parts = record, []
                        else:
                            parts = parts_of(record.replies, messages)
                    else:
                        parts = await self._reply(messages, toolset, whole, model, checks)
            except GuardrailTripped as exc:  # tripped before the model answered
                self._count_stopped(model)
                return self._tripped(exc)
            except Exception as exc:
                self._count_stopped(model)
                if checks is not None:
                    checks.cancel()
                error = (
                    f"the model did not answer within {whole:g} s"
                    if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
                )
                self.error = exc
                self.feedback_message = error
                failed(current, type(exc).__name__)
                self.events.emit("llm.call.failed", model=model, error=error,
                                 error_type=type(exc).__name__)
                return Status.FAILURE
            except BaseException:  # stopped: halted, pre-empted, the run cancelled
                self._count_stopped(model)
                raise
            if current is not None and parts:
                record_answer(current, joined(parts))
        tripped: GuardrailTripped | None
        if refused is not None:  # replayed or just recorded: the reply is gone, the trip holds
            usage, tripped, turn = refused.usage, refused.tripped(), TurnUpdate({})
            answered, called, text = refused.model or model, list(refused.tool_calls), None
        else:
            response = joined(parts)
            usage = self._parts_usage(parts, model)
            turn, calls = self._turn_of(parts, toolset, model)
            tripped = None  # sealed: judged inside the step
            if not sealed and (checks is not None or guarded_output):
                try:
                    tripped = await self._judge(turn, checks, constraints)
                except BaseException:  # stopped while they judged: the reply was billed
                    self._spend(usage)
                    raise
            answered, called = response.model or model, [c.name for c in calls]
            text = response.message.content
        update: dict[str, Any] = {
            **(turn.values if tripped is None else {}),  # a trip writes none of the turn
            "rounds": (self.state.get("rounds") or 0) + 1,
            "usage": usage,
        }
        if self.handoffs_team:  # the turns of the agent answering now, for its own cap
            update["agent_rounds"] = 0 if "active_agent" in turn.values else (
                self.state.get("agent_rounds") or 0) + 1
        self.state.update(update)
        run_usage = usage_view(self)
        if run_usage.namespace != self.state.namespace:
            # a skill's namespace: the run's total lives at the root, for budgets and reports
            run_usage.update({"usage": usage})
        if self._checked_turn and not later and tripped is None and text and not (
                guarded_output and turn.refused_answer is not None) and (
                self.stream if self.stream is not None else events.asked_for("llm.call.delta")):
            # not streamed while guardrails could refuse it: passed, its text is one delta (a
            # reader that prints the deltas, as README's chat loop does, printed nothing)
            events.emit("llm.call.delta", text=text)
        if events.wants("llm.call.completed"):
            events.emit(  # the model that answered: a fallback's, when the first failed
                "llm.call.completed", model=answered, tool_calls=called,
                answer_preview=None if called or tripped or later or (
                    guarded_output and turn.refused_answer is not None) else preview(text),
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
            )
        if tripped is not None:
            return self._tripped(tripped)
        for name, fields in turn.events:
            if name == "agent.handoff" and tracer is not None:  # a call no executor runs
                said = next((m.content for m in turn.values["messages"]
                             if m.role == "tool" and m.tool_call_id == fields["call_id"]), "")
                handoff_span(self.ctx, fields, said or "")
            events.emit(name, **fields)
        if turn.error is not None:  # written first: the history shows the last answer
            raise turn.error
        return Status.SUCCESS

    async def _reply(self, messages: list[Message], toolset: ToolSet, whole: float, model: str,
                     checks: asyncio.Future[GuardrailTripped | None] | None, *,
                     record: bool = True) -> list[tuple[LLMResponse, list[Message]]]:
        """The turn's replies, each with what it was asked: the model's, asked beside the
        input guardrails' ``checks``; continued while the token limit cut it off (if so
        configured). Each call a durable step of its own when ``record``."""
        found = tripped_at_once(checks)
        if found is not None:  # known before the model is asked: the request never goes out
            raise found
        if self._gate is not None and checks is not None:  # some run before the model is asked
            await self._first_passed(checks)
        reply = within(self._asked(messages, toolset, record), whole,
                       lambda: _no_answer(whole, self._in_flight))
        response = _reply_of(self.llm, await (reply if checks is None
                                              else self._beside(reply, checks)))
        self._call_over()  # answered: counted with the turn
        parts = [(response, messages)]
        if answer_cut_off(response):  # half an answer: go on, if so configured
            parts = await self._continued(parts, toolset, whole, response.model or model,
                                          record)
        return parts

    def _turn_of(self, parts: list[tuple[LLMResponse, list[Message]]], toolset: ToolSet,
                 model: str) -> tuple[TurnUpdate, list[ToolCall]]:
        """What the turn of these replies writes, and its canonical calls."""
        response = joined(parts)
        message, calls = self._canonical(response, toolset)
        cut = cut_off_calls(response.finish_reason, calls)
        if cut:  # never run: told to the model, and said by an event (`jianmu.nodes.cut_off`)
            return self._cut_off(message, calls, cut, response.finish_reason or "length",
                                 response.model or model), calls
        if answer_cut_off(response):  # still cut off: failed, or accepted as it is
            return self._answer_cut_off(message, response, parts, response.model or model), calls
        filtered = filtered_error(response, response.model or model)
        if filtered is not None:  # nothing said: no empty answer, no retry that a filter stops
            return TurnUpdate({"actions": []}, error=filtered), calls
        return turn_update(message, calls, state=self.state, output=self.output,
                           handoffs=self.allowed_handoffs(), agent=self.agent_name), calls

    async def _sealed(self, messages: list[Message], toolset: ToolSet, whole: float,
                      model: str, constraints: Constraints, guarded_input: bool,
                      judge: AnswerJudge | None) -> PassedTurn | RefusedTurn:
        """The turn of a durable run that a guardrail may refuse, as one step whose calls and
        guardrails run inside it (`jianmu.nodes.sealed`): it records the replies they passed,
        or the refusal, never what they refused."""
        steps = self.ctx.steps
        assert steps is not None

        async def decided() -> PassedTurn | RefusedTurn:
            checks = self._check_input(constraints) if guarded_input else None
            self._checked_turn = self._checked_turn or still_checking(checks)
            try:
                parts = await self._reply(messages, toolset, whole, model, checks, record=False)
            except BaseException:
                if checks is not None:
                    checks.cancel()
                raise
            turn, calls = self._turn_of(parts, toolset, model)
            try:
                tripped = await self._judge(turn, checks, constraints)
                if tripped is None and judge is not None and turn.values.get("done"):
                    answer = turn.values.get("final_output")  # as `AgentTool` answers its caller
                    tripped = await judge(turn.values.get("final_answer") or ""
                                          if answer is None else answer)
            except BaseException:  # stopped while they judged: the replies were billed
                self._answered = parts  # counted by `_count_stopped`
                raise
            if tripped is not None:
                usage = self._parts_usage(parts, model)
                return RefusedTurn.of(tripped, joined(parts).model or model, usage,
                                      [c.name for c in calls])
            return PassedTurn(tuple(reply for reply, _ in parts))

        record: Any = await steps.run(f"model:{self.path or self.name}", decided)
        if isinstance(record, LLMResponse):  # recorded by a version that did not seal turns
            record = PassedTurn((record,))
        if guarded_input and isinstance(record, PassedTurn):  # replayed: they passed it
            self._input_passed(constraints)
        return cast("PassedTurn | RefusedTurn", record)

    def _parts_usage(self, parts: Sequence[tuple[LLMResponse, list[Message]]],
                     model: str) -> Usage:
        """What the turn's calls spent: each part's count (or the estimate, said by an
        ``llm.usage_unknown`` event), one request each."""
        total: Usage | None = None
        for part, asked in parts:
            usage = counted_usage(part, asked)
            if usage is not part.usage:  # counted as an estimate: a budget still holds
                self.events.emit("llm.usage_unknown", model=model,
                                 estimated_input_tokens=usage.input_tokens,
                                 estimated_output_tokens=usage.output_tokens)
            usage = _one_request(usage)  # the server's count or the estimate, one request
            total = usage if total is None else total + usage
        assert total is not None
        return total

    def _count_stopped(self, model: str) -> None:
        """Add what the turn's calls spent, stopped before the reply came, to the usage."""
        call, self._in_flight = self._in_flight, None
        answered, self._answered = self._answered, None
        usage = stopped_usage(call, self._request_tools, self.events.emit,
                              call.model or model if call is not None else model)
        if call is not None:
            call.release()
        if answered:
            usage = self._parts_usage(answered, model) + (usage or Usage())
        if usage is not None:
            self._spend(usage)

    def _call_over(self) -> None:
        """The model call answered: no longer in flight, and holding nothing of the turn."""
        call, self._in_flight = self._in_flight, None
        if call is not None:
            call.release()

    def _count_passed(self, call: InFlight, model: str) -> None:
        """Add what ``model``, which a `FallbackLLM` passed over once the server had taken its
        request, spent to the usage: the reply that would have said so never comes."""
        if call is not self._in_flight:  # an answered call's, left in the task's context: a
            return  # later request of another's (a history summary's) is not this call's
        usage = stopped_usage(call, self._request_tools, self.events.emit, model)
        if usage is not None:
            self._spend(usage)

    def _cut_off_policy(self) -> tuple[str, int]:
        """``on_cut_off`` and ``max_continuations``: the node's, else the config's."""
        config = self.ctx.config.llm
        bound = self.max_continuations
        return (self.on_cut_off or config.on_cut_off,
                config.max_continuations if bound is None else bound)

    async def _continued(
        self, parts: list[tuple[LLMResponse, list[Message]]], toolset: ToolSet, whole: float,
        model: str, record: bool = True,
    ) -> list[tuple[LLMResponse, list[Message]]]:
        """The answer's parts, each with what it was asked: while the token limit cuts the
        last one off and the policy is ``continue``, the model asked to go on from the text so
        far (at most ``max_continuations`` times, and never once the run's token budget is
        spent); each one a model call of its own (its deltas streamed, a durable step in a
        durable run)."""
        policy, bound = self._cut_off_policy()
        messages = parts[0][1]
        text = parts[0][0].text
        try:
            while policy == "continue" and len(parts) <= bound and answer_cut_off(parts[-1][0]):
                if self._over_budget(parts) is not None:
                    break
                last = parts[-1][0]
                self.events.emit("llm.call.cut_off", **text_cut_off_event(
                    last.model or model, last.finish_reason or "length", policy, len(parts),
                    text, "continued"))
                asked = continue_messages(messages, text)
                response = _reply_of(self.llm, await within(
                    self._asked(asked, toolset, record), whole,
                    lambda: _no_answer(whole, self._in_flight)))
                self._call_over()
                parts.append((response, asked))
                text += response.text
        except BaseException:  # the parts so far were answered and billed: counted still
            self._answered = parts
            raise
        return parts

    def _over_budget(self, parts: Sequence[tuple[LLMResponse, list[Message]]],
                     ) -> tuple[int, int] | None:
        """The tokens spent and the run's budget, when the turn's parts so far spent it."""
        budget = self.effective_constraints.guard.budget.total_tokens
        if budget is None:
            return None
        spent = tokens_spent(self) + sum(counted_usage(part, asked).total_tokens
                                         for part, asked in parts)
        return (spent, budget) if spent >= budget else None

    def _answer_cut_off(self, message: Message, response: LLMResponse,
                        parts: Sequence[tuple[LLMResponse, list[Message]]],
                        model: str) -> TurnUpdate:
        """The turn of an answer still cut off at the token limit: kept as the answer
        (``accept``), else written to the conversation and failed with
        `OutputTruncatedError`; an ``llm.call.cut_off`` event says which."""
        policy, bound = self._cut_off_policy()
        text, reason = message.content or "", response.finish_reason or "length"
        continuations = len(parts) - 1
        budget = self._over_budget(parts) if policy == "continue" and (
            continuations < bound) else None
        outcome = "accepted" if policy == "accept" else "failed"
        event = ("llm.call.cut_off",
                 text_cut_off_event(model, reason, policy, continuations, text, outcome))
        if policy == "accept":
            turn = turn_update(message, [], state=self.state, output=self.output,
                               handoffs=self.allowed_handoffs(), agent=self.agent_name)
            turn.events.insert(0, event)
            return turn
        return TurnUpdate({"messages": [message], "actions": []}, events=[event],
                          error=truncated_error(text, reason, policy, continuations, bound,
                                                budget))

    def _cut_off(self, message: Message, calls: list[ToolCall], cut: list[ToolCall],
                 reason: str, model: str) -> TurnUpdate:
        """The turn of a reply the token limit cut off in ``cut``: those calls answered as not
        run, the others as in any turn; with none whole, the model is asked again."""
        answers = cut_off_answers(cut, reason)
        event = ("llm.call.cut_off", {"model": model, "finish_reason": reason,
                                      "tool_calls": [c.name for c in cut],
                                      "call_ids": [c.id for c in cut]})
        dropped = {c.id for c in cut}
        rest = [c for c in calls if c.id not in dropped]
        if not rest:  # no answer either: its text was cut off too
            return TurnUpdate({"messages": [message, *answers], "actions": []}, events=[event])
        turn = turn_update(message, rest, state=self.state, output=self.output,
                           handoffs=self.allowed_handoffs(), agent=self.agent_name)
        first, *others = turn.values["messages"]
        turn.values["messages"] = [first, *answers, *others]
        turn.events.insert(0, event)
        return turn
