"""`Agent`: a ReAct agent in one object — the tree, its state and its runner made for you.

``Agent(llm, tools=[...])`` holds what `create_react_node` takes. ``agent.run_sync("...")``
builds the run a tree author would (`create_react_node` + ``StateManager(AgentState)`` +
`ReactiveRunner`) and returns an `AgentResult`: the `RunResult` with ``output`` set to the
answer of the agent that answered, after any hand-off (the typed one with an ``output_type``,
else the text) and the run's ``runner``. It is a
face over the tree, not another engine: ``agent.as_node()`` is the same tree to place in any
other, ``agent.as_tool(...)`` the same agent as another agent's tool (`agent_tool`).

A run that asks a person suspends as in any tree: ``result.pending`` lists the requests,
``result.approve(id)`` (or ``reject``) decides one, and ``agent.run_sync(resume=result)``
goes on from where it stopped; with a checkpointer, ``agent.restore(run_id)`` gives that
result in another process. ``agent.run_sync("next", history=result.messages)`` continues a
conversation. ``agent.cancel(run_id)`` stops a run from another task or thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import threading
import weakref
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Never

from jianmu.constraints import DEFAULT_MAX_ITERATIONS, Constraints
from jianmu.llm.messages import Message
from jianmu.llm.provider import from_name
from jianmu.nodes._agent_input import conversation
from jianmu.nodes.agents import AgentTool, agent_tool
from jianmu.nodes.executor_config import ToolExecutorConfig
from jianmu.nodes.react import ReActLoop, check_limits, create_react_node, fresh_handoffs
from jianmu.nodes.state import AgentState
from jianmu.runtime._checks import check_run
from jianmu.runtime.context import user_role_names
from jianmu.runtime.events import Event
from jianmu.runtime.runner import ReactiveRunner, RunResult, RunStatus, _trees
from jianmu.runtime.stream import EventStream, on_drop
from jianmu.state import StateManager
from jianmu.tools.calls import is_tool_name
from jianmu.tools.registry import as_tools

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from jianmu.config import AppConfig
    from jianmu.guard.guardrails import Guardrail
    from jianmu.llm.provider import LLMProvider
    from jianmu.nodes.history import ProcessorInput
    from jianmu.nodes.output import OutputMode
    from jianmu.runtime.checkpoint import Checkpointer

__all__ = ("Agent", "AgentResult")


@dataclass(frozen=True, kw_only=True)
class AgentResult(RunResult):
    """A `RunResult` of an `Agent` run: ``output`` is the answer, ``runner`` the run."""

    runner: ReactiveRunner = field(repr=False, compare=False)
    """The run's runner: its state, its checkpoints, the approvals it waits for."""

    def approve(
        self, request_id: str | None = None, message: str | None = None, *,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        """Approve a pending request (when ``request_id`` is omitted, the only one this result
        lists: never one the run asked for since); with ``arguments``, the call runs with those
        instead (`ReactiveRunner.approve`).

        Raises:
            ApprovalEditError: the edited arguments do not fit; nothing was recorded.
            InteractionError: no such request, it was already decided, or it is a question.
            ValueError: no ``request_id`` and the result lists not exactly one request.
        """
        self.runner.approve(self._request(request_id), message, arguments=arguments)

    def answer(self, text: str, *, request_id: str | None = None) -> None:
        """Answer a pending question (when ``request_id`` is omitted, the only request this
        result lists); the id is a keyword, so the runner's order (``runner.answer(id, text)``)
        fails loudly.

        Raises:
            InteractionError: no such request, it was already decided, or it asks for
                approval.
            ValueError: no ``request_id`` and the result lists not exactly one request.
        """
        self.runner.answer(self._request(request_id), text)

    def reject(self, request_id: str | None = None, message: str | None = None) -> None:
        """Reject a pending request (when ``request_id`` is omitted, the only one this result
        lists); ``message`` reaches the model.

        Raises:
            InteractionError: no such request, or it was already decided.
            ValueError: no ``request_id`` and the result lists not exactly one request.
        """
        self.runner.reject(self._request(request_id), message)

    if not TYPE_CHECKING:  # a type checker still flags a misspelt attribute

        def __getattr__(self, name: str) -> Any:
            # only for names the result lacks: a peer's spelling gets Jianmu's in the error
            hint = _RESULT_SPELLINGS.get(name)
            raise _missing(self, name, hint and f"result.{hint}")

    def _request(self, request_id: str | None) -> str:
        if request_id is not None:
            return request_id
        # what this result showed, not what the run waits for now: a result kept from an
        # earlier turn must not decide a request its reader never saw
        waiting = self.pending
        if len(waiting) != 1:
            raise ValueError(
                f"{len(waiting)} requests wait for a decision; name one: "
                f"{', '.join(r.id for r in waiting) or 'none'}"
            )
        return waiting[0].id


_RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunResult))

_RESULT_SPELLINGS = {
    "final_output": "output", "data": "output", "all_messages": "messages",
    "to_input_list": "messages",
    "new_messages": "messages (the whole conversation: this run's follow the history given)",
}
"""Results' attributes in pydantic-ai and the OpenAI Agents SDK, and how Jianmu spells them."""


def _missing(obj: object, name: str, spelling: str | None) -> AttributeError:
    """The AttributeError of ``obj`` lacking ``name``, with Jianmu's spelling when a peer's."""
    return AttributeError(
        f"{type(obj).__name__!r} object has no attribute {name!r}"
        + (f"; Jianmu spells it {spelling}" if spelling else ""), name=name, obj=obj)


_AGENT_SPELLINGS = {
    "run_stream": "agent.stream(prompt)", "iter": "agent.stream(prompt)",
    "run_stream_events": "agent.stream(prompt)", "run_streamed": "agent.stream(prompt)",
    "instructions": "agent.system_prompt",
    "tool": "Agent(..., tools=[function])", "tool_plain": "Agent(..., tools=[function])",
}
"""Agents' attributes in pydantic-ai and the OpenAI Agents SDK, and how Jianmu spells them."""

_SPELLINGS = {
    "instructions": "system_prompt=", "model_settings": "llm_params=",
    "handoffs": "tools=[handoff(agent), ...]", "model": "the first argument, llm",
    "retries": "output_retries=", "result_type": "output_type=",
    "max_turns": "max_iterations=",
}
"""Keywords of pydantic-ai and the OpenAI Agents SDK, and how Jianmu spells them."""


_RUN_SPELLINGS = {
    "message_history": "history=", "model_settings": "Agent(..., llm_params=...)",
    "usage_limits": "Agent(..., constraints=...) (guard.budget, max_iterations)",
    "output_type": "Agent(..., output_type=...)", "max_turns": "Agent(..., max_iterations=...)",
    "input": "the first argument, prompt",
    "deps": "extras={...} (a tool reads them from its RunContext: ctx.extras)",
    "context": "extras={...} (a tool reads them from its RunContext: ctx.extras)",
}
"""Keywords of pydantic-ai's ``agent.run`` and the Agents SDK's ``Runner.run``, in Jianmu."""


def _unexpected(method: str, keywords: Mapping[str, Any]) -> TypeError:
    """The TypeError of ``Agent.<method>()`` given ``keywords`` it does not take, with Jianmu's
    spelling of a peer's."""
    key = next(iter(keywords))
    hint = _RUN_SPELLINGS.get(key)
    return TypeError(f"Agent.{method}() got an unexpected keyword argument {key!r}"
                     + (f"; Jianmu spells it {hint}" if hint else ""))


def _check_options(options: Mapping[str, Any]) -> None:
    """Refuse a keyword `create_react_node` does not take, in the `Agent`'s name (the caller
    never called create_react_node) and with Jianmu's spelling of a peer's keyword."""
    if not options:
        return
    import inspect  # only when options are given: off the plain path

    known = inspect.signature(create_react_node).parameters
    for key in options:
        if key not in known:
            hint = _SPELLINGS.get(key)
            raise TypeError(
                f"Agent() got an unexpected keyword argument {key!r}"
                + (f"; Jianmu spells it {hint}" if hint else "")
            )


def _check_stores(config: Any, checkpointer: Any) -> None:
    """Refuse a file's path given for the config or the checkpointer (else an AttributeError
    when the agent is made, or when its first run saves).

    Raises:
        TypeError: naming what makes one of the path.
    """
    if config is not None and not callable(getattr(config, "constraints", None)):
        raise TypeError(f"config must be an AppConfig, got {type(config).__name__}: load a "
                        "file with jianmu.config.load_config(path)")
    if checkpointer is not None and not all(
        callable(getattr(checkpointer, method, None)) for method in ("save", "load")
    ):
        raise TypeError(f"checkpointer must be a Checkpointer, got {type(checkpointer).__name__}"
                        ": a file of runs is SQLiteCheckpointer(path)")


class Agent:
    """A ReAct agent: a model, its tools, its prompt and answer type, run in one call.

    Args:
        llm: the model provider, or a ``"provider:model"`` name (``"openai:gpt-4o"``);
            required.
        tools: the tools the model may call (`Tool`s, ``@tool`` functions, a `ToolSet`,
            `handoff`s and other agents' ``as_tool()``).
        system_prompt: the system message.
        output_type: the answer's type (a pydantic model, dataclass, ``list[X]``...); the
            result's ``output`` is then a validated object of it, else the answer's text
            (``str``, or a union holding it, takes a text answer as it is). A list of types
            is one of them, as in pydantic-ai: ``[Forecast, str]``.
        output_mode: ``"tool"``, ``"native"`` or ``"text"`` (`create_react_node`).
        output_retries: answers that may fail validation before `OutputValidationError`.
        constraints: the agent's layer of constraints (tighten only): tool policies,
            budgets, limits.
        name: the agent's name (its tree's, and its tool's by default).
        max_iterations: the most model turns per run.
        history_processors: what shapes the messages sent (`trim_history`, ...).
        config: the configuration of its runs (default: the shared defaults); its guard
            and sandbox settings also hold where its tree runs in another's run (``as_tool``,
            a hand-off, ``as_node``), as a layer that tightens only.
        checkpointer: where its runs are saved (a suspended one can resume in a new process:
            `restore`).
        interactive: whether a person can approve; without, confirm policies become deny
            and questions go unanswered, wherever its tree runs (as another agent's tool, a
            hand-off target, ``as_node`` in another tree), even where a person answers.
        user_roles: roles of the user its runs act for (``admin`` unlocks admin_only tools).
        input_guardrails: guardrails of the user's message (`jianmu.guard.guardrails`).
        output_guardrails: guardrails of the answer.
        tool_output_guardrails: guardrails of each tool result.
        tracer_provider: where its runs' spans go (`ReactiveRunner`; e.g.
            `jianmu.telemetry.tracer_provider`); default the global provider.
        **options: any other keyword of `create_react_node` (``max_messages``,
            ``llm_params``, ``executor_config``, ``stream``...).
    """

    def __init__(
        self,
        llm: LLMProvider | str | None = None,
        *,
        tools: Sequence[Any] | None = None,
        system_prompt: str = "",
        output_type: Any = None,
        output_mode: OutputMode = "tool",
        output_retries: int = 2,
        constraints: Constraints | None = None,
        name: str = "agent",
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        history_processors: Sequence[ProcessorInput] | None = None,
        executor_config: ToolExecutorConfig | None = None,
        config: AppConfig | None = None,
        checkpointer: Checkpointer | None = None,
        interactive: bool = True,
        user_roles: Iterable[str] = (),
        input_guardrails: Sequence[Guardrail] = (),
        output_guardrails: Sequence[Guardrail] = (),
        tool_output_guardrails: Sequence[Guardrail] = (),
        tracer_provider: TracerProvider | None = None,
        **options: Any,
    ) -> None:
        _check_options(options)  # first: the Agents SDK's Agent(name=, model=) gets its hint
        if llm is None:  # required, but a default so that a peer's keyword is named first
            raise TypeError("Agent() needs llm, its model: a provider (OpenAIProvider(...)) or "
                            "a 'provider:model' name, as the first argument: "
                            "Agent('openai:gpt-4o', ...)")
        # before the constraints are merged and the executor's settings copied
        check_limits(max_iterations, constraints, options.get("max_messages"), executor_config)
        _check_stores(config, checkpointer)
        self.llm = llm
        # a named model ("openai:gpt-4o") made a provider once: every tree of the agent (runs
        # at once, as_tool calls) shares its client and kept-alive connections, rather than
        # leaving a client with open sockets behind per tree
        self._llm = from_name(llm) if isinstance(llm, str) else llm
        # functions made tools once, not per run; a tuple, as every tree of the agent is made
        # of these (one appended later reached only the trees built after it)
        self._tools: tuple[Any, ...] = tuple(as_tools(tools) or ())
        self.system_prompt = system_prompt
        self.output_type = output_type
        self.name = name
        self.config = config
        self.checkpointer = checkpointer
        self.interactive = interactive
        self.user_roles = tuple(user_role_names(user_roles))
        self.tracer_provider = tracer_provider
        if config is not None:
            # the config's layer goes with the tree too: as another agent's tool or hand-off
            # target the tree runs under the caller's config, and the guard rules and sandbox
            # of its own (a denied tool, network: false) were dropped (tighten only: the same
            # layer merged again in its own runs changes nothing)
            constraints = Constraints.merge(config.constraints(), constraints)
        if not interactive:  # and so does asking nobody: a hand-off target, a node elsewhere
            executor_config = (executor_config or ToolExecutorConfig()).model_copy(
                update={"interactive": False})
        self._node_options: dict[str, Any] = {
            "system_prompt": system_prompt, "output_type": output_type,
            "output_mode": output_mode, "output_retries": output_retries,
            "constraints": constraints, "name": name, "max_iterations": max_iterations,
            "history": history_processors, "executor_config": executor_config,
            "input_guardrails": input_guardrails, "output_guardrails": output_guardrails,
            "tool_output_guardrails": tool_output_guardrails, **options,
        }
        self._shared: ReActLoop = self.as_node()  # checks the arguments now, not on a run
        self._shared_free = True
        self._lock = threading.Lock()
        self._runs: weakref.WeakSet[ReactiveRunner] = weakref.WeakSet()
        """The runners of this agent's runs, while someone holds them (for ``resume=``)."""

    if not TYPE_CHECKING:  # a type checker still flags a misspelt attribute

        def __getattr__(self, name: str) -> Any:
            # only for names the agent lacks: a peer's spelling gets Jianmu's in the error
            raise _missing(self, name, _AGENT_SPELLINGS.get(name))

    @property
    def tools(self) -> tuple[Any, ...]:
        """The agent's tools, fixed when it is made (functions made tools)."""
        return self._tools

    # -- the tree --------------------------------------------------------------------------
    def as_node(self) -> ReActLoop:
        """A fresh tree of this agent (`create_react_node`), to place in any other tree.

        Raises:
            ConfigError, ToolValidationError, HandoffError: as `create_react_node`.
        """
        # the hand-off targets built afresh as well: a run binds its team's nodes to itself
        return create_react_node(self._llm, fresh_handoffs(self._tools), **self._node_options)

    def as_tool(
        self, name: str | None = None, description: str = "", *, input_type: Any = str
    ) -> AgentTool:
        """This agent as another agent's tool (`agent_tool`): each call a run of a fresh tree
        of it, under the caller's guard, budget and approvals.

        Args:
            name: the tool's name; default the agent's, made a tool name if it is not one
                (``"Research Assistant"``: ``research_assistant``).
            description: when to call it, for the model.
            input_type: the input's type (default: the question as text).
        """
        if name is None:
            name = self.name if is_tool_name(self.name) else (
                re.sub(r"[^a-z0-9_-]+", "_", self.name.lower()).strip("_")[:64] or "agent")
        return agent_tool(self.as_node, name=name,
                          description=description or f"Ask the {self.name} agent.",
                          input_type=input_type, interactive=self.interactive)

    # -- running ---------------------------------------------------------------------------
    async def run(
        self,
        prompt: str | Message | None = None,
        *,
        history: Sequence[Message | Mapping[str, Any]] | None = None,
        resume: AgentResult | None = None,
        timeout: float | None = None,
        extras: Mapping[str, Any] | None = None,
        **peer: Never,
    ) -> AgentResult:
        """Answer ``prompt`` (after ``history``, a conversation so far: `Message`s, OpenAI chat
        dicts, or the OpenAI Agents SDK's ``to_input_list()`` items), or go on with the
        suspended run ``resume`` once its requests are decided. ``extras`` are what its tools
        (a sub-agent's too) reach as ``ctx.extras`` through a `RunContext` parameter: a client,
        a session, the user (pydantic-ai's ``deps``); with ``resume``, added to the run's.

        Raises:
            ValueError: no prompt and nothing to resume, ``resume`` is not suspended, a
                history item no chat message stands for (a hosted tool's call, a dict of
                another shape: named by its place, ``history[2]``), or a prompt that is not
                the user's message.
            TypeError: a prompt that is not a message (a list: pass it as ``history=``), or
                a ``history`` that is not a list of messages.
            ValueError, TypeError: a ``timeout`` that is not a number of seconds > 0.
            TypeError: a keyword it does not take (a peer's gets Jianmu's spelling:
                ``message_history=`` is ``history=``).
        """
        if peer:
            raise _unexpected("run", peer)
        runner = self._runner(prompt, history, resume, timeout, extras)
        try:
            result = await runner.run(timeout=timeout)
        finally:
            self._release(runner)
        return self._result(runner, result)

    def run_sync(
        self,
        prompt: str | Message | None = None,
        *,
        history: Sequence[Message | Mapping[str, Any]] | None = None,
        resume: AgentResult | None = None,
        timeout: float | None = None,
        extras: Mapping[str, Any] | None = None,
        **peer: Never,
    ) -> AgentResult:
        """`run` from synchronous code (through `ReactiveRunner.run_sync`).

        Raises:
            RuntimeError: called inside a running event loop (``await agent.run()`` there).
            ValueError, TypeError: as `run`.
        """
        if peer:
            raise _unexpected("run_sync", peer)
        runner = self._runner(prompt, history, resume, timeout, extras)
        try:
            result = runner.run_sync(timeout=timeout)
        finally:
            self._release(runner)
        return self._result(runner, result)

    def stream(
        self,
        prompt: str | Message | None = None,
        *,
        history: Sequence[Message | Mapping[str, Any]] | None = None,
        resume: AgentResult | None = None,
        timeout: float | None = None,
        extras: Mapping[str, Any] | None = None,
        **peer: Never,
    ) -> EventStream:
        """`run`, yielding its events as they happen (`ReactiveRunner.stream`): the model's
        text as ``llm.call.delta``, tool calls, and last ``run.finished``, whose
        ``fields["result"]`` is the `AgentResult`. Leaving the loop early cancels the run;
        ``async with agent.stream(...) as events:`` waits for that on leaving the block.

        Raises:
            ValueError, TypeError: as `run`; a keyword it does not take, at once.
        """
        if peer:
            raise _unexpected("stream", peer)
        streaming: list[ReactiveRunner] = []  # the run, while this stream runs it
        reader = self._stream(prompt, history, resume, timeout, extras, streaming)
        # a plain ``break`` drops this generator, not the runner's stream it holds: the run
        # stops as this one is dropped, not once Python has closed both
        on_drop(reader, functools.partial(_stop_streamed, streaming))
        return EventStream(reader)

    async def _stream(
        self, prompt: str | Message | None, history: Any, resume: AgentResult | None,
        timeout: float | None, extras: Mapping[str, Any] | None,
        streaming: list[ReactiveRunner],
    ) -> AsyncGenerator[Event, None]:
        runner = self._runner(prompt, history, resume, timeout, extras)
        try:
            # closed here, not when collected: leaving this stream stops the run at once
            async with contextlib.aclosing(runner.stream(timeout=timeout)) as events:
                streaming.append(runner)
                async for event in events:
                    result = event.fields.get("result")
                    if event.name == "run.finished" and isinstance(result, RunResult) \
                            and result.run_id == runner.run_id:
                        streaming.clear()  # the run has returned: nothing left to stop
                        event = dataclasses.replace(
                            event, fields={**event.fields, "result": self._result(runner, result)}
                        )
                    yield event
        finally:
            streaming.clear()
            self._release(runner)

    def cancel(self, run_id: str) -> bool:
        """Stop the run ``run_id`` of this agent, from any task or thread, as
        `ReactiveRunner.cancel` does: it ends CANCELLED at its next wake-up (running tools see
        `CancelledError`), and its stream ends with that ``run.finished``. The id is every
        event's ``run_id``. Whether such a run was running (one that ended: nothing to stop).
        """
        with self._lock:  # a run started meanwhile on another thread: "changed size"
            runs = list(self._runs)
        for runner in runs:
            if runner.run_id == run_id and runner._running:
                runner.cancel()
                return True
        return False

    def restore(self, run_id: str, *, extras: Mapping[str, Any] | None = None) -> AgentResult:
        """The run ``run_id`` as this agent's checkpointer last saved it, also in another
        process: a run stopped before its end (suspended, or its process died) is SUSPENDED,
        its result listing what it waits for (``approve()``, then ``run(resume=result)``);
        a finished one's result holds its answer. As `ReactiveRunner.restore`, it holds the
        run on a checkpointer that leases runs, until a run of it returns. ``extras`` as
        `run` takes them (they are never checkpointed).

        Raises:
            ValueError: the agent has no checkpointer.
            CheckpointError: no checkpoint of ``run_id``, or one of another tree.
            RunClaimedError: another owner holds the run.
        """
        if self.checkpointer is None:
            raise ValueError(
                "restore() reads the agent's checkpointer: make it with Agent(..., "
                "checkpointer=SQLiteCheckpointer(path))"
            )
        runner = ReactiveRunner.restore(
            self.as_node(), self.checkpointer, run_id, state_manager=StateManager(AgentState),
            config=self.config, interactive=self.interactive,
            tracer_provider=self.tracer_provider, extras=dict(extras or {}),
        )
        with self._lock:
            self._runs.add(runner)
        result = runner._finished  # a run that ended: its result, as the runner returns it
        if result is None:  # stopped before its end (suspended, or its process died)
            state = runner.state
            result = RunResult(
                status=RunStatus.SUSPENDED, run_id=runner.run_id, pending=tuple(runner.pending),
                output=state.get("final_output"), messages=tuple(state.get("messages") or ()),
                usage=state.get("usage"),
            )
        return self._result(runner, result)

    # -- the parts -------------------------------------------------------------------------
    def _runner(
        self, prompt: str | Message | None, history: Any, resume: AgentResult | None,
        timeout: float | None, extras: Mapping[str, Any] | None = None,
    ) -> ReactiveRunner:
        check_run(None, timeout)  # before a runner is made: refused as run() refuses it
        if extras is not None and not isinstance(extras, Mapping):
            raise TypeError(f"extras= takes a dict of what the tools reach as "
                            f"ctx.extras, got {type(extras).__name__}")
        if resume is not None:
            if not isinstance(resume, AgentResult):
                raise TypeError(f"resume= takes the AgentResult of a suspended run of this "
                                f"agent, got {type(resume).__name__}")
            if prompt is not None or history is not None:
                raise ValueError(
                    "resume= goes on with a suspended run as it was; to ask something new, "
                    "pass history=result.messages instead"
                )
            if resume.runner not in self._runs:
                raise ValueError("resume= takes the result of a run of this agent")
            if resume.status is not RunStatus.SUSPENDED:
                raise ValueError(
                    f"the run to resume is {resume.status.value}, not waiting for a decision; "
                    "to go on talking, pass history=result.messages with the next prompt"
                )
            if extras:  # a run restored elsewhere has none of the first process's clients
                resume.runner.ctx.extras.update(extras)
            return resume.runner
        if prompt is None:
            raise ValueError("Agent.run() needs a prompt (or resume= a suspended result)")
        if not isinstance(prompt, (str, Message, Mapping)):
            # a list is the Agents SDK's Runner.run(agent, input): a conversation, not a turn
            raise TypeError(
                f"Agent.run()'s prompt is the user's message (text or a Message), not a "
                f"{type(prompt).__name__}; for a conversation so far, pass it as history=... "
                f"and its last user message as the prompt"
            )
        # a history kept as the Agents SDK's to_input_list() gives it: its items made messages
        state = StateManager(AgentState, {"messages": conversation(prompt, history)})
        runner = ReactiveRunner(
            self._take(), state, config=self.config, checkpointer=self.checkpointer,
            interactive=self.interactive, user_roles=self.user_roles,
            tracer_provider=self.tracer_provider, extras=dict(extras or {}),
        )
        with self._lock:
            self._runs.add(runner)
        return runner

    def _take(self) -> ReActLoop:
        """The shared tree when it is free; a fresh one while another run holds it (runs at
        once, one waiting for a person, an ended run's runner that goes on with it, a
        timed-out one whose stopped tasks still clean up)."""
        with self._lock:
            if self._shared_free and not _in_use(self._shared):
                self._shared_free = False
                return self._shared
        return self.as_node()

    def _release(self, runner: ReactiveRunner) -> None:
        """Free the shared tree once its run is over (not while it waits for a person, nor
        while another call goes on with it: a ``resume=`` refused as already running)."""
        if runner.root is self._shared and not runner.pending and not runner._running:
            with self._lock:
                self._shared_free = True

    def _result(self, runner: ReactiveRunner, result: RunResult) -> AgentResult:
        fields = {name: getattr(result, name) for name in _RUN_FIELDS}
        if fields["output"] is None and not self._typed_answer(runner):
            fields["output"] = runner.state.get("final_answer")  # the text answer
        return AgentResult(**fields, runner=runner)

    def _typed_answer(self, runner: ReactiveRunner) -> bool:
        """Whether the agent that answered (after hand-offs, maybe not this one) has an output
        type: its ``final_output`` is the answer then, None too (an ``Optional`` type's), and
        its text only the raw form of it."""
        root = runner.root
        if not isinstance(root, ReActLoop):
            return self.output_type is not None
        node = root.answering_node(runner.state.get("active_agent"))
        return node.output is not None if node is not None else self.output_type is not None

    def __repr__(self) -> str:
        return f"<Agent {self.name!r} tools={len(self._tools)}>"


def _in_use(root: ReActLoop) -> bool:
    """Whether a runner still works on ``root``: the last to run it runs it again (a result's
    ``runner.send(...)`` and ``run()``, a conversation going on), or its stopped tasks still
    clean up after its timeout, writing to its state (`RunContext.cleaning`)."""
    known = _trees.get(root)
    owner = known() if known is not None else None
    return owner is not None and (owner._running or bool(owner.ctx.cleaning))


def _stop_streamed(streaming: list[ReactiveRunner]) -> None:
    """Stop the run an `Agent.stream` left by its reader runs, if it still runs."""
    for runner in streaming:
        if runner._running:
            runner.cancel()
