"""`AgentLLMNode`: asks the model for the next step and writes its tool calls or answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from py_trees.common import Status

from jianmu.constraints import Constraints
from jianmu.errors import LLMError
from jianmu.execution._deadlines import within
from jianmu.guard import visible_tools
from jianmu.llm.messages import Message, coerce_messages
from jianmu.llm.provider import (
    ChatRequest,
    LLMProvider,
    LLMResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    takes_requests,
)
from jianmu.nodes._tool_calls import preview, unique_ids, usage_view
from jianmu.runtime.async_node import AsyncNode
from jianmu.telemetry import (
    ERROR_TYPE,
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    span,
)
from jianmu.tools.calls import ToolCall
from jianmu.tools.toolset import ToolSet

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from jianmu.nodes.tool_executor import ToolExecutor

__all__ = ("AgentLLMNode", "recent_messages")


def _no_answer() -> TimeoutError:
    return TimeoutError("the model did not answer in time")


def recent_messages(messages: Sequence[Message], limit: int | None) -> list[Message]:
    """The last ``limit`` messages, never starting with tool results cut from their call."""
    window = list(messages if limit is None else messages[-limit:])
    while window and window[0].role == "tool":
        window.pop(0)
    return window


class AgentLLMNode(AsyncNode):
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
        llm: the model provider.
        tools: a `ToolSet`, a list of tools, or the `ToolExecutor` that will run the calls
            (then the model sees exactly what that executor may run).
        system_prompt: the system message.
        skill_prompt: instructions appended to the system prompt (a skill's body).
        max_messages: most recent messages sent; default the constraints' ``max_messages``.
        timeout: seconds one model call may take; default the config's ``llm.timeout``.
        params: extra request parameters (``temperature``, ...).
        stream: stream the reply (text deltas become ``llm.call.delta`` events).
    """

    records_own_steps = True
    node_kind = "model"

    def __init__(
        self,
        name: str = "AgentLLM",
        llm: LLMProvider | None = None,
        *,
        tools: ToolSet | ToolExecutor | Sequence[Any] | None = None,
        system_prompt: str = "",
        skill_prompt: str | None = None,
        max_messages: int | None = None,
        timeout: float | None = None,
        constraints: Constraints | None = None,
        params: dict[str, Any] | None = None,
        stream: bool = False,
    ) -> None:
        super().__init__(name)
        self.stream = stream
        if llm is None:
            raise ValueError("AgentLLMNode needs an llm (an LLMProvider such as OpenAIProvider)")
        self.llm = llm
        self.tools = tools
        self.system_prompt = system_prompt
        self.skill_prompt = skill_prompt
        self.max_messages = max_messages
        self.timeout = timeout
        self.constraints = constraints
        self.params = dict(params or {})
        self._system: tuple[str, Message] | None = None

    def visible_tools(self) -> ToolSet:
        """The tools offered to the model (deny-policy tools removed)."""
        from jianmu.nodes.tool_executor import ToolExecutor

        if isinstance(self.tools, ToolExecutor):
            return self.tools.visible_toolset()
        toolset = self.tools if isinstance(self.tools, ToolSet) else ToolSet.from_tools(
            self.tools or ()
        )
        return visible_tools(toolset, self.ctx, self.effective_constraints)

    def request_messages(self) -> list[Message]:
        """The messages sent to the model on this turn."""
        limit = self.max_messages
        if limit is None:
            limit = self.effective_constraints.max_messages
        system = "\n\n".join(p for p in (self.system_prompt, self.skill_prompt) if p)
        history = recent_messages(self.state.get("messages") or [], limit)
        if not system:
            return history
        made = self._system
        if made is None or made[0] != system:  # one message per prompt, not one per turn
            made = self._system = (system, Message.system(system))
        return [made[1], *history]

    async def _ask(self, messages: list[Message], toolset: ToolSet) -> LLMResponse:
        llm, params = self.llm, self.params
        events: AsyncIterator[StreamEvent]
        if takes_requests(llm, stream=self.stream, params=params):
            # what the base `complete` would build, with the toolset's export made once
            # rather than every tool's on every turn
            request = ChatRequest(
                messages=tuple(coerce_messages(messages)),
                tools=tuple(toolset.to_openai(include_deprecated=True)),
                params=dict(params),
            )
            if not self.stream:
                return await llm.send(request)
            events = llm.send_stream(request)
        else:
            tools = list(toolset) or None
            if not self.stream:
                return await llm.complete(messages, tools=tools, **params)
            events = llm.stream(messages, tools=tools, **params)
        async for event in events:
            if isinstance(event, TextDelta):
                self.events.emit("llm.call.delta", text=event.text)
            elif isinstance(event, StreamDone):
                return event.response
        raise LLMError("the model's stream ended without a final response")

    def _canonical(self, response: LLMResponse, toolset: ToolSet) -> tuple[Message, list[ToolCall]]:
        """The reply's calls, canonical once for everything after: each name is the tool it
        resolves to among those offered (an unknown name stays as sent) and each id is unique
        in the run; the assistant message carries the same calls, so observations match it."""
        calls = unique_ids([toolset.canonical(c)[0] for c in response.tool_calls], self)
        if calls == list(response.message.tool_calls or ()):
            return response.message, calls
        return response.message.model_copy(update={"tool_calls": calls}), calls

    async def update_async(self) -> Status:
        """Call the model once and record its reply."""
        from jianmu.nodes.tool_executor import ToolExecutor

        if isinstance(self.tools, ToolExecutor):
            await self.tools.prepare_tools()
        messages = self.request_messages()
        toolset = self.visible_tools()
        model = getattr(self.llm, "model", "") or "unknown"
        timeout = self.timeout or self.ctx.config.llm.timeout
        events, tracer = self.events, self.ctx.tracer
        if events.wants("llm.call.started"):  # the fields only when someone reads them
            events.emit("llm.call.started", model=model, messages=len(messages),
                        tools=toolset.names())
        scope: AbstractContextManager[Span | None] = nullcontext() if tracer is None else span(
            tracer, f"chat {model}",
            {GEN_AI_OPERATION_NAME: "chat", GEN_AI_REQUEST_MODEL: model,
             GEN_AI_AGENT_NAME: self.name},
        )
        with scope as current:
            try:
                steps = self.ctx.steps
                # in a durable run, a turn the model answered is replayed, never re-asked
                asked = self._ask(messages, toolset) if steps is None else steps.run(
                    f"model:{self.path or self.name}", lambda: self._ask(messages, toolset)
                )
                # the loop timer that calls starting together share (`within`), as an
                # asyncio.timeout would, without a timer of its own per turn
                response = await within(asked, timeout, _no_answer)
            except Exception as exc:
                error = (
                    f"the model did not answer within {timeout:g} s"
                    if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
                )
                self.error = exc
                self.feedback_message = error
                if current is not None:
                    current.set_attribute(ERROR_TYPE, type(exc).__name__)
                self.events.emit("llm.call.failed", model=model, error=error,
                                 error_type=type(exc).__name__)
                return Status.FAILURE
            if current is not None:
                current.set_attribute(GEN_AI_USAGE_INPUT_TOKENS, response.usage.input_tokens)
                current.set_attribute(GEN_AI_USAGE_OUTPUT_TOKENS, response.usage.output_tokens)
        message, calls = self._canonical(response, toolset)
        update: dict[str, Any] = {
            "messages": [message],
            "actions": calls,
            "rounds": (self.state.get("rounds") or 0) + 1,
            "usage": response.usage,
        }
        if not calls:
            update["final_answer"] = response.message.content or ""
            update["done"] = True
        self.state.update(update)
        run_usage = usage_view(self)
        if run_usage.namespace != self.state.namespace:
            # a skill's namespace: the run's total lives at the root, for budgets and reports
            run_usage.update({"usage": response.usage})
        if events.wants("llm.call.completed"):
            events.emit(
                "llm.call.completed", model=model, tool_calls=[c.name for c in calls],
                answer_preview=None if calls else preview(response.message.content),
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            )
        return Status.SUCCESS
